import { z } from 'zod'
import { defineJobType } from '../../jobs/types'

export const MockpayDelivery = z.object({
  webhookId: z.string().min(1),
  type: z.enum(['payment.succeeded', 'payment.failed', 'payment.refunded']),
  timestamp: z.string(),
  orderId: z.string(),
  paymentId: z.string(),
  amount: z.number().int(),
  currency: z.string(),
})
export type MockpayDelivery = z.infer<typeof MockpayDelivery>

/** One delivery of a mockpay event to the webhook endpoint; it locks nothing (the endpoint is idempotent). */
export const mockpayDeliverJob = defineJobType({ kind: 'mockpay.deliver', payload: MockpayDelivery })
