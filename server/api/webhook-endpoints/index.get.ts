import { readEndpointList } from '../../webhook-endpoints/route'

/** The tenant's webhook endpoints, newest first (docs/events.md#list-read-change-delete). */
export default defineEventHandler(async (event) => {
  const tenant = await requireTenantKey(event)
  return readEndpointList(event, tenant.id)
})
