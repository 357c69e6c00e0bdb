import { useConfig } from '../../config'
import { runCheckoutIdempotent } from '../../http/idempotent'
import { planWebhookIngest } from '../../webhooks/ingest'
import { countWebhookResult, readVerifiedDelivery } from '../../webhooks/receive'
import { requireWebhookProvider } from '../../webhooks/registry'
import { providerScope } from '../../../shared/resources'

/** Concurrent copies of one delivery wait for the first one's answer instead of getting a 409. */
const DUPLICATE_WAIT_MS = 5000

export default defineEventHandler(async (event) => {
  const provider = requireWebhookProvider(getRouterParam(event, 'provider'))
  const delivery = await readVerifiedDelivery(event, provider)
  const reply = await countWebhookResult(provider.name, runCheckoutIdempotent(event, {
    mode: 'atomic',
    scope: providerScope(provider.name),
    route: `POST /api/webhooks/${provider.name}`,
    key: delivery.event.eventId,
    payload: delivery.event,
    ttlSeconds: useConfig().WEBHOOK_IDEMPOTENCY_TTL_SECONDS,
    defaultWaitMs: DUPLICATE_WAIT_MS,
    plan: planWebhookIngest(provider.name, delivery, event.context.requestId),
  }))
  return reply.body
})
