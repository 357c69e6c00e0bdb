import { eq, sql } from 'drizzle-orm'
import type { Database } from '../db/client'
import { orders, orderStatusHistory } from '../db/schema'
import { enqueueJob } from '../jobs/enqueue'

/**
 * An order's payment state moves only up this ladder, so events that arrive late, twice or out of
 * order cannot undo a later state: a payment_failed after paid changes nothing.
 */
export const paymentStatusPrecedence = ['pending_payment', 'payment_failed', 'paid', 'refunded'] as const
export type PaymentStatus = typeof paymentStatusPrecedence[number]

const rank = (status: string) => paymentStatusPrecedence.indexOf(status as PaymentStatus)

export type IgnoredBecause = 'informational' | 'same_status' | 'lower_precedence' | 'amount_mismatch'

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
  /** What the provider says was paid: a success for another amount or currency does not pay the order. */
  amount?: number
  currency?: string
}

/**
 * Applies `requested` if it ranks above the order's current status (row-locked, so two events for
 * one order serialise) and records the event in the order's history either way. Effects follow the
 * state reached, never the path: reaching paid or above enqueues the confirmation and the invoice
 * (a refund that arrives before its payment event still implies the payment), reaching refunded
 * enqueues the refund notice — each once per order, whatever the arrival order of the events.
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
  const to = reason || !requested ? order.status : requested
  if (!reason) {
    await tx.update(orders).set({ status: to, updatedAt: sql`now()` }).where(eq(orders.id, orderId))
    const reached = (status: PaymentStatus) => rank(order.status) < rank(status) && rank(to) >= rank(status)
    const effects = [
      ...(reached('paid') ? ['order.send_confirmation', 'order.issue_invoice'] : []),
      ...(reached('refunded') ? ['order.send_refund_notice'] : []),
    ]
    for (const kind of effects) {
      await enqueueJob(tx, { kind, dedupeKey: orderId, payload: { orderId }, resourceId: `order:${orderId}`, requestId: context.requestId })
    }
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

function ignoredBecause(order: { status: string, amount: number, currency: string }, requested: PaymentStatus | null, context: PaymentStatusContext): IgnoredBecause | undefined {
  if (requested === null) return 'informational'
  if (requested === order.status) return 'same_status'
  if (rank(requested) < rank(order.status)) return 'lower_precedence'
  const amountDiffers = (context.amount !== undefined && context.amount !== order.amount)
    || (context.currency !== undefined && context.currency !== order.currency)
  if (requested === 'paid' && amountDiffers) return 'amount_mismatch'
  return undefined
}
