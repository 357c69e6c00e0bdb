import fc from 'fast-check'
import { paymentMethods, exampleOrder as schemaExampleOrder } from '../../server/orders/schema'

/**
 * Order payloads for the schema and fingerprint suites: the example order of docs/api.md and
 * fast-check generators.
 */

export interface OrderPayload {
  cartId: string
  currency: string
  amount: number
  paymentMethod: typeof paymentMethods[number]
  items: Array<{ sku: string, quantity: number, unitPrice: number }>
  customer: { email: string }
}

/** The example order of docs/api.md#create-an-order--exactly-once (one copy, beside the schema). */
export const exampleOrder: OrderPayload = schemaExampleOrder

export const orderTopLevelFields = ['cartId', 'currency', 'amount', 'paymentMethod', 'items', 'customer'] as const
export const orderItemFields = ['sku', 'quantity', 'unitPrice'] as const
export const orderCustomerFields = ['email'] as const

export const visibleAscii = (minLength: number, maxLength: number) =>
  fc.string({ unit: fc.integer({ min: 0x21, max: 0x7E }).map(code => String.fromCharCode(code)), minLength, maxLength })

const lowerAlnum = (minLength: number, maxLength: number) =>
  fc.string({ unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789'), minLength, maxLength })

// Plain addresses every validator accepts: fc.emailAddress() covers RFC 5322 corners zod rejects.
const simpleEmail = fc.tuple(lowerAlnum(1, 20), lowerAlnum(1, 20), fc.stringMatching(/^[a-z]{2,6}$/))
  .map(([local, domain, tld]) => `${local}@${domain}.${tld}`)

// Bounded so that 100 items × 10 000 × 10^9 stays well under 2^53: the total is always exact.
const MAX_GENERATED_UNIT_PRICE = 1_000_000_000

/** SKUs of every character SKU_PATTERN allows. */
export const skuArbitrary = fc.string({ unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.~:@!$&\'()*+,;=-'), minLength: 1, maxLength: 64 })

export const orderItemArbitrary = fc.record({
  sku: skuArbitrary,
  quantity: fc.integer({ min: 1, max: 10_000 }),
  unitPrice: fc.integer({ min: 0, max: MAX_GENERATED_UNIT_PRICE }),
})

/** Orders that satisfy CreateOrderSchema (docs/api.md#create-an-order--exactly-once), amount included. */
export const validOrderArbitrary: fc.Arbitrary<OrderPayload> = fc.record({
  cartId: visibleAscii(1, 128),
  currency: fc.stringMatching(/^[A-Z]{3}$/),
  paymentMethod: fc.constantFrom(...paymentMethods),
  items: fc.array(orderItemArbitrary, { minLength: 1, maxLength: 100 }),
  customer: fc.record({ email: simpleEmail }),
}).map(order => ({ ...order, amount: order.items.reduce((sum, item) => sum + item.quantity * item.unitPrice, 0) }))

/** Extra JSON fields whose names the schema does not know, to be mixed into a payload. */
export function unknownFieldsArbitrary(knownFields: readonly string[]): fc.Arbitrary<Record<string, unknown>> {
  return fc.dictionary(fc.string().filter(name => !knownFields.includes(name)), fc.jsonValue(), { maxKeys: 4 })
}
