import { type PaymentStatus, paymentStatusPrecedence } from '../../../server/orders/payment-state'

/**
 * What the chaos run expects of each order, computed from what the clients saw and nothing else:
 * the payment events a provider got a 2xx for (for mockpay, the events its ledger recorded, each
 * refund's with the total refunded so far), whether the shop was told the order was canceled, and
 * from them the final payment status by the product's precedence rule
 * (server/orders/payment-state.ts). The run never sends a success for another amount or currency,
 * so `amount_mismatch` has no part in the model.
 */

// Not Midtrans: the fleet charges through mockpay, where /api/webhooks/midtrans is not served.
export type Provider = 'standard' | 'stripe'
export type PaymentPath = 'mockpay' | Provider | 'unpaid'

export interface AcceptedEvent {
  /** mockpay's events arrive at their own endpoint, stored under its name. */
  provider: Provider | 'mockpay'
  /** The provider's event id: the dedupe key of the delivery (webhook_events.event_id). */
  eventId: string
  /** The status it asks for; null for an informational event (Midtrans `pending`). */
  requested: PaymentStatus | null
  /** A refund event's total refunded so far at the provider; absent: all of the order. */
  refundedTotal?: number
}

/** One refund asked for through the API under one key, by every copy and retry of it. */
export interface RefundIntent {
  key: string
  orderId: string
  /** Absent: all that remains. */
  amount?: number
  /** Asked for `restock: true`: put back all the payment took and no earlier refund did. */
  restock?: boolean
  copies: number
  fault?: 'drop-after-commit'
  /** Each copy's final answer (201 with the refund's id, or the problem's slug), undefined when it never got one. */
  finals: Array<{ status: number, refundId?: string, problem?: string } | undefined>
}

/** The shop's cancel, as it was answered: canceled (200), or not cancelable because the payment came first (409). */
export type CancelOutcome = 'canceled' | 'not_cancelable'

export interface OrderModel {
  orderId: string
  key: string
  amount: number
  path: PaymentPath
  /** mockpay's intent for an order paid there: its ledger's events are read once the run settled. */
  intentId?: string
  /** Events accepted (2xx) at least once; for mockpay, the events the provider recorded and delivers until accepted. */
  events: AcceptedEvent[]
  cancel?: CancelOutcome
  refunds: RefundIntent[]
}

const rank = (status: PaymentStatus) => paymentStatusPrecedence.indexOf(status)

/** paid, partially_refunded or refunded by what was refunded of `amount`. */
export function statusAfterRefunds(amount: number, refunded: number): PaymentStatus {
  return refunded >= amount ? 'refunded' : refunded > 0 ? 'partially_refunded' : 'paid'
}

/**
 * The highest payment status any accepted event asks for, or canceled when the shop was told so
 * before any payment; above paid, the most the provider said it refunded (totals only grow).
 * Arrival order and duplicates do not matter, and a refund without a payment waits for it.
 */
export function expectedPaymentStatus(order: Pick<OrderModel, 'amount' | 'events' | 'cancel'>): PaymentStatus {
  let status: PaymentStatus = order.cancel === 'canceled' ? 'canceled' : 'pending_payment'
  let refunded = 0
  for (const { requested, refundedTotal } of order.events) {
    if (requested === 'refunded') refunded = Math.max(refunded, refundedTotal ?? order.amount)
    else if (requested && rank(requested) > rank(status)) status = requested
  }
  return status === 'paid' ? statusAfterRefunds(order.amount, refunded) : status
}
