import { z } from 'zod'
import { refundReasons } from '../../shared/statuses'
import { RestockItemSchema } from '../stock/schema'

/**
 * The refund body of docs/payments-and-refunds.md#refunds-and-cancellation. `amount` defaults to
 * all that remains, in the order's units; `restock` puts units back (docs/inventory.md#restock-on-refund).
 */
export const CreateRefundSchema = z.object({
  amount: z.number().int('must be an integer in the order\'s units').positive('must be more than 0').max(Number.MAX_SAFE_INTEGER, 'must be at most 2^53 − 1').optional(),
  reason: z.enum(refundReasons).optional(),
  /** Put the units back on sale (docs/inventory.md#restock-on-refund): `items`, or all the payment took. */
  restock: z.boolean().optional(),
  items: z.array(RestockItemSchema).min(1).max(100).optional(),
}).strict().superRefine((refund, ctx) => {
  if (refund.items && refund.restock !== true) ctx.addIssue({ code: 'custom', path: ['items'], message: 'names what to restock: send it with "restock": true' })
})
export type CreateRefundInput = z.output<typeof CreateRefundSchema>

export const RefundIdSchema = z.string().regex(/^re_[\w-]{1,64}$/)
