import { readEndpoint } from '../../webhook-endpoints/route'

/** One endpoint with its health (docs/events.md#list-read-change-delete). */
export default defineEventHandler(async (event) => {
  const tenant = await requireTenantKey(event)
  return readEndpoint(event, tenant.id)
})
