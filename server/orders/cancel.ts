import { and, asc, inArray, lt, sql } from 'drizzle-orm'
import { transaction, type Database } from '@idempotent-checkout/db-kit'
import { orders } from '../db/schema'
import { enqueueJob } from '../jobs/enqueue'
import type { Locks } from 'nuxt-idempotency/core'
import { type MaintenanceResult, withTaskLock } from '../maintenance/task-lock'
import { problem } from '../problems'
import { settleReservations } from '../stock/ledger'
import type { CancelReason } from '../../shared/statuses'
import { paymentCancelJob } from './job-types'
import { lockOrder, recordHistory } from './payment-state'

export interface CancelContext {
  tenantId: string
  orderId: string
  /** Set when the page's checkout session asks: only the session that placed the order may cancel it. */
  checkoutSessionId?: string
  idempotencyKey: string
  requestId: string
}

/** An order not paid yet: a failed payment may still be retried by the shopper until it is canceled or expires. */
const unpaid = ['pending_payment', 'payment_failed'] as const

const notFound = (orderId: string) => problem('not-found', `No order "${orderId}" exists for your tenant. Check the id returned by POST /api/orders.`)

/**
 * Cancels an unpaid order in the caller's transaction: its stock reservations are released and the
 * cancel of its payment at the provider is enqueued (the outbox). Canceling a canceled order
 * answers it as it is.
 */
export async function cancelOrder(tx: Database, context: CancelContext): Promise<void> {
  const order = await lockOrder(tx, context.orderId, context.tenantId)
  if (!order) throw notFound(context.orderId)
  if (context.checkoutSessionId !== undefined && order.checkoutSessionId !== context.checkoutSessionId) throw notFound(context.orderId)
  if (order.status === 'canceled') return
  if (!(unpaid as readonly string[]).includes(order.status)) {
    throw problem('order-not-cancelable', `Order ${order.id} is ${order.status}; only an unpaid order can be canceled. Refund a paid one instead: POST /api/orders/${order.id}/refunds.`, { extensions: { orderStatus: order.status } })
  }
  await markCanceled(tx, order, 'requested', { requestId: context.requestId, idempotencyKey: context.idempotencyKey })
}

async function markCanceled(tx: Database, order: { id: string, tenantId: string, status: string }, reason: CancelReason, context: { requestId?: string, idempotencyKey?: string, jobId?: string }): Promise<void> {
  await Promise.all([
    tx.update(orders).set({ status: 'canceled', cancelReason: reason, updatedAt: sql`now()` }).where(sql`${orders.id} = ${order.id}`),
    recordHistory(tx, { orderId: order.id, fromStatus: order.status, requestedStatus: 'canceled', toStatus: 'canceled', outcome: 'applied', reason: reason === 'expired' ? 'expired' : 'canceled' }, context),
    settleReservations(tx, { tenantId: order.tenantId, orderId: order.id }, 'release', reason === 'expired' ? 'expired' : 'canceled', context),
    enqueueJob(tx, paymentCancelJob, { orderId: order.id }, { dedupeKey: order.id, idempotencyKey: context.idempotencyKey, requestId: context.requestId }),
  ])
}

/**
 * The expiry task (docs/inventory.md#unpaid-orders-expire): cancels orders left unpaid longer than
 * `ttlSeconds`, oldest first, each in its own transaction under the order's lock, so a payment
 * applied in the same second either comes first (the order is paid and stays so) or finds the
 * order canceled (its reservations released; the payment is refunded automatically). At most
 * `limit` per run; the next run takes the rest.
 */
export function expireUnpaidOrders(db: Database, locks: Locks, options: { ttlSeconds: number, limit: number }): Promise<MaintenanceResult> {
  return withTaskLock(locks, 'orders-expire', async () => ({ counts: { expired: await expireOnce(db, options) } }))
}

async function expireOnce(db: Database, options: { ttlSeconds: number, limit: number }): Promise<number> {
  const candidates = await db.select({ id: orders.id }).from(orders)
    .where(and(inArray(orders.status, [...unpaid]), lt(orders.createdAt, sql`now() - (${options.ttlSeconds}::int * interval '1 second')`)))
    .orderBy(asc(orders.createdAt)).limit(options.limit)
  let expired = 0
  for (const { id } of candidates) {
    const canceled = await transaction(db, async (tx) => {
      const order = await lockOrder(tx, id)
      if (!order || !(unpaid as readonly string[]).includes(order.status)) return false
      await markCanceled(tx, order, 'expired', {})
      return true
    })
    if (canceled) expired++
  }
  return expired
}
