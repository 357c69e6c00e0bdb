import { z } from 'zod'
import { defineJobType } from '../jobs/types'

export const WebhookDeliveryPayload = z.object({ eventId: z.string().min(1).max(64), endpointId: z.string().min(1).max(64) }).strict()
export type WebhookDeliveryPayload = z.infer<typeof WebhookDeliveryPayload>

/**
 * One event to one endpoint, every attempt under the event's id (`webhook-id`). Enqueued by the event's
 * own trigger (drizzle/0017_events_triggers.sql: kind, payload and resource as here) or by a resend;
 * one at a time per endpoint (its resource lock). Its attempts are bounded by WEBHOOK_RETRY_SCHEDULE,
 * which the kind applies; maxAttempts is only the ceiling the trigger writes.
 */
export const webhookDeliverJob = defineJobType({
  kind: 'webhook.deliver',
  payload: WebhookDeliveryPayload,
  resource: payload => `webhook_endpoint:${payload.endpointId}`,
  maxAttempts: 1000,
})
