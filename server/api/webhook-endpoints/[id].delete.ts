import { removeEndpoint } from '../../webhook-endpoints/route'

/** Deletes an endpoint; its queued deliveries are dropped unsent (docs/events.md#list-read-change-delete). */
export default defineEventHandler(async (event) => {
  const tenant = await requireTenantKey(event)
  return removeEndpoint(event, tenant.id)
})
