import { readEventList } from '../events/route'

/** The tenant's events, oldest first, after a cursor (docs/events.md#catch-up-get-apievents). */
export default defineEventHandler(async (event) => {
  const tenant = await requireTenantKey(event)
  return readEventList(event, tenant.id)
})
