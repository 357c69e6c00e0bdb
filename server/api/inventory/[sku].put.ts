import { putStock } from '../../stock/route'

/** The shop states a SKU's count (docs/inventory.md#set-a-count): idempotent by nature, no key. */
export default defineEventHandler(async (event) => {
  const tenant = await requireTenantKey(event)
  return putStock(event, tenant.id)
})
