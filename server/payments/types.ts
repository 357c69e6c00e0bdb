import type { PaymentError, PaymentNextAction } from '../db/schema'
import type { PaymentProviderName } from '../config'

/** What every provider's event becomes once verified and understood. */
export const paymentEventTypes = ['payment.succeeded', 'payment.failed', 'payment.refunded', 'payment.updated', 'refund.updated'] as const
export type PaymentEventType = typeof paymentEventTypes[number]

export interface PaymentRequest {
  orderId: string
  /** Minor units, as on the order. */
  amount: number
  currency: string
  paymentMethod: string
  customerEmail: string
  /**
   * Derived from the order, never random: however often the job runs (a crash, a lost response),
   * the provider sees one request and answers with one payment.
   */
  idempotencyKey: string
  /** When the payment was first asked for (the job's creation): a provider whose idempotency keys expire looks for an earlier payment after that. */
  firstAskedAt: Date
}

export interface CreatedPayment {
  /** The provider's id for the payment: Stripe's PaymentIntent, Midtrans' order id, mockpay's intent. */
  id: string
  nextAction: PaymentNextAction
}

/** What the provider's API says about a payment now, as a normalised event would say it. */
export interface PaymentState {
  paymentId: string
  /** The provider's own word for the state (succeeded, settlement, refund…): part of the reconciled event's id. */
  providerStatus: string
  type: PaymentEventType
  amount?: number
  currency?: string
  /** The total refunded so far at the provider, in the order's units (0 or absent: none). */
  refundedAmount?: number
  /**
   * What the payment took, when the state is one only a made payment reaches (Midtrans' refund and
   * partial_refund): the payment is applied before the refund, since its own notification, confirmed
   * by the same API, now reads as the refund.
   */
  capturedAmount?: number
  /** The provider's answer as received, kept as evidence. */
  answer: Record<string, unknown>
}

export interface RefundRequest {
  orderId: string
  /** The provider's payment (orders.payment_intent_id). */
  paymentId: string
  /** Ours (`re_…`): Midtrans' refund_key, Stripe's metadata.refund_id. */
  refundId: string
  /** In the order's units: each adapter converts to the provider's. */
  amount: number
  currency: string
  reason: string | null
  /** `refund:<refund id>`: the same for every run of the refund's job. */
  idempotencyKey: string
  /** When the refund was first asked for: a provider whose keys expire looks for it by its metadata after that. */
  firstAskedAt: Date
}

/** The provider's answer to a refund request. */
export interface ProviderRefund {
  /** The provider's id for the refund (Stripe `re_…`, Midtrans refund_chargeback_id or the refund_key). */
  id: string
  /** succeeded: the money is on its way back. pending: the provider settles later (a webhook or reconciliation says). failed: refused after acceptance. */
  status: 'pending' | 'succeeded' | 'failed'
  answer: Record<string, unknown>
}

/** What the worker needs from a payment provider: Stripe, Midtrans and the simulated one (mockpay). */
export interface PaymentProvider {
  readonly name: PaymentProviderName
  /** Creates the payment, or gives back the one an earlier run created (never a second one). */
  createPayment(request: PaymentRequest, signal: AbortSignal): Promise<CreatedPayment>
  /** The payment's state at the provider; undefined when the provider has no such payment. */
  readPayment(payment: { orderId: string, paymentId: string }, signal: AbortSignal): Promise<PaymentState | undefined>
  /**
   * Refunds (part of) a payment, once per idempotency key however often it is asked. A refusal that
   * asking again cannot change (more than remains, a payment that cannot be refunded) is PaymentRefused.
   */
  refundPayment(request: RefundRequest, signal: AbortSignal): Promise<ProviderRefund>
  /**
   * Cancels a payment not yet made, so the shopper can no longer pay it. Resolves when it is canceled
   * or was already; 'succeeded' when the payment was made first (the caller refunds it instead).
   */
  cancelPayment(payment: { orderId: string, paymentId: string }, signal: AbortSignal): Promise<'canceled' | 'succeeded'>
  /** A refund's state now (reconciliation of one whose webhook never came); undefined when the provider has no such refund. */
  readRefund(refund: { orderId: string, paymentId: string, refundId: string, providerRefundId: string }, signal: AbortSignal): Promise<ProviderRefund | undefined>
}

/**
 * The provider could not answer now (network, timeout, 409, 429, 5xx): retry with backoff, or after
 * retryAfterMs when the provider said how long (Retry-After).
 */
export class ProviderUnavailable extends Error {
  constructor(message: string, readonly retryAfterMs?: number, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'ProviderUnavailable'
  }
}

/** The provider refused for good (a decline, details it will never accept): recorded on the order, never retried. */
export class PaymentRefused extends Error {
  constructor(readonly refusal: PaymentError) {
    super(`payment refused (${refusal.code}): ${refusal.providerMessage}`)
    this.name = 'PaymentRefused'
  }
}

/** Retry-After in ms: delta-seconds or an HTTP date (RFC 9110 §10.2.3); undefined when absent or unreadable. */
export function retryAfterMs(header: string | undefined, now = Date.now()): number | undefined {
  if (!header) return undefined
  const value = header.trim()
  if (/^\d{1,10}$/.test(value)) return Number(value) * 1000
  // Only the IMF-fixdate form (`Wed, 21 Oct 2015 07:28:00 GMT`): Date.parse would take '-1' or '1.5' for dates.
  if (!/^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/.test(value)) return undefined
  const date = Date.parse(value)
  return Number.isNaN(date) ? undefined : Math.max(0, date - now)
}

/** What the shopper reads when the shop's request was refused for its details (not their card). */
export const REFUSED_DETAILS_MESSAGE = 'The payment could not be started because the payment provider refused the order\'s details. Nothing was charged; please contact the shop.'
