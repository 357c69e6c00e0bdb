import { and, eq } from 'drizzle-orm'
import { useConfig } from '../config'
import type { Database } from '../db/client'
import { jobs, type orders } from '../db/schema'
import { paymentCreateIntentJob } from '../jobs/types'
import { listRefunds, serializeRefund } from '../refunds/service'
import type { OrderPaymentView, OrderView } from '../../shared/orders'
import { serializeOrder, serializePayment } from './service'

type OrderRow = typeof orders.$inferSelect

/** GET /api/orders/:id: the order, its payment, and its refunds (oldest first) with the Σ that succeeded. */
export async function orderView(db: Database, order: OrderRow): Promise<OrderView> {
  const [refunds, payment] = await Promise.all([listRefunds(db, order.id), paymentOf(db, order)])
  const views = refunds.map(serializeRefund)
  const amountRefunded = views.reduce((sum, refund) => refund.status === 'succeeded' ? sum + refund.amount : sum, 0)
  return { ...serializeOrder(order), paymentIntentId: order.paymentIntentId, payment, amountRefunded, refunds: views }
}

/**
 * The payment as stored; before it exists, whether asking the provider for it has failed so far
 * (an outage): the shop and the page say so instead of showing nothing.
 */
async function paymentOf(db: Database, order: OrderRow): Promise<OrderPaymentView | null> {
  const stored = serializePayment(order)
  if (stored || order.status !== 'pending_payment') return stored
  const [job] = await db.select({ status: jobs.status, lastError: jobs.lastError, runAt: jobs.runAt }).from(jobs)
    .where(and(eq(jobs.kind, paymentCreateIntentJob.kind), eq(jobs.dedupeKey, order.id)))
  if (!job?.lastError || job.status === 'completed' || job.status === 'dismissed') return null
  return {
    provider: useConfig().PAYMENT_PROVIDER,
    id: null,
    nextAction: null,
    error: null,
    status: 'retrying',
    lastError: `The payment provider has not answered yet (${job.lastError}). The payment is asked for again automatically; nothing was charged.`,
    // A dead letter is asked again by reconciliation, on its next run.
    ...(job.status !== 'dead_letter' && { retryAt: job.runAt.toISOString() }),
  }
}
