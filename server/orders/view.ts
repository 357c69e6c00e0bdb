import { and, eq, getTableName, sql } from 'drizzle-orm'
import { useConfig } from '../config'
import type { Database } from 'nuxt-idempotency/db'
import { jobs, orders, refunds } from '../db/schema'
import { paymentCreateIntentJob } from './job-types'
import type { OrderPaymentView, OrderView, RefundView } from '../../shared/orders'
import { serializeOrder, serializePayment } from './service'
import { reservationViews } from '../stock/service'

type OrderRow = typeof orders.$inferSelect

/**
 * The order's refunds, oldest first, as views: built in the statement that reads the order. Spelled
 * out with an alias: drizzle writes a one-table query's columns unqualified, which inside this
 * subquery would name the refund's own id instead of the order's.
 */
const refundViews = sql<Array<Omit<RefundView, 'createdAt'> & { createdAt: string }>>`coalesce((
  select json_agg(json_build_object('id', r.id, 'object', 'refund', 'orderId', r.order_id, 'amount', r.amount, 'currency', r.currency,
    'status', r.status, 'reason', r.reason, 'source', r.source, 'createdAt', r.created_at) order by r.created_at, r.id)
  from ${refunds} r where r.order_id = ${sql.raw(`"${getTableName(orders)}"."id"`)}), '[]'::json)`

/**
 * Who reads the order: a tenant its own orders; a checkout session only the orders it placed (the
 * customer's e-mail and the payment's next step, Stripe's client secret, are that shopper's);
 * operators any, with the provider's own words about a failing call.
 */
export interface OrderViewOptions {
  tenantId?: string
  checkoutSessionId?: string
  forOperators?: boolean
}

/**
 * GET /api/orders/:id: the order, its payment, its refunds (oldest first) with the Σ that
 * succeeded, and its stock reservations. The order, its refunds and its reservations are one
 * statement, one snapshot: a refund settled between two reads would otherwise show as succeeded
 * beside the order's status from before it.
 */
export async function findOrderView(db: Database, orderId: string, options: OrderViewOptions = {}): Promise<(OrderView & { tenantId: string }) | undefined> {
  const { tenantId, checkoutSessionId } = options
  const [found] = await db.select({ order: orders, refunds: refundViews, reservations: reservationViews(sql.raw(`"${getTableName(orders)}"."id"`)) }).from(orders)
    .where(and(
      eq(orders.id, orderId),
      tenantId === undefined ? undefined : eq(orders.tenantId, tenantId),
      checkoutSessionId === undefined ? undefined : eq(orders.checkoutSessionId, checkoutSessionId),
    ))
  if (!found) return undefined
  const { order } = found
  const views = found.refunds.map(refund => ({ ...refund, createdAt: new Date(refund.createdAt).toISOString() }))
  const amountRefunded = views.reduce((sum, refund) => refund.status === 'succeeded' ? sum + refund.amount : sum, 0)
  const payment = await paymentOf(db, order, options.forOperators === true)
  return {
    ...serializeOrder(order), paymentIntentId: order.paymentIntentId, payment, cancelReason: order.cancelReason, amountRefunded, refunds: views,
    reservations: found.reservations.map(reservation => ({ ...reservation, quantity: Number(reservation.quantity) })), tenantId: order.tenantId,
  }
}

/**
 * The payment as stored; before it exists, whether asking the provider for it has failed so far
 * (an outage): the shop and the page say so instead of showing nothing. They get a stable code and a
 * plain sentence, never the provider's words (an API key's last digits, an internal host): those
 * are for operators (`providerMessage`), the jobs console and the logs.
 */
async function paymentOf(db: Database, order: OrderRow, forOperators: boolean): Promise<OrderPaymentView | null> {
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
    lastErrorCode: 'provider_unavailable',
    lastError: 'The payment provider has not answered yet. The payment is asked for again automatically; nothing was charged.',
    ...(forOperators && { providerMessage: job.lastError }),
    // A dead letter is asked again by reconciliation, on its next run.
    ...(job.status !== 'dead_letter' && { retryAt: job.runAt.toISOString() }),
  }
}
