import { readStockList } from '../../stock/route'

/** The tenant's tracked SKUs, by SKU (docs/inventory.md#read-stock). */
export default defineEventHandler(async (event) => {
  const tenant = await requireTenant(event)
  return readStockList(event, tenant.id)
})
