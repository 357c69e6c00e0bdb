import { and, desc, eq } from 'drizzle-orm'
import type { Database } from '@idempotent-checkout/db-kit'
import { stock } from '../db/schema'
import { problem } from '../problems'
import { inventoryOf, serializeStock } from '../stock/service'
import type { OpsInventory, OpsStock } from '../../shared/ops-api'

/** The console's inventory panel (docs/operations.md#the-operations-console): tracked SKUs of every tenant, and one SKU's ledger. */

export const OPS_STOCK_LIMIT = 100

/** Tracked SKUs, the most recently moved first (a sale, a count, a release), at most OPS_STOCK_LIMIT. */
export async function listTrackedStock(db: Database, filter: { tenantId?: string, sku?: string }): Promise<OpsStock[]> {
  const rows = await db.select().from(stock)
    .where(and(
      filter.tenantId === undefined ? undefined : eq(stock.tenantId, filter.tenantId),
      filter.sku === undefined ? undefined : eq(stock.sku, filter.sku),
    ))
    .orderBy(desc(stock.updatedAt), stock.tenantId, stock.sku)
    .limit(OPS_STOCK_LIMIT)
  return rows.map(row => ({ ...serializeStock(row), tenantId: row.tenantId }))
}

/** One SKU's counts, latest movements, holding orders and ledger sums; 404 when the tenant does not track it. */
export async function readInventory(db: Database, tenantId: string, sku: string): Promise<OpsInventory> {
  const inventory = await inventoryOf(db, tenantId, sku)
  if (!inventory) throw problem('not-found', `Tenant ${tenantId} tracks no SKU "${sku}". List the tracked SKUs with GET /api/ops/inventory?tenantId=${encodeURIComponent(tenantId)}.`)
  return inventory
}
