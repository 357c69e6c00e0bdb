import { and, eq } from 'drizzle-orm'
import type { Database } from '@idempotent-checkout/db-kit'
import { orders, refunds } from '../db/schema'
import { insertRefund, lockOrder, recordHistory, refundTotals } from '../orders/payment-state'
import { problem } from '../problems'
import { exactEverywhere, refundAmountProblem } from '../payments/currencies'
import { useConfig } from '../config'
import type { RefundView } from '../../shared/orders'
import type { RefundSource, RefundStatus } from '../../shared/statuses'
import { exceedsRemainingDetail, notRefundableDetail } from './refusals'
import type { CreateRefundInput } from './schema'
import { restockForRefund } from '../stock/ledger'
import { restockable } from '../stock/service'

type RefundRow = typeof refunds.$inferSelect

export function serializeRefund(refund: RefundRow): RefundView {
  return {
    id: refund.id,
    object: 'refund',
    orderId: refund.orderId,
    amount: refund.amount,
    currency: refund.currency,
    status: refund.status as RefundStatus,
    reason: refund.reason,
    source: refund.source as RefundSource,
    createdAt: refund.createdAt.toISOString(),
  }
}

/** One refund of the tenant's order; for a checkout session, only of an order the session placed. */
export async function findRefund(db: Database, reader: { tenantId: string, checkoutSessionId?: string }, orderId: string, refundId: string): Promise<RefundRow | undefined> {
  const [found] = await db.select({ refund: refunds }).from(refunds).innerJoin(orders, eq(orders.id, refunds.orderId))
    .where(and(
      eq(refunds.id, refundId), eq(refunds.orderId, orderId), eq(refunds.tenantId, reader.tenantId),
      reader.checkoutSessionId === undefined ? undefined : eq(orders.checkoutSessionId, reader.checkoutSessionId),
    ))
  return found?.refund
}

const notFound = (orderId: string) => problem('not-found', `No order "${orderId}" exists for your tenant. Check the id returned by POST /api/orders.`)

export interface RefundRequestContext {
  tenantId: string
  orderId: string
  source: 'api'
  idempotencyKey: string
  requestId: string
}

/**
 * 400 validation-failed when the provider cannot pay back `amount` of the order exactly (see
 * refundAmountProblem): asked of it, the refund would fail on every attempt and hold its amount.
 * The provider is the configured one, the one the payment.refund job asks.
 */
function refuseInexactAmount(order: { currency: string }, amount: number, rest: boolean): void {
  const inexact = refundAmountProblem(useConfig().PAYMENT_PROVIDER, amount, order.currency, { rest })
  if (inexact) throw problem('validation-failed', inexact, { extensions: { errors: [{ path: 'amount', message: inexact }] } })
}

/** An order that was paid; any other (unpaid, failed, canceled) is 409 order-not-refundable. A refunded one has 0 remaining. */
const refundable = (status: string) => status === 'paid' || status === 'partially_refunded' || status === 'refunded'

/**
 * The refund's amount checked before the idempotency layer, so that a refusal stores nothing and the
 * same key may carry a corrected amount: read without the order's lock (its currency never changes;
 * what remains is read again under the lock by requestRefund). Anything else is left to admission.
 */
export async function checkRefundAmount(db: Database, context: { tenantId: string, orderId: string }, input: CreateRefundInput): Promise<void> {
  // Most amounts asked for fit every currency: no database read before the idempotency layer (a replay's path).
  if (input.amount !== undefined && exactEverywhere(input.amount)) return
  const [order] = await db.select({ status: orders.status, amount: orders.amount, currency: orders.currency }).from(orders)
    .where(and(eq(orders.id, context.orderId), eq(orders.tenantId, context.tenantId)))
  if (!order || !refundable(order.status)) return
  if (input.amount !== undefined) return refuseInexactAmount(order, input.amount, false)
  const remaining = order.amount - (await refundTotals(db, context.orderId)).held
  if (remaining > 0) refuseInexactAmount(order, remaining, true)
}

/**
 * Admits a refund in the caller's transaction (the idempotency record's): under the order's row
 * lock, so refunds of one order decide one after another across every instance, and the Σ read
 * after the lock sees every refund committed before it. The refund, its hold on the balance, its
 * payment.refund job and the order's history commit together, or not at all. A refunded order has
 * nothing left: asking more of it is more than remains (0).
 */
export async function requestRefund(tx: Database, context: RefundRequestContext, input: CreateRefundInput): Promise<RefundRow> {
  const order = await lockOrder(tx, context.orderId, context.tenantId)
  if (!order) throw notFound(context.orderId)
  if (!refundable(order.status)) {
    throw problem('order-not-refundable', notRefundableDetail(order), { extensions: { orderStatus: order.status } })
  }
  const { held } = await refundTotals(tx, order.id)
  const remaining = Math.max(0, order.amount - held)
  const amount = input.amount ?? remaining
  if (amount > remaining || remaining <= 0) {
    throw problem('refund-exceeds-remaining', exceedsRemainingDetail(order, held, input.amount), { extensions: { remaining } })
  }
  refuseInexactAmount(order, amount, input.amount === undefined)
  const id = await insertRefund(tx, order, {
    amount, status: 'pending', source: context.source, reason: input.reason ?? null, providerRefundId: null,
    idempotencyKey: context.idempotencyKey, requestId: context.requestId,
  })
  if (input.restock) await restock(tx, { tenantId: order.tenantId, orderId: order.id, refundId: id }, input.items, context)
  await recordHistory(tx, { orderId: order.id, fromStatus: order.status, requestedStatus: null, toStatus: order.status, outcome: 'applied', reason: 'refund_requested', refundId: id }, { requestId: context.requestId })
  const [refund] = await tx.select().from(refunds).where(eq(refunds.id, id))
  return refund!
}

/**
 * A restocking refund's units back on sale, in the refund's transaction (so a replay of its key,
 * which replays the refund, restocks nothing more): the `items` named, or all that the order's
 * payment took and earlier refunds did not put back. More than that is 409 restock-exceeds-committed.
 */
async function restock(tx: Database, refund: { tenantId: string, orderId: string, refundId: string }, items: CreateRefundInput['items'], context: RefundRequestContext): Promise<void> {
  const left = await restockable(tx, refund.orderId)
  const wanted = new Map<string, number>()
  for (const item of items ?? [...left].map(([sku, quantity]) => ({ sku, quantity }))) wanted.set(item.sku, (wanted.get(item.sku) ?? 0) + item.quantity)
  const over = [...wanted].filter(([sku, quantity]) => quantity > (left.get(sku) ?? 0))
  if (over.length > 0) {
    const restockableItems = [...left].map(([sku, quantity]) => ({ sku, quantity }))
    throw problem('restock-exceeds-committed', `Order ${refund.orderId} cannot put back ${over.map(([sku, quantity]) => `${quantity} × ${sku}`).join(', ')}: ${restockableItems.length > 0 ? `at most ${restockableItems.map(item => `${item.quantity} × ${item.sku}`).join(', ')} can be restocked` : 'nothing it sold from tracked stock is left to restock'}. Name at most that in "items", under a new Idempotency-Key.`, { extensions: { restockable: restockableItems } })
  }
  await restockForRefund(tx, refund, [...wanted].map(([sku, quantity]) => ({ sku, quantity })), { requestId: context.requestId })
}
