import { and, eq, gte, isNotNull, ne, sql } from 'drizzle-orm'
import type { Database } from '@idempotent-checkout/db-kit'
import { rowsOf } from '../db/raw-rows'
import { ledgerSums } from '../stock/service'
import { invoices, mailbox, orders, orderStatusHistory, paymentIntentRefunds, paymentIntents, refunds, requestLog, requestLogReplays, sideEffects, stock, stockMovements, webhookEvents } from '../db/schema'
import type { BusinessDuplicate, DuplicatesAudit, ExactlyOnceViolation, FrequentReplay, ViolationKind } from '../../shared/ops-api'

/**
 * The duplicates audit (docs/operations.md#evidence-and-audit): what "exactly once" would look like
 * if it had failed. `healthy` answers one question, each part a bounded query (at most AUDIT_LIMIT
 * rows):
 *
 * - exactly-once violations: more than one marker or invoice per order and effect, more emails to
 *   an order than the markers that sent them, more than one order per cart, order per idempotency
 *   key (within the key's TTL), stored event per provider event id, or status-history row per
 *   stored event; more than one API refund per idempotency key (within its TTL), refunds not failed
 *   holding more than the order's amount; at mockpay (whose ledger is here), a refund made
 *   twice under one key, or refunds of a payment above its amount; and in the stock ledger, an
 *   order's reservation of a SKU settled (committed or released) more than once, or a stock row
 *   whose counts differ from the sums of its movements. The unique constraints, the order's row
 *   lock and the ledger's insert trigger forbid these; the audit checks the rows, not the fences,
 *   so a dropped constraint or a write around them shows. Empty in a healthy system: any row here makes
 *   `healthy` false.
 *
 * Apart, suspects for a human, which a healthy system may well have (they never make it unhealthy):
 *
 * - business duplicates: the incident query — one tenant, one customer, one amount, different carts,
 *   each order within `windowMinutes` of the previous one (a chain counts as one group). The key
 *   layer cannot catch these: two carts are two intents, and a shopper may buy the same thing twice.
 *   Reads the orders of the last AUDIT_LOOKBACK_HOURS only.
 * - frequent replays: keys replayed at least `replayThreshold` times in the last
 *   AUDIT_LOOKBACK_HOURS — a client stuck in a retry loop, answered correctly every time.
 */

export const AUDIT_LIMIT = 100
export const AUDIT_LOOKBACK_HOURS = 24
/** Orders listed per business-duplicate group; a larger group is cut here. */
const ORDERS_PER_GROUP = 100

export interface AuditOptions {
  windowMinutes: number
  replayThreshold: number
  /** How far apart two orders of one key may be and still be one intent: the order key's TTL. */
  keyTtlSeconds: number
}

const recent = (column: typeof orders.createdAt | typeof requestLog.createdAt | typeof requestLogReplays.lastAt | typeof refunds.createdAt) =>
  gte(column, sql`now() - make_interval(hours => ${AUDIT_LOOKBACK_HOURS}::int)`)
const count = sql<number>`count(*)::int`.mapWith(Number)
const moreThanOne = sql`count(*) > 1`
/** Two rows of one key within its TTL are one request executed twice; after it the key may legitimately return. */
const withinTtl = (column: typeof orders.createdAt | typeof refunds.createdAt, keyTtlSeconds: number) =>
  sql`max(${column}) - min(${column}) < make_interval(secs => ${keyTtlSeconds}::int)`
/**
 * The markers of the effects that send an email: the confirmation, each refund notice, and the
 * invoice when it was sent by email (SMTP_URL: its Message-ID begins `<invoice.`).
 */
const emailMarkers = sql`(select count(*) from ${sideEffects} where ${sideEffects.orderId} = ${mailbox.orderId}
  and (${sideEffects.effect} = 'confirmation_email' or ${sideEffects.effect} like 'refund_notice:%'
    or (${sideEffects.effect} = 'invoice' and exists (select 1 from ${mailbox} sent where sent.order_id = ${mailbox.orderId} and sent.message_id like '<invoice.%'))))`

export async function auditDuplicates(db: Database, options: AuditOptions): Promise<DuplicatesAudit> {
  const [businessDuplicates, exactlyOnceViolations, frequentReplays] = await Promise.all([
    findBusinessDuplicates(db, options.windowMinutes),
    findExactlyOnceViolations(db, options.keyTtlSeconds),
    findFrequentReplays(db, options.replayThreshold),
  ])
  return {
    healthy: exactlyOnceViolations.length === 0,
    window: { minutes: options.windowMinutes },
    exactlyOnceViolations,
    suspects: { businessDuplicates, frequentReplays },
  }
}

/**
 * Keys replayed at least `threshold` times lately: their replays logged one by one (the first of each
 * minute on each instance) and those counted (request_log_replays), summed.
 */
