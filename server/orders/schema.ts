import { z } from 'zod'
import { SkuSchema } from '../stock/schema'
import { paymentStatusPrecedence } from './payment-state'

const MAX_MINOR_UNITS = Number.MAX_SAFE_INTEGER
// Range first, then integrality (zod skips the refinement once the range failed): one clear message each.
// The refinement is invisible to JSON Schema: the description says `integer` itself.
const integer = { override: { type: 'integer' } } as const
const minorUnits = z.number().min(0).max(MAX_MINOR_UNITS, 'must be at most 2^53 − 1').refine(Number.isInteger, 'must be an integer in minor units').meta(integer)

export const paymentMethods = ['card', 'bank_transfer', 'ewallet'] as const

export const OrderItemSchema = z.object({
  sku: SkuSchema,
  quantity: z.number().min(1).max(10_000).refine(Number.isInteger, 'must be an integer').meta(integer),
  unitPrice: minorUnits,
})

/**
 * The order body of docs/api.md#create-an-order--exactly-once. Unknown fields are stripped; amounts
 * are integers in minor units.
 */
export const CreateOrderSchema = z.object({
  cartId: z.string().regex(/^[\x21-\x7E]{1,128}$/, 'must be 1–128 visible ASCII characters'),
  currency: z.string().regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code: 3 upper-case letters'),
  amount: minorUnits,
  paymentMethod: z.enum(paymentMethods),
  items: z.array(OrderItemSchema).min(1).max(100),
  customer: z.object({ email: z.email().max(254) }),
}).superRefine((order, ctx) => {
  // Object refinements run even when a field failed: only compare a total built from valid numbers.
  const numbers = [order.amount, ...order.items.flatMap(item => [item.quantity, item.unitPrice])]
  if (!numbers.every(Number.isSafeInteger)) return
  // BigInt: quantity × unitPrice can pass 2^53 even when each factor is safe.
  const total = order.items.reduce((sum, item) => sum + BigInt(item.quantity) * BigInt(item.unitPrice), 0n)
  if (total !== BigInt(order.amount)) {
    ctx.addIssue({ code: 'custom', path: ['amount'], message: `must equal the sum of quantity × unitPrice over items (${total})` })
  }
})

export type CreateOrderInput = z.output<typeof CreateOrderSchema>

/**
 * The example order of docs/api.md#create-an-order--exactly-once: the API description's example,
 * and the tests' known answer.
 */
export const exampleOrder: CreateOrderInput = {
  cartId: 'crt_123',
  currency: 'IDR',
  amount: 150000,
  paymentMethod: 'bank_transfer',
  items: [{ sku: 'SKU-1', quantity: 2, unitPrice: 75000 }],
  customer: { email: 'a@b.co' },
}

export const OrderIdSchema = z.string().regex(/^ord_[\w-]{1,64}$/)

/**
 * The instants a filter can name: years 1–9999, the four-digit years of ISO 8601. A later one would
 * reach Postgres as an expanded year (`+018953-…`) it cannot parse.
 */
const earliestInstant = Date.parse('0001-01-01T00:00:00Z')
const latestInstant = Date.parse('9999-12-31T23:59:59.999Z')

/** An ISO 8601 date-time or Unix seconds (Stripe's `created` filters). */
const instant = z.union([
  z.string().regex(/^\d{1,12}$/).transform(seconds => new Date(Number(seconds) * 1000)),
  z.iso.datetime({ offset: true }).transform(text => new Date(text)),
], { error: 'must be an ISO 8601 date-time (2026-12-01T09:00:00Z) or Unix seconds' })
  .refine(date => date.getTime() >= earliestInstant && date.getTime() <= latestInstant, { error: 'must fall in the years 0001 to 9999 (Unix seconds up to 253402300799)' })

/** GET /api/orders (docs/api.md#list-orders): Stripe's list parameters. */
export const OrderListQuery = z.object({
  status: z.enum(paymentStatusPrecedence).optional(),
  created_gte: instant.optional(),
  created_lt: instant.optional(),
  limit: z.coerce.number().int('must be an integer').min(1, 'must be 1 or more').max(100, 'must be at most 100').default(20),
  starting_after: OrderIdSchema.optional(),
}).strict()
