import { and, asc, count, desc, eq, gte, inArray, type SQL, sql } from 'drizzle-orm'
import { type Database, transaction } from '@idempotent-checkout/db-kit'
import { newId } from '../db/ids'
import { events, jobs, webhookAttempts, webhookEndpoints } from '../db/schema'
import { enqueueJob } from '../jobs/enqueue'
import { problem } from '../problems'
import { webhookDeliverJob } from '../webhook-endpoints/job-types'
import type { OpsEvent, OpsEventDelivery, OpsEventDetail, OpsResend, OpsWebhookEndpoint } from '../../shared/ops-api'
import type { JobStatus } from '../../shared/statuses'
import { type OperatorOrigin, recordOperatorAction } from './operator-actions'

/**
 * The console's events and endpoints panels (docs/operations.md#events-and-endpoints): our events
 * (docs/events.md) with where each went, one event's every attempt, a resend, and each endpoint's
 * health. A delivery is read from two tables: the `webhook.deliver` jobs (dedupe key
 * `<eventId>:<endpointId>`, a resend's `<eventId>:<endpointId>:resend:<id>`) say what is still to
 * happen, the `webhook_attempts` rows what the endpoint answered.
 */

/** Attempts and jobs one event's detail lists per query: a bound, never reached by a 3-day schedule. */
const DETAIL_ROWS = 1000
const HEALTH_WINDOW_HOURS = 24

const eventOfJob = sql<string>`split_part(${jobs.dedupeKey}, ':', 1)`
const endpointOfJob = sql<string>`split_part(${jobs.dedupeKey}, ':', 2)`
const isResend = (dedupeKey: string) => dedupeKey.split(':')[2] === 'resend'
const deliveryKey = (eventId: string, endpointId: string) => `${eventId}:${endpointId}`

type EventRow = typeof events.$inferSelect

/** Per (event, endpoint): its jobs and attempts summed up, newest job's status first. */
async function deliveriesOf(db: Database, eventIds: string[]): Promise<Map<string, Array<OpsEventDelivery<Date>>>> {
  if (!eventIds.length) return new Map()
  const [jobRows, attemptRows] = await Promise.all([
    db.select({
      eventId: eventOfJob,
      endpointId: endpointOfJob,
      jobCount: count(),
      // A resend made in the same instant as the first job is the later one.
      jobStatus: sql<JobStatus>`(array_agg(${jobs.status} order by ${jobs.createdAt} desc, split_part(${jobs.dedupeKey}, ':', 3) = 'resend' desc))[1]`,
    }).from(jobs)
      .where(and(eq(jobs.kind, webhookDeliverJob.kind), inArray(eventOfJob, eventIds)))
      .groupBy(eventOfJob, endpointOfJob),
    db.select({
      eventId: webhookAttempts.eventId,
      endpointId: webhookAttempts.endpointId,
      attemptCount: count(),
      delivered: sql<boolean>`bool_or(${webhookAttempts.delivered})`,
      lastStatusCode: sql<number | null>`(array_agg(${webhookAttempts.statusCode} order by ${webhookAttempts.id} desc))[1]`,
      lastAttemptAt: sql<Date>`max(${webhookAttempts.createdAt})`.mapWith(webhookAttempts.createdAt),
    }).from(webhookAttempts)
      .where(inArray(webhookAttempts.eventId, eventIds))
      .groupBy(webhookAttempts.eventId, webhookAttempts.endpointId),
  ])
  const endpointIds = [...new Set([...jobRows, ...attemptRows].map(row => row.endpointId))]
  const urls = new Map(endpointIds.length
    ? (await db.select({ id: webhookEndpoints.id, url: webhookEndpoints.url }).from(webhookEndpoints).where(inArray(webhookEndpoints.id, endpointIds))).map(row => [row.id, row.url])
    : [])

  const summaries = new Map<string, OpsEventDelivery<Date> & { eventId: string }>()
  const summaryOf = (eventId: string, endpointId: string) => {
    const key = deliveryKey(eventId, endpointId)
    let summary = summaries.get(key)
    if (!summary) {
      summary = { eventId, endpointId, url: urls.get(endpointId) ?? null, jobStatus: null, jobCount: 0, attemptCount: 0, lastStatusCode: null, delivered: false, lastAttemptAt: null }
      summaries.set(key, summary)
    }
    return summary
  }
  for (const row of jobRows) Object.assign(summaryOf(row.eventId, row.endpointId), { jobStatus: row.jobStatus, jobCount: row.jobCount })
  for (const { eventId, endpointId, ...attempts } of attemptRows) Object.assign(summaryOf(eventId, endpointId), attempts)

  const byEvent = new Map<string, Array<OpsEventDelivery<Date>>>()
  for (const { eventId, ...summary } of [...summaries.values()].sort((a, b) => a.endpointId.localeCompare(b.endpointId))) {
    byEvent.set(eventId, [...(byEvent.get(eventId) ?? []), summary])
  }
  return byEvent
}

