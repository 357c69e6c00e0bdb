import { readOrderList } from '../orders/list'

/** The tenant's orders, newest first, Stripe's list parameters (docs/api.md#list-orders). */
export default defineEventHandler(async (event) => {
  const tenant = await requireTenantKey(event)
  return readOrderList(event, tenant.id)
})
