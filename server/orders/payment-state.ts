import { and, eq, sql } from 'drizzle-orm'
import type { Database } from '../db/client'
import { orders, orderStatusHistory } from '../db/schema'
import { enqueueJob } from '../jobs/enqueue'
import { orderIssueInvoiceJob, orderSendConfirmationJob, orderSendRefundNoticeJob } from '../jobs/types'

/**
 * An order's payment state moves only up this ladder, so events that arrive late, twice or out of
 * order cannot undo a later state: a payment_failed after paid changes nothing.
 */
export const paymentStatusPrecedence = ['pending_payment', 'payment_failed', 'paid', 'refunded'] as const
export type PaymentStatus = typeof paymentStatusPrecedence[number]

const rank = (status: string) => paymentStatusPrecedence.indexOf(status as PaymentStatus)

/**
 * Why an event changed nothing. `partial_refund`: less than the order's amount was refunded, so the
 * order stays as it is. `awaiting_payment`: a full refund of an order whose payment has not been
 * applied yet; it is kept in the history and completed by that payment.
 */
export type IgnoredBecause = 'unconfirmed' | 'informational' | 'same_status' | 'lower_precedence' | 'amount_mismatch' | 'partial_refund' | 'awaiting_payment'

export interface PaymentStatusChange {
  from: string
  to: string
  changed: boolean
  reason?: IgnoredBecause
}

export interface PaymentStatusContext {
  requestId?: string
  jobId?: string
  webhookEventId?: string
  /**
   * What the provider says was paid (for a refund: was refunded). A success for another amount or
   * currency does not pay the order; a refund of less than its amount does not refund it.
   */
  amount?: number
  currency?: string
  /** A notification asked for a state the provider's status API does not confirm: history only. */
  unconfirmed?: boolean
}

/**
 * Applies `requested` if it ranks above the order's current status (row-locked, so two events for
 * one order serialise) and records the event in the order's history either way. Effects follow the
 * state reached, never the path: reaching paid or above enqueues the confirmation and the invoice,
 * reaching refunded enqueues the refund notice — each once per order, whatever the arrival order.
 * Only a matching payment reaches paid: a full refund that arrives first waits in the history as
 * `awaiting_payment`, and the payment, when it is applied, takes the order straight to refunded with
 * all three effects. An underpaid order that is refunded therefore stays pending_payment, effect-free.
 * `null` is an informational event (pending, fraud review): history only.
 */
export async function applyPaymentStatus(
  tx: Database,
  orderId: string,
  requested: PaymentStatus | null,
  context: PaymentStatusContext = {},
): Promise<PaymentStatusChange | undefined> {
  const [order] = await tx.select({ status: orders.status, amount: orders.amount, currency: orders.currency })
    .from(orders).where(eq(orders.id, orderId)).for('update')
  if (!order) return undefined
  const reason = ignoredBecause(order, requested, context)
  let to = reason || !requested ? order.status : requested
  if (!reason) {
    if (to === 'paid' && await hasRefundAwaitingPayment(tx, orderId)) to = 'refunded'
    await tx.update(orders).set({ status: to, updatedAt: sql`now()` }).where(eq(orders.id, orderId))
    const reached = (status: PaymentStatus) => rank(order.status) < rank(status) && rank(to) >= rank(status)
    const effects = [
      ...(reached('paid') ? [orderSendConfirmationJob, orderIssueInvoiceJob] : []),
      ...(reached('refunded') ? [orderSendRefundNoticeJob] : []),
    ]
    for (const type of effects) await enqueueJob(tx, type, { orderId }, { dedupeKey: orderId, requestId: context.requestId })
  }
  await tx.insert(orderStatusHistory).values({
    orderId,
    fromStatus: order.status,
    requestedStatus: requested,
    toStatus: to,
    outcome: reason ? 'ignored' : 'applied',
    reason,
    webhookEventId: context.webhookEventId,
    jobId: context.jobId,
    requestId: context.requestId,
  })
  return { from: order.status, to, changed: !reason, ...(reason && { reason }) }
}

/** Read under the order's row lock, which every history insert for the order is made under too. */
async function hasRefundAwaitingPayment(tx: Database, orderId: string): Promise<boolean> {
  const [row] = await tx.select({ id: orderStatusHistory.id }).from(orderStatusHistory)
    .where(and(eq(orderStatusHistory.orderId, orderId), eq(orderStatusHistory.reason, 'awaiting_payment' satisfies IgnoredBecause)))
    .limit(1)
  return row !== undefined
}

function ignoredBecause(order: { status: string, amount: number, currency: string }, requested: PaymentStatus | null, context: PaymentStatusContext): IgnoredBecause | undefined {
  if (context.unconfirmed) return 'unconfirmed'
  if (requested === null) return 'informational'
  if (requested === order.status) return 'same_status'
  if (rank(requested) < rank(order.status)) return 'lower_precedence'
  const otherCurrency = context.currency !== undefined && context.currency !== order.currency
  // An unknown amount is taken as the order's (a provider that does not say refunds or pays in full).
  const amount = context.amount ?? order.amount
  if (requested === 'paid' && (otherCurrency || amount !== order.amount)) return 'amount_mismatch'
  if (requested === 'refunded') {
    if (otherCurrency || amount > order.amount) return 'amount_mismatch'
    if (amount < order.amount) return 'partial_refund'
    if (rank(order.status) < rank('paid')) return 'awaiting_payment'
  }
  return undefined
}