const eventFields = ({ id, tenantId, sequence, type, objectId, orderId, data, createdAt }: EventRow) => ({ id, tenantId, sequence, type, objectId, orderId, data, createdAt })

/** Newest first (by sequence: the order events become listable in), each with its deliveries. */
export async function listEvents(db: Database, filter: { tenant?: string, type?: EventRow['type'], orderId?: string, limit: number }): Promise<Array<OpsEvent<Date>>> {
  const conditions: Array<SQL | undefined> = [
    filter.tenant === undefined ? undefined : eq(events.tenantId, filter.tenant),
    filter.type === undefined ? undefined : eq(events.type, filter.type),
    filter.orderId === undefined ? undefined : eq(events.orderId, filter.orderId),
  ]
  const rows = await db.select().from(events).where(and(...conditions)).orderBy(desc(events.sequence), desc(events.id)).limit(filter.limit)
  const deliveries = await deliveriesOf(db, rows.map(row => row.id))
  return rows.map(row => ({ ...eventFields(row), deliveries: deliveries.get(row.id) ?? [] }))
}

/** The event and, per endpoint, its delivery jobs and every attempt, oldest first; 404 for an unknown id. */
export async function readEvent(db: Database, id: string): Promise<OpsEventDetail<Date>> {
  const [row] = await db.select().from(events).where(eq(events.id, id))
  if (!row) throw problem('not-found', `No event "${id}". List events with GET /api/ops/events.`)
  const [summaries, jobRows, attemptRows] = await Promise.all([
    deliveriesOf(db, [id]),
    db.select({ id: jobs.id, status: jobs.status, dedupeKey: jobs.dedupeKey, createdAt: jobs.createdAt, endpointId: endpointOfJob }).from(jobs)
      .where(and(eq(jobs.kind, webhookDeliverJob.kind), eq(eventOfJob, id)))
      .orderBy(asc(jobs.createdAt), asc(jobs.id)).limit(DETAIL_ROWS),
    db.select().from(webhookAttempts).where(eq(webhookAttempts.eventId, id)).orderBy(asc(webhookAttempts.id)).limit(DETAIL_ROWS),
  ])
  return {
    ...eventFields(row),
    deliveries: (summaries.get(id) ?? []).map(summary => ({
      ...summary,
      jobs: jobRows.filter(job => job.endpointId === summary.endpointId)
        .map(({ endpointId: _endpoint, ...job }) => ({ ...job, resend: isResend(job.dedupeKey) })),
      attempts: attemptRows.filter(attempt => attempt.endpointId === summary.endpointId)
        .map(({ id: attemptId, jobId, attempt, statusCode, delivered, error, latencyMs, responseExcerpt, createdAt }) => ({ id: attemptId, jobId, attempt, statusCode, delivered, error, latencyMs, responseExcerpt, createdAt })),
    })),
  }
}

const subscribes = (endpoint: { events: string[] }, type: string) => endpoint.events.includes(type) || endpoint.events.includes('*')

/**
 * Enqueues one new `webhook.deliver` job per endpoint, with the payload of the first (so every
 * attempt is sent under the event's id, `webhook-id`) and a fresh dedupe key; the jobs and the
 * `event.resent` operator action commit together. The endpoints: the one named, or every enabled
 * endpoint of the event's tenant subscribed to its type. 404 for an unknown event or an endpoint
 * of another tenant; 409 `event-not-resendable` when no endpoint qualifies.
 */
