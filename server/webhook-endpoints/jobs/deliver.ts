import { eq } from 'drizzle-orm'
import { type BoundStatement, queryPrepared } from '@idempotent-checkout/db-kit'
import { signStandardWebhook } from 'nuxt-idempotency/core'
import { events, webhookEndpoints } from '../../db/schema'
import { serializeEvent } from '../../events/serialize'
import { PermanentJobError, RetryableJobError } from '../../jobs/errors'
import { defineJobKind } from '../../jobs/kind'
import type { JobEffect } from '../../jobs/store'
import { escapeText, log } from '../../observability/logger'
import { metrics } from '../../observability/metrics'
import { webhookDeliverJob } from '../job-types'
import { retryDelayMs } from '../retry-schedule'
import { postWebhook, type WebhookAnswer } from '../send'
import type { WebhookEndpointRow } from '../service'

export interface WebhookDeliverySettings {
  /** WEBHOOK_ENDPOINTS_ALLOW_PRIVATE */
  allowPrivate: boolean
  /** WEBHOOK_RETRY_SCHEDULE: the wait after failed attempt n is the nth; after the last, the delivery gives up. */
  retryScheduleMs: number[]
  /** WEBHOOK_ENDPOINT_DISABLE_AFTER_DAYS */
  disableAfterDays: number
  /** WEBHOOK_DELIVERY_TIMEOUT_MS */
  timeoutMs: number
}

export const WEBHOOK_USER_AGENT = 'IdempotentCheckout-Webhooks/1'

/** One attempt as webhook_attempts keeps it. */
interface AttemptRecord {
  eventId: string
  endpointId: string
  tenantId: string
  orderId: string | null
  jobId: string
  attempt: number
  answer: WebhookAnswer
  delivered: boolean
}

// $1…$11 of every statement below that records an attempt; its endpoint is $2.
const insertAttempt = 'insert into webhook_attempts (event_id, endpoint_id, tenant_id, order_id, job_id, attempt, status_code, delivered, error, latency_ms, response_excerpt) '
const attemptValues = '$1::text, $2::text, $3::text, $4::text, $5::text, $6::int, $7::int, $8::boolean, $9::text, $10::int, $11::text'
const attemptParams = (record: AttemptRecord) => [
  record.eventId, record.endpointId, record.tenantId, record.orderId, record.jobId, record.attempt,
  record.answer.statusCode ?? null, record.delivered, record.answer.error ?? null, record.answer.latencyMs,
  record.answer.responseExcerpt === undefined ? null : escapeText(record.answer.responseExcerpt),
]

/** With the completion: the attempt, and the endpoint's health after it (CTEs reading `done`, see JobEffect). */
const deliveredEffect = (record: AttemptRecord): JobEffect => ({
  text: `attempt as (${insertAttempt}select ${attemptValues} from done), `
    + 'endpoint as (update webhook_endpoints set last_success_at = now(), failing_since = null where id = $2::text and exists (select 1 from done))',
  params: attemptParams(record),
})

/** 410 Gone: the attempt, and the endpoint disabled. */
const goneEffect = (record: AttemptRecord): JobEffect => ({
  text: `attempt as (${insertAttempt}select ${attemptValues} from done), `
    + 'endpoint as (update webhook_endpoints set status = \'disabled\', disabled_reason = \'gone\', last_failure_at = now(), '
    + 'failing_since = coalesce(failing_since, now()), updated_at = now() where id = $2::text and exists (select 1 from done))',
  params: attemptParams(record),
})

/** Failing for too long: disabled (its last attempt is already recorded). */
const disableFailingEffect = (endpointId: string): JobEffect => ({
  text: 'endpoint as (update webhook_endpoints set status = \'disabled\', disabled_reason = \'failing\', updated_at = now() where id = $1::text and exists (select 1 from done))',
  params: [endpointId],
})

/**
 * A failed attempt and the endpoint's failure streak, in one statement (not with a completion: the
 * job is retried). Answers whether the streak has lasted `disableAfterDays`.
 */
async function recordFailure(db: Parameters<typeof queryPrepared>[0], record: AttemptRecord, disableAfterDays: number): Promise<{ expired: boolean }> {
  const statement: BoundStatement = {
    text: `with attempt as (${insertAttempt}values (${attemptValues})), `
      + 'endpoint as (update webhook_endpoints set failing_since = coalesce(failing_since, now()), last_failure_at = now() where id = $2::text '
      + 'returning failing_since <= now() - $12::int * interval \'1 day\' as expired) select expired from endpoint',
    params: [...attemptParams(record), disableAfterDays],
  }
  const [row] = await queryPrepared(db, statement)
  return { expired: row?.expired === true }
}

