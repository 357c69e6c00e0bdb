import { type PaymentStatus, paymentStatusPrecedence } from '../../../server/orders/payment-state'

/**
 * What the chaos run expects of each order, computed from what the clients saw and nothing else:
 * the payment events a provider got a 2xx for, and from them the final payment status by the
 * product's precedence rule (server/orders/payment-state.ts). The run never sends a success for
 * another amount or currency, so `amount_mismatch` has no part in the model.
 */

export type Provider = 'standard' | 'stripe' | 'midtrans'
export type PaymentPath = 'mockpay' | Provider | 'unpaid'

export interface AcceptedEvent {
  /** mockpay's events arrive at their own endpoint, stored under its name. */
  provider: Provider | 'mockpay'
  /** The provider's event id: the dedupe key of the delivery (webhook_events.event_id). */
  eventId: string
  /** The status it asks for; null for an informational event (Midtrans `pending`). */
  requested: PaymentStatus | null
}

export interface OrderModel {
  orderId: string
  key: string
  path: PaymentPath
  /** Events accepted (2xx) at least once; for mockpay, the events the provider recorded and delivers until accepted. */
  events: AcceptedEvent[]
}

const rank = (status: PaymentStatus) => paymentStatusPrecedence.indexOf(status)

/** The highest status any accepted event asks for: arrival order and duplicates do not matter. */
export function expectedPaymentStatus(events: AcceptedEvent[]): PaymentStatus {
  let status: PaymentStatus = 'pending_payment'
  for (const { requested } of events) {
    if (requested && rank(requested) > rank(status)) status = requested
  }
  return status
}

export type EffectKind = 'confirmation_email' | 'invoice' | 'refund_notice'

/** The effects an order in `status` has had, once each: paid or above implies the payment. */
export function effectsOf(status: string): EffectKind[] {
  const reached = (level: PaymentStatus) => rank(status as PaymentStatus) >= rank(level)
  return [
    ...(reached('paid') ? ['confirmation_email', 'invoice'] as const : []),
    ...(reached('refunded') ? ['refund_notice'] as const : []),
  ]
}
