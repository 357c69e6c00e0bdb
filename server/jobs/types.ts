import { z, type ZodType } from 'zod'
import { orderResource } from '../../shared/resources'

/**
 * What a job of a kind carries and which resource it locks: the one definition that both the
 * enqueuers (typed payloads, resource derived here, never restated) and the kind that runs it
 * (server/jobs/kinds/) use. `Payload` defaults to `any`: one list holds kinds of different
 * payloads, and a function of one payload type is not assignable to another's.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export interface JobType<Payload = any> {
  kind: string
  /** A payload that does not parse is a permanent error: retrying cannot fix it. */
  payload: ZodType<Payload>
  /** The business resource to lock while the job runs (`order:<id>` → `lock:order:<id>`). */
  resource?: (payload: Payload) => string
  /** Attempts before the dead letters, when not DEFAULT_MAX_ATTEMPTS (server/jobs/enqueue.ts). */
  maxAttempts?: number
}

export type PayloadOf<Type extends JobType> = Type extends JobType<infer Payload> ? Payload : never

export const defineJobType = <Payload>(type: JobType<Payload>): JobType<Payload> => type

export const OrderJobPayload = z.object({ orderId: z.string().min(1).max(64) }).strict()
export type OrderJobPayload = z.infer<typeof OrderJobPayload>

/**
 * A call to the payment provider retries for as long as a real outage lasts: with the default
 * backoff (1 s doubling, capped at 1 h) 20 attempts span about 9 hours before the dead letters.
 */
export const PROVIDER_CALL_MAX_ATTEMPTS = 20

const orderJobType = (kind: string, maxAttempts?: number) => defineJobType({ kind, payload: OrderJobPayload, resource: payload => orderResource(payload.orderId), maxAttempts })

export const paymentCreateIntentJob = orderJobType('payment.create_intent', PROVIDER_CALL_MAX_ATTEMPTS)
export const orderSendConfirmationJob = orderJobType('order.send_confirmation')
export const orderIssueInvoiceJob = orderJobType('order.issue_invoice')
export const paymentCancelJob = orderJobType('payment.cancel', PROVIDER_CALL_MAX_ATTEMPTS)

export const RefundJobPayload = z.object({ orderId: z.string().min(1).max(64), refundId: z.string().min(1).max(64) }).strict()
export type RefundJobPayload = z.infer<typeof RefundJobPayload>

const refundJobType = (kind: string, maxAttempts?: number) => defineJobType({ kind, payload: RefundJobPayload, resource: (payload: RefundJobPayload) => orderResource(payload.orderId), maxAttempts })

/** Asks the provider for one refund, under the refund's own key: once per refund however often it runs. */
export const paymentRefundJob = refundJobType('payment.refund', PROVIDER_CALL_MAX_ATTEMPTS)
/** The shopper's email about one succeeded refund of a paid order. */
export const refundSendNoticeJob = refundJobType('order.send_refund_notice')

export const webhookApplyJob = defineJobType({
  kind: 'webhook.apply',
  payload: z.object({ webhookEventId: z.string().min(1), orderId: z.string().min(1) }).strict(),
  resource: payload => orderResource(payload.orderId),
})

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
