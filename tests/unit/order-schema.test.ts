import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { CreateOrderSchema } from '../../server/orders/schema'
import { orderItemArbitrary, type OrderPayload, exampleOrder, validOrderArbitrary } from '../support/order-arbitraries'

const MAX_SAFE = Number.MAX_SAFE_INTEGER

/** Parses the example order with some fields replaced; never throws, whatever the input. */
const parseWith = (fields: Record<string, unknown>) => CreateOrderSchema.safeParse({ ...exampleOrder, ...fields })

/** The dotted path of every issue, in order: `items.0.quantity`. */
function issuePaths(fields: Record<string, unknown>): string[] {
  const result = parseWith(fields)
  expect(result.success).toBe(false)
  return result.error!.issues.map(issue => issue.path.join('.'))
}

const item = (quantity: unknown, unitPrice: unknown) => ({ sku: 'SKU-1', quantity, unitPrice })

describe('CreateOrderSchema', () => {
  it('accepts the example order of docs/api.md unchanged', () => {
    expect(CreateOrderSchema.parse(exampleOrder)).toEqual(exampleOrder)
  })

  it('strips unknown fields at the top level, in items and in customer', () => {
    const parsed = CreateOrderSchema.parse({
      ...exampleOrder,
      coupon: 'FREE',
      items: [{ ...exampleOrder.items[0], discount: 100 }],
      customer: { ...exampleOrder.customer, isAdmin: true },
    })
    expect(parsed).toEqual(exampleOrder)
    expect(Object.keys(parsed).sort()).toEqual(['amount', 'cartId', 'currency', 'customer', 'items', 'paymentMethod'])
    expect(Object.keys(parsed.items[0]!).sort()).toEqual(['quantity', 'sku', 'unitPrice'])
    expect(Object.keys(parsed.customer)).toEqual(['email'])
  })

  it('accepts every generated valid order as is', () => {
    fc.assert(fc.property(validOrderArbitrary, (order) => {
      expect(CreateOrderSchema.parse(order)).toEqual(order)
    }))
  })

  it('rejects an amount that differs from Σ quantity × unitPrice, on the path "amount"', () => {
    fc.assert(fc.property(validOrderArbitrary, fc.integer({ min: -1_000_000, max: 1_000_000 }), (order, offset) => {
      const amount = order.amount + offset
      fc.pre(offset !== 0 && amount >= 0)
      const result = CreateOrderSchema.safeParse({ ...order, amount })
      expect(result.success).toBe(false)
      expect(result.error!.issues.map(issue => issue.path)).toEqual([['amount']])
    }))
  })

  it('sums several items: 2 × 75000 + 3 × 1000 = 153000', () => {
    const items = [item(2, 75_000), item(3, 1_000)]
    expect(parseWith({ items, amount: 153_000 }).success).toBe(true)
    expect(issuePaths({ items, amount: 150_000 })).toEqual(['amount'])
  })

  it.each([
    ['no items', []],
    ['101 items', Array.from({ length: 101 }, () => item(1, 0))],
  ])('rejects %s', (_, items) => {
    expect(issuePaths({ items, amount: 0 })).toContain('items')
  })

  it('accepts 100 items', () => {
    expect(parseWith({ items: Array.from({ length: 100 }, () => item(1, 5)), amount: 500 }).success).toBe(true)
  })

  it.each(['idr', 'IDRR', 'ID', 'I$R'])('rejects currency %j', (currency) => {
    expect(issuePaths({ currency })).toEqual(['currency'])
  })

  it.each(['cash', 'CARD', ''])('rejects paymentMethod %j', (paymentMethod) => {
    expect(issuePaths({ paymentMethod })).toEqual(['paymentMethod'])
  })

  it.each(['card', 'bank_transfer', 'ewallet'])('accepts paymentMethod %j', (paymentMethod) => {
    expect(parseWith({ paymentMethod }).success).toBe(true)
  })

  it.each([
    ['a fraction', 150_000.5],
    ['a negative number', -1],
    ['2^53', 2 ** 53],
    ['a string of digits', '150000'],
    ['null', null],
  ])('rejects an amount that is %s', (_, amount) => {
    expect(issuePaths({ amount })).toContain('amount')
  })

  it.each([
    ['quantity 0', item(0, 0), 'items.0.quantity'],
    ['a fractional quantity', item(1.5, 100_000), 'items.0.quantity'],
    ['a quantity given as a string', item('2', 75_000), 'items.0.quantity'],
    ['a negative unitPrice', item(1, -1), 'items.0.unitPrice'],
    ['a fractional unitPrice', item(2, 75_000.5), 'items.0.unitPrice'],
    ['a unitPrice given as a string', item(2, '75000'), 'items.0.unitPrice'],
    ['a unitPrice of 2^53', item(1, 2 ** 53), 'items.0.unitPrice'],
  ])('rejects an item with %s', (_, badItem, path) => {
    expect(issuePaths({ items: [badItem] })).toContain(path)
  })

  it('accepts a total of exactly 2^53 − 1', () => {
    expect(parseWith({ items: [item(1, MAX_SAFE)], amount: MAX_SAFE }).success).toBe(true)
    expect(parseWith({ items: [item(1, MAX_SAFE - 2), item(2, 1)], amount: MAX_SAFE }).success).toBe(true)
  })

  it.each([
    // 3 × 3002399751580331 = 2^53 + 1, which floating point rounds down to 2^53.
    ['a product past 2^53', [item(3, 3_002_399_751_580_331)], MAX_SAFE],
    ['a product that floating point rounds', [item(10_000, 900_719_925_474_100)], MAX_SAFE],
    // (2^53 − 1) + 1 + 1 is 2^53 + 1 exactly but 2^53 in floating point.
    ['a sum past 2^53', [item(1, MAX_SAFE), item(1, 1), item(1, 1)], MAX_SAFE],
    ['a sum past 2^53 claimed as its rounded value', [item(1, MAX_SAFE), item(1, 1), item(1, 1)], 2 ** 53],
  ])('rejects %s rather than accepting an inexact total', (_, items, amount) => {
    expect(issuePaths({ items, amount })).toContain('amount')
  })

  it('accepts an order exactly when amount is the exact total and that total is at most 2^53 − 1', () => {
    const bigItem = fc.record({
      sku: fc.constant('SKU-BIG'),
      quantity: fc.integer({ min: 1, max: 10_000 }),
      unitPrice: fc.oneof(fc.integer({ min: 0, max: MAX_SAFE }), fc.integer({ min: MAX_SAFE - 1000, max: MAX_SAFE })),
    })
    const items = fc.array(fc.oneof(orderItemArbitrary, bigItem), { minLength: 1, maxLength: 5 })
    fc.assert(fc.property(items, fc.integer({ min: 0, max: MAX_SAFE }), fc.boolean(), (orderItems, arbitraryAmount, useFloatTotal) => {
      const exactTotal = orderItems.reduce((sum, { quantity, unitPrice }) => sum + BigInt(quantity) * BigInt(unitPrice), 0n)
      const floatTotal = orderItems.reduce((sum, { quantity, unitPrice }) => sum + quantity * unitPrice, 0)
      const amount = useFloatTotal ? floatTotal : arbitraryAmount
      const order: OrderPayload = { ...exampleOrder, items: orderItems, amount }
      const expected = exactTotal <= BigInt(MAX_SAFE) && BigInt(amount) === exactTotal
      expect(CreateOrderSchema.safeParse(order).success).toBe(expected)
    }))
  })

  it.each([
    ['cartId', ''],
    ['cartId', 'crt 123'],
    ['customer', { email: 'not-an-email' }],
    ['customer', {}],
  ])('rejects %s=%j', (field, value) => {
    expect(issuePaths({ [field]: value })[0]).toMatch(new RegExp(`^${field}`))
  })
})
