import { and, eq, sql } from 'drizzle-orm'
import type { Database } from '@idempotent-checkout/db-kit'
import { newId } from '../db/ids'
import { orders } from '../db/schema'
import { defineStatement } from '@idempotent-checkout/db-kit'
import type { AtomicPlan } from 'nuxt-idempotency/core'
import { jobInsert } from '../jobs/enqueue'
import { paymentCreateIntentJob } from './job-types'
import { metrics } from '../observability/metrics'
import { problem } from '../problems'
import type { CreatedOrderView, OrderPaymentView } from '../../shared/orders'
import { type CreateOrderInput, OrderIdSchema } from './schema'
import { OVERSOLD_CONSTRAINT, reserveForOrder } from '../stock/ledger'
import { insufficientStockProblem } from '../stock/service'

type OrderRow = typeof orders.$inferSelect

const CART_CONSTRAINT = 'orders_tenant_cart_unique'

export function serializeOrder(order: OrderRow): CreatedOrderView {
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
 * The order's payment as the checkout page continues it: the provider, its payment id, the next
 * step (Stripe's client secret for Stripe.js, Midtrans' virtual account or e-wallet actions) and,
 * after a definitive refusal, why (the shopper's words and the provider's code). Null until the
 * payment.create_intent job ran. Only the order's own tenant (or checkout session) reads it.
 */
export function serializePayment(order: OrderRow): OrderPaymentView | null {
  if (!order.paymentProvider) return null
  return {
    provider: order.paymentProvider,
    id: order.paymentIntentId,
    nextAction: order.paymentNextAction,
    error: order.paymentError && { code: order.paymentError.code, message: order.paymentError.message },
    status: order.paymentError ? 'refused' : 'ready',
  }
}

const insertOrder = defineStatement(db => db.insert(orders).values({
  id: sql.placeholder('id'),
  tenantId: sql.placeholder('tenantId'),
  cartId: sql.placeholder('cartId'),
  currency: sql.placeholder('currency'),
  amount: sql.placeholder('amount'),
  paymentMethod: sql.placeholder('paymentMethod'),
  items: sql.placeholder('items'),
  customer: sql.placeholder('customer'),
  idempotencyKey: sql.placeholder('idempotencyKey'),
  requestId: sql.placeholder('requestId'),
  checkoutSessionId: sql.placeholder('checkoutSessionId'),
  createdAt: sql.placeholder('createdAt'),
  updatedAt: sql.placeholder('createdAt'),
}))

/**
 * The order, its stock reservations (docs/inventory.md#reservations) and its payment.create_intent
 * job (PAYMENT_PROVIDER is always set), for the idempotency record's transaction. The response is known
 * before anything is sent (the id and creation time are chosen here), so the whole transaction
 * goes out at once. One order per (tenant, cart) is a database constraint:
 * another key for an ordered cart fails the transaction, and the answer — a deterministic 409 — is
 * stored and replayed for that key; so does an item short of stock (409 insufficient-stock).
 */
export function planOrder(
  db: Database,
  now: Date,
  context: { tenantId: string, idempotencyKey: string, requestId: string, checkoutSessionId?: string },
  input: CreateOrderInput,
): AtomicPlan {
  const order: OrderRow = {
    ...input,
    id: newId('ord'),
    tenantId: context.tenantId,
    status: 'pending_payment',
    idempotencyKey: context.idempotencyKey,
    requestId: context.requestId,
    paymentIntentId: null,
    paymentProvider: null,
    paymentNextAction: null,
    paymentError: null,
    paymentCheckedAt: null,
    cancelReason: null,
    checkoutSessionId: context.checkoutSessionId ?? null,
    createdAt: now,
    updatedAt: now,
  }
  const statements = [
    insertOrder(db, order),
    reserveForOrder({ tenantId: context.tenantId, orderId: order.id, items: input.items }, context),
    jobInsert(db, paymentCreateIntentJob, { orderId: order.id }, {
      dedupeKey: order.id,
      idempotencyKey: context.idempotencyKey,
      requestId: context.requestId,
    }),
  ]
  return {
    statements,
    result: {
      status: 201,
      body: serializeOrder(order),
      headers: { Location: `/api/orders/${order.id}` },
      resourceType: 'order',
      resourceId: order.id,
    },
    onConstraintViolation: async (constraint, db) => {
      if (constraint === OVERSOLD_CONSTRAINT) throw await insufficientStockProblem(db, context.tenantId, input.items)
      if (constraint !== CART_CONSTRAINT) return undefined
      metrics.uniqueViolations.inc({ constraint })
      const [existing] = await db.select({ id: orders.id, checkoutSessionId: orders.checkoutSessionId }).from(orders)
        .where(and(eq(orders.tenantId, context.tenantId), eq(orders.cartId, input.cartId)))
      // A checkout session is told only of its own orders: another shopper's order id stays theirs.
      if (context.checkoutSessionId !== undefined && existing?.checkoutSessionId !== context.checkoutSessionId) {
        throw problem('cart-already-ordered', `Cart "${input.cartId}" was already ordered in another checkout session. Start a new cart to order again.`)
      }
      throw problem('cart-already-ordered', `Cart "${input.cartId}" already has order ${existing?.id}. Fetch it with GET /api/orders/${existing?.id} instead of ordering again.`, { extensions: { orderId: existing?.id } })
    },
  }
}

/** An operator's lookup: any tenant's order; undefined for an id that is not an order id. */
export async function findOrderOfAnyTenant(db: Database, orderId: string | undefined): Promise<OrderRow | undefined> {
  const id = OrderIdSchema.safeParse(orderId)
  if (!id.success) return undefined
  const [order] = await db.select().from(orders).where(eq(orders.id, id.data))
  return order
}

export async function findOrder(db: Database, tenantId: string, orderId: string): Promise<OrderRow | undefined> {
  const [order] = await db.select().from(orders).where(and(eq(orders.id, orderId), eq(orders.tenantId, tenantId)))
  return order
}
