import { useDatabaseHandle } from '../../../../db'
import { readInventory } from '../../../../ops/inventory'
import { InventoryPath } from '../../../../ops/schemas'
import { problem } from '../../../../problems'
import type { OpsInventory } from '../../../../../shared/ops-api'

/** One SKU's counts, its latest ledger rows, the orders holding reservations, and whether the ledger sums to the counts. */
export default defineEventHandler(async (event) => {
  const path = InventoryPath.safeParse({ tenantId: getRouterParam(event, 'tenantId'), sku: getRouterParam(event, 'sku') })
  if (!path.success) throw problem('not-found', `No tracked SKU at ${event.path.split('?')[0]}: a SKU is 1–64 letters, digits or - . _ ~ : @ ! $ & ' ( ) * + , ; =. List the tracked ones with GET /api/ops/inventory.`)
  return (await readInventory(useDatabaseHandle().db, path.data.tenantId, path.data.sku)) satisfies OpsInventory
})