async function findFrequentReplays(db: Database, threshold: number): Promise<FrequentReplay[]> {
  const result = await db.execute(sql`
    select scope, key, sum(replays)::int as replays from (
      select ${requestLog.scope} as scope, ${requestLog.idempotencyKey} as key, 1 as replays from ${requestLog}
      where ${requestLog.outcome} = 'replay' and ${requestLog.idempotencyKey} is not null and ${recent(requestLog.createdAt)}
      union all
      select ${requestLogReplays.scope}, ${requestLogReplays.idempotencyKey}, ${requestLogReplays.replays} from ${requestLogReplays}
      where ${recent(requestLogReplays.lastAt)}
    ) replayed
    group by scope, key
    having sum(replays) >= ${threshold}
    order by sum(replays) desc
    limit ${AUDIT_LIMIT}`)
  return rowsOf<FrequentReplay>(result).map(row => ({ scope: row.scope, key: row.key, replays: Number(row.replays) }))
}

/**
 * Orders of one (tenant, customer email, amount, currency), in time order; a new group starts
 * wherever the gap to the previous order exceeds the window. Groups of two or more carts are reported.
 */
async function findBusinessDuplicates(db: Database, windowMinutes: number): Promise<BusinessDuplicate[]> {
  const result = await db.execute(sql`
    with recent as (
      select id, tenant_id, lower(customer->>'email') as email, amount, currency, cart_id, created_at,
        case when created_at - lag(created_at) over same_customer <= make_interval(mins => ${windowMinutes}::int) then 0 else 1 end as starts_group
      from ${orders}
      where created_at >= now() - make_interval(hours => ${AUDIT_LOOKBACK_HOURS}::int)
      window same_customer as (partition by tenant_id, lower(customer->>'email'), amount, currency order by created_at, id)
    ), grouped as (
      select *, sum(starts_group) over (partition by tenant_id, email, amount, currency order by created_at, id) as group_no
      from recent
    )
    select tenant_id as "tenantId", email as "customerEmail", amount::float8 as amount, currency,
      json_agg(json_build_object('id', id, 'cartId', cart_id, 'createdAt', created_at) order by created_at, id) as orders
    from grouped
    group by tenant_id, email, amount, currency, group_no
    having count(*) > 1 and count(distinct cart_id) > 1
    order by max(created_at) desc
    limit ${AUDIT_LIMIT}`)
  return rowsOf<BusinessDuplicate & { orders: Array<{ id: string, cartId: string, createdAt: string }> | string }>(result).map(row => ({
    tenantId: row.tenantId,
    customerEmail: row.customerEmail,
    amount: Number(row.amount),
    currency: row.currency,
    orders: (typeof row.orders === 'string' ? JSON.parse(row.orders) as BusinessDuplicate['orders'] : row.orders)
      .slice(0, ORDERS_PER_GROUP)
      .map(order => ({ id: order.id, cartId: order.cartId, createdAt: new Date(order.createdAt).toISOString() })),
  }))
}