export function resendEvent(db: Database, origin: OperatorOrigin, eventId: string, endpointId: string | undefined): Promise<OpsResend> {
  // transaction() of @idempotent-checkout/db-kit: the workers are woken once the jobs are committed.
  return transaction(db, async (tx) => {
    const [event] = await tx.select({ id: events.id, tenantId: events.tenantId, type: events.type }).from(events).where(eq(events.id, eventId))
    if (!event) throw problem('not-found', `No event "${eventId}". List events with GET /api/ops/events.`)
    const candidates = await tx.select({ id: webhookEndpoints.id, status: webhookEndpoints.status, disabledReason: webhookEndpoints.disabledReason, events: webhookEndpoints.events })
      .from(webhookEndpoints)
      .where(and(eq(webhookEndpoints.tenantId, event.tenantId), endpointId === undefined ? undefined : eq(webhookEndpoints.id, endpointId)))
      .orderBy(asc(webhookEndpoints.id))
    if (endpointId !== undefined && !candidates.length) {
      throw problem('not-found', `Tenant ${event.tenantId} has no webhook endpoint "${endpointId}". List its endpoints with GET /api/ops/webhook-endpoints?tenant=${encodeURIComponent(event.tenantId)}.`)
    }
    const targets = candidates.filter(endpoint => endpoint.status === 'enabled' && subscribes(endpoint, event.type))
    if (!targets.length) {
      const named = candidates[0]
      throw problem('event-not-resendable', endpointId !== undefined && named
        ? `Endpoint ${endpointId} ${named.status === 'enabled' ? `is not subscribed to ${event.type}` : `is disabled (${named.disabledReason ?? 'no reason recorded'})`}: nothing was sent. The tenant enables it or subscribes it, then resend.`
        : `No enabled endpoint of tenant ${event.tenantId} is subscribed to ${event.type}: nothing was sent.`)
    }
    const resent: OpsResend['jobs'] = []
    for (const target of targets) {
      const jobId = await enqueueJob(tx, webhookDeliverJob, { eventId, endpointId: target.id }, {
        dedupeKey: `${deliveryKey(eventId, target.id)}:resend:${newId('rs')}`,
        requestId: origin.requestId ?? undefined,
      })
      // A fresh dedupe key never conflicts: the job is always new.
      resent.push({ endpointId: target.id, jobId: jobId! })
    }
    await recordOperatorAction(tx, origin, {
      action: 'event.resent',
      tenantId: event.tenantId,
      subjectId: event.id,
      detail: { type: event.type, endpointIds: resent.map(job => job.endpointId), jobIds: resent.map(job => job.jobId) },
    })
    return { eventId, jobs: resent }
  })
}

/** Endpoints of every tenant (or one), newest first, each with its attempts of the last 24 hours summed up; never a secret. */
export async function listWebhookEndpoints(db: Database, filter: { tenant?: string, limit: number }): Promise<Array<OpsWebhookEndpoint<Date>>> {
  const rows = await db.select({
    id: webhookEndpoints.id,
    tenantId: webhookEndpoints.tenantId,
    url: webhookEndpoints.url,
    events: webhookEndpoints.events,
    description: webhookEndpoints.description,
    status: webhookEndpoints.status,
    disabledReason: webhookEndpoints.disabledReason,
    failingSince: webhookEndpoints.failingSince,
    lastSuccessAt: webhookEndpoints.lastSuccessAt,
    lastFailureAt: webhookEndpoints.lastFailureAt,
    createdAt: webhookEndpoints.createdAt,
  }).from(webhookEndpoints)
    .where(filter.tenant === undefined ? undefined : eq(webhookEndpoints.tenantId, filter.tenant))
    .orderBy(desc(webhookEndpoints.createdAt), desc(webhookEndpoints.id))
    .limit(filter.limit)
  const health = new Map(rows.length
    ? (await db.select({
        endpointId: webhookAttempts.endpointId,
        attempts: count(),
        delivered: sql<number>`count(*) filter (where ${webhookAttempts.delivered})::int`.mapWith(Number),
        // An attempt's own latency, not an interpolation between two.
        p50LatencyMs: sql<number>`percentile_disc(0.5) within group (order by ${webhookAttempts.latencyMs})`.mapWith(Number),
      }).from(webhookAttempts)
        .where(and(
          inArray(webhookAttempts.endpointId, rows.map(row => row.id)),
          gte(webhookAttempts.createdAt, sql`now() - make_interval(hours => ${HEALTH_WINDOW_HOURS}::int)`),
        ))
        .groupBy(webhookAttempts.endpointId)).map(({ endpointId, ...recent }) => [endpointId, recent])
    : [])
  return rows.map((row) => {
    const recent = health.get(row.id)
    return {
      ...row,
      last24h: recent
        ? { attempts: recent.attempts, delivered: recent.delivered, successRate: recent.delivered / recent.attempts, p50LatencyMs: recent.p50LatencyMs }
        : { attempts: 0, delivered: 0, successRate: null, p50LatencyMs: null },
    }
  })
}
