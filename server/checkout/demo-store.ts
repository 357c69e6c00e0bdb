import { and, eq, inArray } from 'drizzle-orm'
import { type Database, transaction } from '@idempotent-checkout/db-kit'
import { stock, tenants } from '../db/schema'
import { findStock, setStock } from '../stock/service'
import type { Tenant } from '../tenants/service'

/** The tenant the checkout page's demo store sells as; it has no secret key, only sessions. */
export const DEMO_TENANT: Tenant = { id: 'ten_demo_store', name: 'Demo store' }

export const DEMO_CURRENCY = 'IDR'

/**
 * The demo store's catalogue; prices in minor units of DEMO_CURRENCY (IDR has none below the rupiah).
 * `stock` is the count the store starts with (docs/inventory.md#set-a-count): the tote is low, so the
 * page shows "Only 3 left" and can sell out.
 */
export const demoCatalogue = [
  { sku: 'TEE-ORGANIC', name: 'Organic cotton tee', description: 'Heavyweight, garment-dyed, made to last.', unitPrice: 149_000, stock: 50 },
  { sku: 'MUG-ENAMEL', name: 'Enamel camp mug', description: 'Chip-resistant, 350 ml, stacks neatly.', unitPrice: 89_000, stock: 50 },
  { sku: 'TOTE-CANVAS', name: 'Canvas tote', description: 'Waxed canvas with an inside pocket.', unitPrice: 119_000, stock: 3 },
  { sku: 'CAP-WOOL', name: 'Wool cap', description: 'Merino blend, one size fits most.', unitPrice: 99_000, stock: 20 },
] as const

/** A catalogue item as the page gets it: `available` is what an order can take now, null when the SKU is not tracked. */
export interface DemoCatalogueItem { sku: string, name: string, description: string, unitPrice: number, available: number | null }

/**
 * Opens the demo store: its tenant, and each catalogue item's starting count where the item has no
 * stock row yet — a restart, or another instance opening it too, never resets a count that orders
 * and adjustments moved since. Answers the catalogue with what is available now.
 */
export async function openDemoStore(db: Database): Promise<DemoCatalogueItem[]> {
  await db.insert(tenants).values(DEMO_TENANT).onConflictDoNothing({ target: tenants.id })
  let available = await availableOf(db)
  const untracked = demoCatalogue.filter(item => !available.has(item.sku))
  if (untracked.length) {
    await transaction(db, async (tx) => {
      for (const item of untracked) {
        // Checked again in the transaction: the count is set once, by whoever opens the store first.
        if (!await findStock(tx, DEMO_TENANT.id, item.sku)) await setStock(tx, { tenantId: DEMO_TENANT.id, sku: item.sku, onHand: item.stock }, {})
      }
    })
    available = await availableOf(db)
  }
  return demoCatalogue.map(({ stock: _start, ...item }) => ({ ...item, available: available.get(item.sku) ?? null }))
}

async function availableOf(db: Database): Promise<Map<string, number>> {
  const rows = await db.select({ sku: stock.sku, onHand: stock.onHand, reserved: stock.reserved }).from(stock)
    .where(and(eq(stock.tenantId, DEMO_TENANT.id), inArray(stock.sku, demoCatalogue.map(item => item.sku))))
  return new Map(rows.map(row => [row.sku, row.onHand - row.reserved]))
}
