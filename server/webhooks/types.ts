import type { Verification, WebhookDelivery } from 'nuxt-idempotency/core'
import type { RefundStatus } from '../../shared/statuses'
import type { PaymentStatus } from '../orders/payment-state'
import type { PaymentEventType } from '../payments/types'

/**
 * The payment status an event asks for; payment.updated (pending, fraud review…) asks for none, nor
 * does refund.updated, which settles one refund (the refunds' sum moves the order).
 */
export const requestedStatusOf: Record<PaymentEventType, PaymentStatus | null> = {
  'payment.succeeded': 'paid',
  'payment.failed': 'payment_failed',
  'payment.refunded': 'refunded',
  'payment.updated': null,
  'refund.updated': null,
}

export interface PaymentEvent {
  /** The provider's id for this event: the dedupe key, stable across redeliveries. */
  eventId: string
  type: PaymentEventType
  /** Empty when the provider's event does not name it (a refund made in Stripe's dashboard): found by paymentId on receipt. */
  orderId: string
  paymentId?: string
  /**
   * In the app's units of `currency` (docs/payments-and-refunds.md#currencies), when the provider
   * says: what was paid, or for payment.refunded the total refunded so far for the payment
   * (cumulative, every provider alike: Stripe's `amount_refunded`, not the last refund's amount). A
   * success whose amount or currency differs from the order's is ignored.
   */
  amount?: number
  currency?: string
  /**
   * refund.updated only: the one refund the event is about. `providerRefundId` is the provider's id
   * for it; `refundId` is this app's (`re_…`) when the refund was made through the API and the
   * provider echoes it (absent for one made in the provider's dashboard); `amount` is that refund's
   * own amount in the app's units; `status` is the provider's state mapped onto the app's.
   */
  refund?: { providerRefundId: string, refundId?: string, amount: number, status: RefundStatus }
  /**
   * payment.refunded only, when the provider lists every refund its total counts (Stripe's
   * charge.refunds on API versions that embed them, with nothing left unlisted): each as `refund`
   * states one. Named, they are never mistaken for one another.
   */
  listedRefunds?: Array<{ providerRefundId: string, refundId?: string, amount: number, status: RefundStatus }>
}

export type Parsed = { ok: true, event: PaymentEvent } | { ok: false, reason: string }

export interface WebhookProvider {
  name: string
  /** Headers stored with the event so the delivery can be verified again later. */
  signatureHeaders: readonly string[]
  /** Checks the signature (and timestamp) on the raw bytes, in constant time, before anything else. */
  verify(delivery: WebhookDelivery, secret: string): Verification
  /** Turns a verified body into a PaymentEvent, or says why it is not understood. */
  parse(json: unknown, delivery: WebhookDelivery): Parsed
}

// The delivery and its verification are the idempotency module's (nuxt-idempotency/core).
export { TIMESTAMP_TOLERANCE_SECONDS, type Verification, type WebhookDelivery } from 'nuxt-idempotency/core'
