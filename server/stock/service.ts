import { and, asc, desc, eq, gt, inArray, type SQL, sql } from 'drizzle-orm'
import type { Database } from '@idempotent-checkout/db-kit'
import { newId } from '../db/ids'
import { rowsOf } from '../db/raw-rows'
import { stock, stockMovements } from '../db/schema'
import { problem } from '../problems'
import type { ReservationView, StockView } from '../../shared/orders'
import type { AdjustmentReason } from '../../shared/statuses'
import type { MovementContext } from './ledger'

type StockRow = typeof stock.$inferSelect

export function serializeStock(row: StockRow): StockView {
  return { object: 'stock', sku: row.sku, onHand: row.onHand, reserved: row.reserved, available: row.onHand - row.reserved, updatedAt: row.updatedAt.toISOString() }
}

export const unknownSkuProblem = (sku: string) =>
  problem('not-found', `No stock is set for SKU "${sku}". Set its count first: PUT /api/inventory/${encodeURIComponent(sku)} with {"onHand": …}.`)

export async function findStock(db: Database, tenantId: string, sku: string): Promise<StockRow | undefined> {
  const [row] = await db.select().from(stock).where(and(eq(stock.tenantId, tenantId), eq(stock.sku, sku)))
  return row
}

/** A page of the tenant's tracked SKUs, by SKU. */
export async function listStock(db: Database, tenantId: string, page: { limit: number, startingAfter?: string }): Promise<{ data: StockView[], hasMore: boolean }> {
  const rows = await db.select().from(stock)
    .where(and(eq(stock.tenantId, tenantId), page.startingAfter === undefined ? undefined : gt(stock.sku, page.startingAfter)))
    .orderBy(asc(stock.sku)).limit(page.limit + 1)
  return { data: rows.slice(0, page.limit).map(serializeStock), hasMore: rows.length > page.limit }
}

/** The stock row, row-locked: counts set by hand decide one after another, after every reservation before them. */
async function lockStock(tx: Database, tenantId: string, sku: string): Promise<StockRow | undefined> {
  const [row] = await tx.select().from(stock).where(and(eq(stock.tenantId, tenantId), eq(stock.sku, sku))).for('update')
  return row
}

const belowReserved = (sku: string, row: StockRow, onHand: number) => problem(
  'stock-below-reserved',
  `SKU "${sku}" would have ${onHand} on hand, below the ${row.reserved} unpaid orders hold. Count again, or wait until they are paid, canceled or expire: onHand may not go below ${row.reserved}.`,
  { extensions: { onHand: row.onHand, reserved: row.reserved } },
)

/**
 * PUT /api/inventory/:sku: the count as the shop states it (a stocktake). Idempotent by nature:
 * the same count again changes nothing. The difference is a `set` movement, so the ledger's sums
 * stay equal to the counts. A count below what unpaid orders hold is refused.
 */
export async function setStock(tx: Database, target: { tenantId: string, sku: string, onHand: number }, context: MovementContext): Promise<StockRow> {
  await tx.insert(stock).values({ tenantId: target.tenantId, sku: target.sku, onHand: 0 }).onConflictDoNothing()
  const row = (await lockStock(tx, target.tenantId, target.sku))!
  if (target.onHand < row.reserved) throw belowReserved(target.sku, row, target.onHand)
  const delta = target.onHand - row.onHand
  if (delta !== 0) await insertCountMovement(tx, target, 'set', newId('cnt'), delta, null, context)
  return (await findStock(tx, target.tenantId, target.sku))!
}

/**
 * POST /api/inventory/:sku/adjustments, in the idempotency record's transaction: a delta counted
 * once per key (a goods receipt retried by the client adds its units once).
 */
export async function adjustStock(tx: Database, target: { tenantId: string, sku: string, delta: number, reason: AdjustmentReason }, context: MovementContext): Promise<StockRow> {
  const row = await lockStock(tx, target.tenantId, target.sku)
  if (!row) throw unknownSkuProblem(target.sku)
  if (row.onHand + target.delta < row.reserved) throw belowReserved(target.sku, row, row.onHand + target.delta)
  await insertCountMovement(tx, target, 'adjust', newId('adj'), target.delta, target.reason, context)
  return (await findStock(tx, target.tenantId, target.sku))!
}

async function insertCountMovement(tx: Database, target: { tenantId: string, sku: string }, kind: 'set' | 'adjust', sourceId: string, delta: number, reason: string | null, context: MovementContext): Promise<void> {
  await tx.insert(stockMovements).values({
    tenantId: target.tenantId, sku: target.sku, kind, sourceType: kind === 'set' ? 'count' : 'adjustment', sourceId,
    quantity: Math.abs(delta), onHandDelta: delta, reservedDelta: 0, reason, requestId: context.requestId ?? null, jobId: context.jobId ?? null,
  })
}

