/** A Standard Webhooks endpoint: each event id handled once, a redelivery answered from the record. */
export default defineIdempotentWebhookHandler(
  standardWebhooksProvider(useRuntimeConfig().webhookSecret),
  (event, { eventId, body }) => {
    recordExecution('webhooks', eventId, body)
    return { received: eventId }
  },
  { maxBodyBytes: 2048 },
)