/** The signatures of one delivery: the current secret's, and the previous one's while it still signs. */
function signatures(endpoint: WebhookEndpointRow, id: string, timestamp: number, body: string): string {
  const secrets = [endpoint.secret]
  if (endpoint.previousSecret && endpoint.previousSecretExpiresAt && endpoint.previousSecretExpiresAt.getTime() > Date.now()) secrets.push(endpoint.previousSecret)
  return secrets.map(secret => signStandardWebhook(secret, id, timestamp, body)).join(' ')
}

function attemptResult(answer: WebhookAnswer): string {
  if (answer.statusCode === undefined) {
    if (answer.error?.startsWith('timeout')) return 'timeout'
    return answer.error?.startsWith('address refused') ? 'address_refused' : 'connection_error'
  }
  if (answer.statusCode >= 200 && answer.statusCode < 300) return 'delivered'
  return answer.statusCode === 410 ? 'gone' : 'rejected'
}

/**
 * Delivers one event to one endpoint (docs/events.md#delivery): the event as GET /api/events lists
 * it, under its id as `webhook-id` on every attempt, signed per attempt. 2xx is delivered; 410
 * disables the endpoint; anything else is retried on WEBHOOK_RETRY_SCHEDULE until it is spent (then
 * a dead letter an operator can redrive), unless the endpoint has failed for
 * WEBHOOK_ENDPOINT_DISABLE_AFTER_DAYS, which disables it. Every attempt is recorded.
 */
export function webhookDeliver(settings: WebhookDeliverySettings) {
  return defineJobKind({
    ...webhookDeliverJob,
    async run({ db, job, signal, complete }, { eventId, endpointId }) {
      const [endpoint] = await db.select().from(webhookEndpoints).where(eq(webhookEndpoints.id, endpointId))
      // Deleted or disabled since the event: nothing to send, nothing to record.
      if (!endpoint || endpoint.status !== 'enabled') return complete()
      const [event] = await db.select().from(events).where(eq(events.id, eventId))
      if (!event || event.tenantId !== endpoint.tenantId) throw new PermanentJobError(`event ${eventId} not found for the tenant of endpoint ${endpointId}`)

      const body = JSON.stringify(serializeEvent(event))
      const timestamp = Math.floor(Date.now() / 1000)
      const answer = await postWebhook({
        url: endpoint.url,
        headers: {
          'content-type': 'application/json',
          'user-agent': WEBHOOK_USER_AGENT,
          'webhook-id': event.id,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': signatures(endpoint, event.id, timestamp, body),
        },
        body,
        timeoutMs: settings.timeoutMs,
        allowPrivate: settings.allowPrivate,
        signal,
      })
      // Stopped by the worker (shutdown, claim lost): not the endpoint's failure; the job runs again.
      signal.throwIfAborted()

      const result = attemptResult(answer)
      metrics.webhookEndpointAttempts.inc({ result })
      const record: AttemptRecord = { eventId, endpointId, tenantId: endpoint.tenantId, orderId: event.orderId, jobId: job.id, attempt: job.attempt, answer, delivered: result === 'delivered' }
      if (result === 'delivered') return complete(deliveredEffect(record))
      if (result === 'gone') {
        log.warn('webhook endpoint answered 410 Gone: disabled', { endpointId, tenantId: endpoint.tenantId, eventId })
        return complete(goneEffect(record))
      }

      const failure = answer.statusCode === undefined ? answer.error! : `answered ${answer.statusCode}`
      const { expired } = await recordFailure(db, record, settings.disableAfterDays)
      if (expired) {
        log.error('webhook endpoint disabled: every delivery has failed for WEBHOOK_ENDPOINT_DISABLE_AFTER_DAYS', {
          alert: 'webhook_endpoint_disabled', endpointId, tenantId: endpoint.tenantId, days: settings.disableAfterDays, eventId, lastFailure: failure,
        })
        return complete(disableFailingEffect(endpointId))
      }
      const retryInMs = retryDelayMs(settings.retryScheduleMs, job.attempt)
      if (retryInMs === undefined) {
        throw new PermanentJobError(`webhook endpoint ${endpointId} ${failure}; gave up after ${job.attempt} attempts (WEBHOOK_RETRY_SCHEDULE is spent): redrive to try again`)
      }
      throw new RetryableJobError(`webhook endpoint ${endpointId} ${failure}`, { retryInMs })
    },
  })
}
