import { z } from 'zod'
import { orderResource } from '../../shared/resources'
import { defineJobType } from '../jobs/types'

/**
 * The jobs an order's life starts: declared here, below everything that enqueues them (orders,
 * refunds, webhooks, the ledger check); each kind that runs one lives beside what it serves
 * (orders/jobs/, payments/jobs/, refunds/jobs/).
 */

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
