import { and, eq } from 'drizzle-orm'
import type { Database } from '../db/client'
import { newId } from '../db/ids'
import { jobs, webhookEvents } from '../db/schema'
import type { IdempotentResult } from '../idempotency/handler'
import { enqueueJob } from '../jobs/enqueue'
import type { VerifiedDelivery } from './receive'

/**
 * Stores a verified event and its `webhook.apply` job in the idempotency record's transaction, and
 * answers at once: processing is the worker's. The unique (provider, event id) is the fence behind
 * the record, so an event redelivered after its record expired is still not applied twice.
 */
export async function ingestWebhookEvent(tx: Database, provider: string, delivery: VerifiedDelivery, requestId: string): Promise<IdempotentResult> {
  const { event } = delivery
  const id = newId('whe')
  // The job is sent with the event (one round trip); in the rare case that the event was stored
  // before, the job is taken back below, in the same transaction.
  const job = enqueueJob(tx, {
    kind: 'webhook.apply',
    dedupeKey: id,
    payload: { webhookEventId: id, orderId: event.orderId },
    resourceId: `order:${event.orderId}`,
    idempotencyKey: event.eventId,
    requestId,
  })
  job.catch(() => {})
  const [stored] = await tx.insert(webhookEvents).values({
    id,
    provider,
    eventId: event.eventId,
    type: event.type,
    orderId: event.orderId,
    paymentId: event.paymentId,
    amount: event.amount,
    currency: event.currency,
    rawBody: delivery.rawBody,
    signatureHeaders: delivery.signatureHeaders,
    requestId,
  }).onConflictDoNothing({ target: [webhookEvents.provider, webhookEvents.eventId] }).returning({ id: webhookEvents.id })
  const jobId = await job
  if (stored) return { status: 200, body: { received: true, eventId: event.eventId }, resourceType: 'webhook_event', resourceId: stored.id }
  if (jobId) await tx.delete(jobs).where(eq(jobs.id, jobId))
  const [earlier] = await tx.select({ id: webhookEvents.id }).from(webhookEvents)
    .where(and(eq(webhookEvents.provider, provider), eq(webhookEvents.eventId, event.eventId)))
  return { status: 200, body: { received: true, eventId: event.eventId, alreadyStored: true }, resourceType: 'webhook_event', resourceId: earlier?.id }
}
