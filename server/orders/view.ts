import { and, desc, eq, getTableName, gte, lt, or, type SQL, sql } from 'drizzle-orm'
import { useConfig } from '../config'
import type { Database } from '@idempotent-checkout/db-kit'
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
  const [found] = await orderViews(db, eq(orders.id, orderId), options)
  return found
}

/** The query of GET /api/orders (docs/api.md#list-orders). */
export interface OrderListPage {
  status?: string
  createdGte?: Date
  createdLt?: Date
  limit: number
  /** The last order of the previous page: the page continues with older ones. */
  startingAfter?: { id: string, createdAt: Date }
}

/**
 * GET /api/orders: a page of the tenant's orders, newest first, each as GET /api/orders/:id answers,
 * keyset-paged on (created_at, id): an order placed while a client pages is newer than its cursor and
 * moves no page.
 */
export async function listOrderViews(db: Database, page: OrderListPage, options: OrderViewOptions & { tenantId: string }): Promise<{ data: OrderView[], hasMore: boolean }> {
  const cursor = page.startingAfter
  const views = await orderViews(db, and(
    page.status === undefined ? undefined : eq(orders.status, page.status),
    page.createdGte === undefined ? undefined : gte(orders.createdAt, page.createdGte),
    page.createdLt === undefined ? undefined : lt(orders.createdAt, page.createdLt),
    cursor === undefined ? undefined : or(lt(orders.createdAt, cursor.createdAt), and(eq(orders.createdAt, cursor.createdAt), lt(orders.id, cursor.id))),
  ), options, page.limit + 1)
  return { data: views.slice(0, page.limit).map(({ tenantId: _, ...view }) => view), hasMore: views.length > page.limit }
}

/** Orders with their refunds and reservations, one statement (see findOrderView); newest first when limited. */
async function orderViews(db: Database, where: SQL | undefined, options: OrderViewOptions, limit?: number): Promise<Array<OrderView & { tenantId: string }>> {
  const { tenantId, checkoutSessionId } = options
  const query = db.select({ order: orders, refunds: refundViews, reservations: reservationViews(sql.raw(`"${getTableName(orders)}"."id"`)) }).from(orders)
    .where(and(
      where,
      tenantId === undefined ? undefined : eq(orders.tenantId, tenantId),
      checkoutSessionId === undefined ? undefined : eq(orders.checkoutSessionId, checkoutSessionId),
    ))
  const rows = limit === undefined ? await query : await query.orderBy(desc(orders.createdAt), desc(orders.id)).limit(limit)
  return Promise.all(rows.map(async (found) => {
    const { order } = found
    const views = found.refunds.map(refund => ({ ...refund, createdAt: new Date(refund.createdAt).toISOString() }))
    const amountRefunded = views.reduce((sum, refund) => refund.status === 'succeeded' ? sum + refund.amount : sum, 0)
    const payment = await paymentOf(db, order, options.forOperators === true)
    return {
      ...serializeOrder(order), paymentIntentId: order.paymentIntentId, payment, cancelReason: order.cancelReason, amountRefunded, refunds: views,
      reservations: found.reservations.map(reservation => ({ ...reservation, quantity: Number(reservation.quantity) })), tenantId: order.tenantId,
    }
  }))
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