/**
 * The 409 insufficient-stock of an order whose reservation was refused, read after the rollback:
 * each tracked item short of units, with what is available now. Stock freed meanwhile can leave none
 * short: then every tracked item is listed, and the detail says to try again.
 */
export async function insufficientStockProblem(db: Database, tenantId: string, items: Array<{ sku: string, quantity: number }>) {
  const requested = new Map<string, number>()
  for (const item of items) requested.set(item.sku, (requested.get(item.sku) ?? 0) + item.quantity)
  const rows = await db.select({ sku: stock.sku, available: sql<number>`(${stock.onHand} - ${stock.reserved})::int` }).from(stock)
    .where(and(eq(stock.tenantId, tenantId), inArray(stock.sku, [...requested.keys()]))).orderBy(asc(stock.sku))
  const tracked = rows.map(row => ({ sku: row.sku, requested: requested.get(row.sku)!, available: Number(row.available) }))
  const short = tracked.filter(item => item.requested > item.available)
  const listed = short.length > 0 ? short : tracked
  const named = listed.map(item => `${item.sku} (${item.requested} asked, ${item.available} available)`).join(', ')
  return problem('insufficient-stock', short.length > 0
    ? `Not enough stock for ${named}. Nothing was reserved: order fewer units or other items, under a new Idempotency-Key.`
    : `Stock for ${named} changed while the order was placed. Nothing was reserved: order again under a new Idempotency-Key.`, { extensions: { items: listed } })
}

/**
 * GET /api/orders/:id `reservations`, as a subquery of the statement that reads the order (one
 * snapshot with its status): each tracked SKU the order holds, by SKU, and how it was settled.
 * `orderId` is the order's id column, written out by the caller.
 */
export const reservationViews = (orderId: SQL) => sql<ReservationView[]>`coalesce((
  select json_agg(json_build_object('sku', r.sku, 'quantity', r.quantity, 'status', coalesce((
    select case s.kind when 'commit' then 'committed' else 'released' end from ${stockMovements} s
    where s.tenant_id = r.tenant_id and s.source_id = r.source_id and s.sku = r.sku and s.kind in ('commit', 'release')), 'reserved')) order by r.sku)
  from ${stockMovements} r where r.order_id = ${orderId} and r.kind = 'reserve'), '[]'::json)`

/**
 * What a restocking refund may still put back, per SKU: what the order's payment committed less what
 * its earlier refunds restocked. Read under the order's lock.
 */
export async function restockable(tx: Database, orderId: string): Promise<Map<string, number>> {
  const rows = rowsOf<{ sku: string, units: string }>(await tx.execute(sql`
    select sku, sum(case when kind = 'commit' then quantity else -quantity end) as units
    from ${stockMovements} where order_id = ${orderId} and kind in ('commit', 'restock') group by sku`))
  return new Map(rows.map(row => [row.sku, Number(row.units)]).filter(([, units]) => Number(units) > 0) as Array<[string, number]>)
}

/** Σ of the stock ledger's deltas over the movements a query groups: what the counts must equal. */
export const ledgerSums = {
  onHand: sql<number>`coalesce(sum(${stockMovements.onHandDelta}), 0)::float8`.mapWith(Number),
  reserved: sql<number>`coalesce(sum(${stockMovements.reservedDelta}), 0)::float8`.mapWith(Number),
}

/** The ops console's inventory panel: the counts, the latest movements, who holds reservations, and the ledger's sums. */
export async function inventoryOf(db: Database, tenantId: string, sku: string) {
  const row = await findStock(db, tenantId, sku)
  if (!row) return undefined
  const [movements, holders, [sums]] = await Promise.all([
    db.select().from(stockMovements).where(and(eq(stockMovements.tenantId, tenantId), eq(stockMovements.sku, sku))).orderBy(desc(stockMovements.id)).limit(100),
    db.execute(sql`select r.order_id as "orderId", r.quantity, r.created_at as "createdAt" from ${stockMovements} r
      where r.tenant_id = ${tenantId} and r.sku = ${sku} and r.kind = 'reserve'
        and not exists (select 1 from ${stockMovements} s where s.tenant_id = r.tenant_id and s.source_id = r.source_id and s.sku = r.sku and s.kind in ('commit', 'release'))
      order by r.created_at, r.id limit 100`),
    db.select(ledgerSums)
      .from(stockMovements).where(and(eq(stockMovements.tenantId, tenantId), eq(stockMovements.sku, sku))),
  ])
  return {
    stock: { ...serializeStock(row), tenantId },
    movements: movements.map(({ tenantId: _, ...movement }) => ({ ...movement, createdAt: movement.createdAt.toISOString() })),
    holders: rowsOf<{ orderId: string, quantity: string, createdAt: string | Date }>(holders).map(h => ({ orderId: h.orderId, quantity: Number(h.quantity), createdAt: new Date(h.createdAt).toISOString() })),
    ledger: { onHand: sums?.onHand ?? 0, reserved: sums?.reserved ?? 0 },
  }
}
