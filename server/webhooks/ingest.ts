import { and, eq, sql } from 'drizzle-orm'
import type { Database } from '@idempotent-checkout/db-kit'
import { newId } from '../db/ids'
import { webhookEvents } from '../db/schema'
import { defineStatement } from '@idempotent-checkout/db-kit'
import type { AtomicPlan } from 'nuxt-idempotency/core'
import { jobInsert } from '../jobs/enqueue'
import { webhookApplyJob } from './job-types'
import type { VerifiedDelivery } from './receive'

const EVENT_CONSTRAINT = 'webhook_events_provider_event_unique'

const insertEvent = defineStatement(db => db.insert(webhookEvents).values({
  id: sql.placeholder('id'),
  provider: sql.placeholder('provider'),
  eventId: sql.placeholder('eventId'),
  type: sql.placeholder('type'),
  orderId: sql.placeholder('orderId'),
  paymentId: sql.placeholder('paymentId'),
  amount: sql.placeholder('amount'),
  currency: sql.placeholder('currency'),
  refund: sql.placeholder('refund'),
  listedRefunds: sql.placeholder('listedRefunds'),
  rawBody: sql.placeholder('rawBody'),
  signatureHeaders: sql.placeholder('signatureHeaders'),
  source: sql.placeholder('source'),
  requestId: sql.placeholder('requestId'),
  receivedAt: sql.placeholder('receivedAt'),
}))

/**
 * Stores a verified event and its `webhook.apply` job in the idempotency record's transaction, and
 * answers at once: processing is the worker's. The unique (provider, event id) is the fence behind
 * the record: an event redelivered after its record expired fails the transaction, and is answered
 * as already stored, never applied twice.
 */
export function planWebhookIngest(provider: string, delivery: VerifiedDelivery, requestId: string) {
  return (db: Database, now: Date): AtomicPlan => {
    const { event } = delivery
    const id = newId('whe')
    return {
      statements: [
        insertEvent(db, {
          id, provider, ...event, paymentId: event.paymentId ?? null, amount: event.amount ?? null, currency: event.currency ?? null, refund: event.refund ?? null, listedRefunds: event.listedRefunds ?? null,
          rawBody: delivery.rawBody, signatureHeaders: delivery.signatureHeaders, source: delivery.source ?? 'webhook', requestId, receivedAt: now,
        }),
        jobInsert(db, webhookApplyJob, { webhookEventId: id, orderId: event.orderId }, { dedupeKey: id, idempotencyKey: event.eventId, requestId }),
      ],
      result: { status: 200, body: { received: true, eventId: event.eventId }, resourceType: 'webhook_event', resourceId: id },
      onConstraintViolation: async (constraint, db) => {
        if (constraint !== EVENT_CONSTRAINT) return undefined
        const [earlier] = await db.select({ id: webhookEvents.id }).from(webhookEvents)
          .where(and(eq(webhookEvents.provider, provider), eq(webhookEvents.eventId, event.eventId)))
        return { status: 200, body: { received: true, eventId: event.eventId, alreadyStored: true }, resourceType: 'webhook_event', resourceId: earlier?.id }
      },
    }
  }
}