async function findExactlyOnceViolations(db: Database, keyTtlSeconds: number): Promise<ExactlyOnceViolation[]> {
  const orderIds = sql<string[]>`array_agg(${orders.id} order by ${orders.createdAt})`
  const refundTotal = sql<number>`sum(${refunds.amount})::float8`.mapWith(Number)
  const providerRefundTotal = sql<number>`sum(${paymentIntentRefunds.amount})::float8`.mapWith(Number)
  const [markers, emails, issuedInvoices, ordersPerCart, ordersPerKey, eventsPerId, applications, refundsPerKey, refundsOverAmount, providerRefundsPerKey, providerRefundsOverAmount, settledTwice, offLedger] = await Promise.all([
    db.select({ orderId: sideEffects.orderId, effect: sideEffects.effect, count }).from(sideEffects)
      .groupBy(sideEffects.orderId, sideEffects.effect).having(moreThanOne).limit(AUDIT_LIMIT),
    // An email is written in the statement that inserts its marker: one per marker, several (one per refund) with one subject.
    db.select({ orderId: sql<string>`${mailbox.orderId}`, markers: sql<number>`${emailMarkers}::int`.mapWith(Number), count }).from(mailbox)
      .where(isNotNull(mailbox.orderId)).groupBy(mailbox.orderId).having(sql`count(*) > ${emailMarkers}`).limit(AUDIT_LIMIT),
    db.select({ orderId: invoices.orderId, count }).from(invoices)
      .groupBy(invoices.orderId).having(moreThanOne).limit(AUDIT_LIMIT),
    db.select({ tenantId: orders.tenantId, cartId: orders.cartId, orderIds, count }).from(orders)
      .groupBy(orders.tenantId, orders.cartId).having(moreThanOne).limit(AUDIT_LIMIT),
    // A key may legitimately return after its TTL; two orders of one key within it are one intent run twice.
    db.select({ tenantId: orders.tenantId, key: sql<string>`${orders.idempotencyKey}`, orderIds, count }).from(orders)
      .where(and(isNotNull(orders.idempotencyKey), recent(orders.createdAt)))
      .groupBy(orders.tenantId, orders.idempotencyKey)
      .having(and(moreThanOne, withinTtl(orders.createdAt, keyTtlSeconds)))
      .limit(AUDIT_LIMIT),
    db.select({ provider: webhookEvents.provider, eventId: webhookEvents.eventId, count }).from(webhookEvents)
      .groupBy(webhookEvents.provider, webhookEvents.eventId).having(moreThanOne).limit(AUDIT_LIMIT),
    db.select({ webhookEventId: sql<string>`${orderStatusHistory.webhookEventId}`, count }).from(orderStatusHistory)
      .where(isNotNull(orderStatusHistory.webhookEventId)).groupBy(orderStatusHistory.webhookEventId).having(moreThanOne).limit(AUDIT_LIMIT),
    db.select({ tenantId: refunds.tenantId, key: sql<string>`${refunds.idempotencyKey}`, refundIds: sql<string[]>`array_agg(${refunds.id} order by ${refunds.createdAt})`, count }).from(refunds)
      .where(and(eq(refunds.source, 'api'), isNotNull(refunds.idempotencyKey), recent(refunds.createdAt)))
      .groupBy(refunds.tenantId, refunds.idempotencyKey)
      .having(and(moreThanOne, withinTtl(refunds.createdAt, keyTtlSeconds)))
      .limit(AUDIT_LIMIT),
    db.select({ orderId: refunds.orderId, amount: orders.amount, refunded: refundTotal, count }).from(refunds)
      .innerJoin(orders, eq(orders.id, refunds.orderId))
      .where(ne(refunds.status, 'failed'))
      .groupBy(refunds.orderId, orders.amount).having(sql`sum(${refunds.amount}) > ${orders.amount}`).limit(AUDIT_LIMIT),
    db.select({ orderId: paymentIntents.orderId, intentId: paymentIntents.id, token: sql<string>`${paymentIntentRefunds.idempotencyToken}`, count }).from(paymentIntentRefunds)
      .innerJoin(paymentIntents, eq(paymentIntents.id, paymentIntentRefunds.intentId))
      .where(isNotNull(paymentIntentRefunds.idempotencyToken))
      .groupBy(paymentIntents.orderId, paymentIntents.id, paymentIntentRefunds.idempotencyToken).having(moreThanOne).limit(AUDIT_LIMIT),
    db.select({ orderId: paymentIntents.orderId, intentId: paymentIntents.id, amount: paymentIntents.amount, refunded: providerRefundTotal, count }).from(paymentIntentRefunds)
      .innerJoin(paymentIntents, eq(paymentIntents.id, paymentIntentRefunds.intentId))
      .groupBy(paymentIntents.orderId, paymentIntents.id, paymentIntents.amount).having(sql`sum(${paymentIntentRefunds.amount}) > ${paymentIntents.amount}`).limit(AUDIT_LIMIT),
    // A reservation's units came back or went out twice: the partial unique index stock_movements_settled_once forbids it.
    db.select({ tenantId: stockMovements.tenantId, orderId: stockMovements.sourceId, sku: stockMovements.sku, kinds: sql<string[]>`array_agg(${stockMovements.kind} order by ${stockMovements.id})`, count })
      .from(stockMovements).where(sql`${stockMovements.kind} in ('commit', 'release')`)
      .groupBy(stockMovements.tenantId, stockMovements.sourceId, stockMovements.sku).having(moreThanOne).limit(AUDIT_LIMIT),
    // Counts moved without a ledger row (the trigger bypassed, an update by hand): count is the SKU's movements.
    db.select({ tenantId: stock.tenantId, sku: stock.sku, onHand: stock.onHand, reserved: stock.reserved, ledgerOnHand: ledgerSums.onHand, ledgerReserved: ledgerSums.reserved, count: sql<number>`count(${stockMovements.id})::int`.mapWith(Number) })
      .from(stock).leftJoin(stockMovements, and(eq(stockMovements.tenantId, stock.tenantId), eq(stockMovements.sku, stock.sku)))
      .groupBy(stock.tenantId, stock.sku)
      .having(sql`${stock.onHand} <> ${ledgerSums.onHand} or ${stock.reserved} <> ${ledgerSums.reserved}`)
      .limit(AUDIT_LIMIT),
  ])
  const violation = (kind: ViolationKind) => ({ count: n, ...ids }: { count: number } & Record<string, unknown>): ExactlyOnceViolation => ({ kind, ids, count: n })
  return [
    ...markers.map(violation('side_effect')),
    ...emails.map(violation('email')),
    ...issuedInvoices.map(violation('invoice')),
    ...ordersPerCart.map(violation('order_per_cart')),
    ...ordersPerKey.map(violation('order_per_key')),
    ...eventsPerId.map(violation('webhook_event')),
    ...applications.map(violation('webhook_event')),
    ...refundsPerKey.map(violation('refund_per_key')),
    ...refundsOverAmount.map(violation('refunds_over_amount')),
    ...providerRefundsPerKey.map(violation('provider_refund_per_key')),
    ...providerRefundsOverAmount.map(violation('provider_refunds_over_amount')),
    ...settledTwice.map(violation('stock_settled_twice')),
    ...offLedger.map(violation('stock_off_ledger')),
  ].slice(0, AUDIT_LIMIT)
}
