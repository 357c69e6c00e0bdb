import { and, eq, inArray, sql } from 'drizzle-orm'
import type { Database } from '@idempotent-checkout/db-kit'
import { jobs, orders, refunds } from '../db/schema'
import { refundSendNoticeJob } from '../orders/job-types'
import { applyPaymentStatus, isPaid, lockOrder, type PaymentStatusContext, recordHistory, refundTotals, statusAfterRefunds } from '../orders/payment-state'
import type { LedgerRefund } from '../../shared/ops-api'

/**
 * The two heals of the ledger check, each under the order's row lock in the caller's transaction.
 * A refund the provider made that we do not know goes the way its webhook would have gone
 * (applyPaymentStatus with the refund named), so it is recorded once, with its notice. The other
 * path payment-state.ts does not offer: a refund of ours that succeeded and that the provider then
 * failed goes back to failed here.
 */

/** Whether the provider's refund is now recorded (or named, when a provider total had recorded it unnamed). */
export async function recordProviderRefund(tx: Database, orderId: string, refund: LedgerRefund, currency: string, context: PaymentStatusContext): Promise<boolean> {
  const change = await applyPaymentStatus(tx, orderId, null, {
    ...context,
    currency,
    refund: { providerRefundId: refund.providerRefundId!, amount: refund.amount, status: 'succeeded' },
  })
  // awaiting_payment: recorded, and the payment (once applied) takes the order past paid.
  return change !== undefined && (change.changed || change.reason === 'awaiting_payment' || change.reason === 'no_refund')
}

export const FAILED_AT_PROVIDER = 'the provider failed it after it was recorded succeeded (found by the ledger check)'
const NOTICE_WITHHELD = 'the refund failed at the provider (found by the ledger check): no notice is sent for it'

/**
 * Our succeeded refund → failed: its amount is free again, the order's status follows, and its
 * notice, unless sent already, is withheld (its job dismissed; a running one is fenced out, its
 * completion finding the job no longer running). Whether the refund changed, and whether its notice was withheld.
 */
export async function failRefundFailedAtProvider(tx: Database, orderId: string, refundId: string, providerRefundId: string | null, context: PaymentStatusContext): Promise<{ failed: boolean, noticeWithheld: boolean }> {
  const order = await lockOrder(tx, orderId)
  if (!order) return { failed: false, noticeWithheld: false }
  const changed = await tx.update(refunds).set({
    status: 'failed',
    failure: FAILED_AT_PROVIDER,
    ...(providerRefundId && { providerRefundId: sql`coalesce(${refunds.providerRefundId}, ${providerRefundId})` }),
    settledAt: sql`now()`,
    updatedAt: sql`now()`,
  }).where(and(eq(refunds.id, refundId), eq(refunds.orderId, orderId), eq(refunds.status, 'succeeded'))).returning({ id: refunds.id })
  if (!changed.length) return { failed: false, noticeWithheld: false }
  const [withheld, totals] = await Promise.all([
    tx.update(jobs).set({ status: 'dismissed', dismissedReason: NOTICE_WITHHELD, dismissedAt: sql`now()`, updatedAt: sql`now()` })
      .where(and(eq(jobs.kind, refundSendNoticeJob.kind), eq(jobs.dedupeKey, refundId), inArray(jobs.status, ['queued', 'failed', 'running', 'dead_letter'])))
      .returning({ id: jobs.id }),
    refundTotals(tx, orderId),
  ])
  const to = isPaid(order.status) ? statusAfterRefunds(order, totals.succeeded) : order.status
  await Promise.all([
    to !== order.status ? tx.update(orders).set({ status: to, updatedAt: sql`now()` }).where(eq(orders.id, orderId)) : undefined,
    recordHistory(tx, { orderId, fromStatus: order.status, requestedStatus: null, toStatus: to, outcome: 'applied', reason: 'refund_failed', refundId }, context),
  ])
  return { failed: true, noticeWithheld: withheld.length > 0 }
}
