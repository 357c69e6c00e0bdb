import { postWebhookEndpoint } from '../../webhook-endpoints/route'

/** Where the tenant's events are sent, signed (docs/events.md#create-an-endpoint): one endpoint per Idempotency-Key. */
export default defineEventHandler(async (event) => {
  const tenant = await requireTenantKey(event)
  return postWebhookEndpoint(event, tenant.id)
})
