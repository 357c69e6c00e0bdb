import { readStock } from '../../stock/route'

/** A tracked SKU's counts (docs/inventory.md#read-stock); the checkout page reads them too. */
export default defineEventHandler(async (event) => {
  const tenant = await requireTenant(event)
  return readStock(event, tenant.id)
})
