import { z } from 'zod'
import { refundReasons } from '../../shared/statuses'

/**
 * The refund body of docs/payments-and-refunds.md#refunds-and-cancellation. `amount` defaults to
 * all that remains, in the order's units.
 */
export const CreateRefundSchema = z.object({
  amount: z.number().int('must be an integer in the order\'s units').positive('must be more than 0').max(Number.MAX_SAFE_INTEGER, 'must be at most 2^53 − 1').optional(),
  reason: z.enum(refundReasons).optional(),
}).strict()
export type CreateRefundInput = z.output<typeof CreateRefundSchema>

export const RefundIdSchema = z.string().regex(/^re_[\w-]{1,64}$/)
