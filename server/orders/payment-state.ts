import { eq, sql } from 'drizzle-orm'
import type { Database } from '../db/client'
import { orders } from '../db/schema'
import { enqueueJob } from '../jobs/enqueue'

/**
 * An order's payment state moves only up this ladder, so events that arrive late, twice or out of
 * order cannot undo a later state: a payment_failed after paid changes nothing.
 */
export const paymentStatusPrecedence = ['pending_payment', 'payment_failed', 'paid', 'refunded'] as const
export type PaymentStatus = typeof paymentStatusPrecedence[number]

const rank = (status: string) => paymentStatusPrecedence.indexOf(status as PaymentStatus)

export interface PaymentStatusChange {
  from: string
  to: string
  changed: boolean
}

/**
 * Applies `target` if it ranks above the order's current status (row-locked, so two events for one
 * order serialise). Crossing into paid or above enqueues the confirmation email and the invoice,
 * once per order: a refund that arrives before its payment event still implies the payment, so
 * every arrival order of the same events leaves the same effects.
 */
export async function applyPaymentStatus(
  tx: Database,
  orderId: string,
  target: PaymentStatus,
  context: { requestId?: string } = {},
): Promise<PaymentStatusChange | undefined> {
  const [order] = await tx.select({ status: orders.status }).from(orders).where(eq(orders.id, orderId)).for('update')
  if (!order) return undefined
  if (rank(target) <= rank(order.status)) return { from: order.status, to: order.status, changed: false }
  await tx.update(orders).set({ status: target, updatedAt: sql`now()` }).where(eq(orders.id, orderId))
  if (rank(order.status) < rank('paid') && rank(target) >= rank('paid')) {
    for (const kind of ['order.send_confirmation', 'order.issue_invoice']) {
      await enqueueJob(tx, { kind, dedupeKey: orderId, payload: { orderId }, resourceId: `order:${orderId}`, requestId: context.requestId })
    }
  }
  return { from: order.status, to: target, changed: true }
}
