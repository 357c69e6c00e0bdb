import { and, eq } from 'drizzle-orm'
import type { Database } from '../db/client'
import { newId } from '../db/ids'
import { orders } from '../db/schema'
import type { IdempotentResult } from '../idempotency/handler'
import { enqueueJob } from '../jobs/enqueue'
import { metrics } from '../observability/metrics'
import { problem } from '../problems'
import type { CreateOrderInput } from './schema'

type OrderRow = typeof orders.$inferSelect

export function serializeOrder(order: OrderRow) {
  return {
    id: order.id,
    object: 'order' as const,
    status: order.status,
    cartId: order.cartId,
    currency: order.currency,
    amount: order.amount,
    paymentMethod: order.paymentMethod,
    items: order.items,
    customer: order.customer,
    createdAt: order.createdAt.toISOString(),
  }
}

/**
 * Creates the order and its payment.create_intent job inside the idempotency transaction. One order
 * per (tenant, cart) is a database constraint; another key for an ordered cart is a deterministic 409
 * that the layer stores and replays.
 */
export async function createOrder(
  tx: Database,
  context: { tenantId: string, idempotencyKey: string, requestId: string },
  input: CreateOrderInput,
): Promise<IdempotentResult> {
  const orderId = newId('ord')
  // The job is sent with the order (one round trip): it only commits if the order does, and an
  // ordered cart rolls both back.
  const job = enqueueJob(tx, {
    kind: 'payment.create_intent',
    dedupeKey: orderId,
    payload: { orderId },
    resourceId: `order:${orderId}`,
    idempotencyKey: context.idempotencyKey,
    requestId: context.requestId,
  })
  job.catch(() => {})
  const [order] = await tx.insert(orders).values({
    id: orderId,
    tenantId: context.tenantId,
    cartId: input.cartId,
    currency: input.currency,
    amount: input.amount,
    paymentMethod: input.paymentMethod,
    items: input.items,
    customer: input.customer,
    idempotencyKey: context.idempotencyKey,
    requestId: context.requestId,
  }).onConflictDoNothing({ target: [orders.tenantId, orders.cartId] }).returning()

  if (!order) {
    metrics.uniqueViolations.inc({ constraint: 'orders_tenant_cart_unique' })
    const [existing] = await tx.select({ id: orders.id }).from(orders)
      .where(and(eq(orders.tenantId, context.tenantId), eq(orders.cartId, input.cartId)))
    throw problem('cart-already-ordered', `Cart "${input.cartId}" already has order ${existing?.id}. Fetch it with GET /api/orders/${existing?.id} instead of ordering again.`, { extensions: { orderId: existing?.id } })
  }
  await job
  return {
    status: 201,
    body: serializeOrder(order),
    headers: { Location: `/api/orders/${order.id}` },
    resourceType: 'order',
    resourceId: order.id,
  }
}

export async function findOrder(db: Database, tenantId: string, orderId: string): Promise<OrderRow | undefined> {
  const [order] = await db.select().from(orders).where(and(eq(orders.id, orderId), eq(orders.tenantId, tenantId)))
  return order
}
