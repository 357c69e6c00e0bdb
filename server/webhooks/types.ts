import type { PaymentStatus } from '../orders/payment-state'

/** What every provider's event becomes once verified and understood. */
export const paymentEventTypes = ['payment.succeeded', 'payment.failed', 'payment.refunded', 'payment.updated'] as const
export type PaymentEventType = typeof paymentEventTypes[number]

/** The payment status an event asks for; payment.updated (pending, fraud review…) asks for none. */
export const requestedStatusOf: Record<PaymentEventType, PaymentStatus | null> = {
  'payment.succeeded': 'paid',
  'payment.failed': 'payment_failed',
  'payment.refunded': 'refunded',
  'payment.updated': null,
}

export interface PaymentEvent {
  /** The provider's id for this event: the dedupe key, stable across redeliveries. */
  eventId: string
  type: PaymentEventType
  orderId: string
  paymentId?: string
  /**
   * Minor units, when the provider says: what was paid, or for a refund what was refunded. A success
   * whose amount or currency differs from the order's is ignored, and so is a refund of less than it.
   */
  amount?: number
  currency?: string
}

/** One HTTP delivery as received: the raw bytes and a header reader. */
export interface WebhookDelivery {
  body: Buffer
  header: (name: string) => string | undefined
  nowSeconds: number
}

export type Verification = { ok: true } | { ok: false, reason: string, claimedEventId?: string }
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

/** Deliveries older or newer than this are refused, both ways: a replayed capture, or a clock far ahead. */
export const TIMESTAMP_TOLERANCE_SECONDS = 300
