import { patchEndpoint } from '../../webhook-endpoints/route'

/** Changes an endpoint's URL, event types, description, or enables and disables it (docs/events.md#list-read-change-delete). */
export default defineEventHandler(async (event) => {
  const tenant = await requireTenantKey(event)
  return patchEndpoint(event, tenant.id)
})
