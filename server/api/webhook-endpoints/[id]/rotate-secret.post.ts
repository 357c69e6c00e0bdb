import { postRotateSecret } from '../../../webhook-endpoints/route'

/** A new signing secret; the old one signs too for 24 hours (docs/events.md#rotate-the-secret). */
export default defineEventHandler(async (event) => {
  const tenant = await requireTenantKey(event)
  return postRotateSecret(event, tenant.id)
})
