import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { newId } from '../../server/db/ids'
import { type AppProcess, fastJobsEnv, startApp, stopAll, testSecrets } from '../support/app'
import { createTenant, request } from '../support/http'
import { untilRequestInFlight } from '../support/in-flight'
import { enqueueJobs, type JobsFixture, openJobsFixture, orderJob } from '../support/jobs'
import { opsRequest } from '../support/ops'
import { expectProblem, newIdempotencyKey, postOrder, type TenantCredentials, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { createTestDatabase, describeWithServices, redisUrl } from '../support/services'
import { deliver, newWebhookId, standardBody, standardDelivery } from '../support/webhooks'

// docs/operations.md#metrics: GET /api/metrics as Prometheus scrapes it from the built server
// (Postgres, Redis, the in-app worker). Each scenario scrapes before and after and asserts the
// exact change of every series in the families it can touch: what it should count, counted once,
// and nothing else.

/** What the idempotency layer, the webhook receiver and the database fence count. */
const requestFamilies = [
  'idempotency_outcomes_total',
  'idempotency_replays_total',
  'idempotency_fingerprint_conflicts_total',
  'idempotency_lease_takeovers_total',
  'idempotency_lease_lost_total',
  'webhook_deliveries_total',
  'unique_constraint_violations_total',
]

/** What the worker counts; histograms by their `_count` (one observation per event, exact). */
const jobFamilies = [
  'jobs_total',
  'job_errors_total',
  'jobs_dead_lettered_total',
  'jobs_rescued_total',
  'job_queue_wait_seconds_count',
  'job_processing_seconds_count',
  'lock_acquire_total',
  'lock_wait_seconds_count',
  'lock_release_total',
  'locks_lost_total',
]

/** Every family the issue asks for, present (HELP and TYPE) from the first scrape on. */
const declaredFamilies: Array<[name: string, type: 'counter' | 'histogram' | 'gauge']> = [
  ['idempotency_outcomes_total', 'counter'],
  ['idempotency_replays_total', 'counter'],
  ['idempotency_fingerprint_conflicts_total', 'counter'],
  ['idempotency_lease_takeovers_total', 'counter'],
  ['idempotency_lease_lost_total', 'counter'],
  ['jobs_total', 'counter'],
  ['job_errors_total', 'counter'],
  ['jobs_dead_lettered_total', 'counter'],
  ['jobs_rescued_total', 'counter'],
  ['job_queue_wait_seconds', 'histogram'],
  ['job_processing_seconds', 'histogram'],
  ['lock_acquire_total', 'counter'],
  ['lock_wait_seconds', 'histogram'],
  ['lock_release_total', 'counter'],
  ['locks_lost_total', 'counter'],
  ['webhook_deliveries_total', 'counter'],
  ['unique_constraint_violations_total', 'counter'],
  ['http_request_duration_seconds', 'histogram'],
  ['process_cpu_seconds_total', 'counter'],
  ['process_resident_memory_bytes', 'gauge'],
  ['nodejs_eventloop_lag_seconds', 'gauge'],
  ['nodejs_heap_size_used_bytes', 'gauge'],
]

/** Series of one scrape: `name{label="value",…}` (labels sorted by name) → value. */
type Samples = Map<string, number>

const SAMPLE_LINE = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)(?: \d+)?$/
const LABEL_PAIR = /(\w+)="((?:[^"\\]|\\.)*)"/g

function parseSamples(text: string): Samples {
  const samples: Samples = new Map()
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const match = SAMPLE_LINE.exec(line)
    if (!match) throw new Error(`not a Prometheus sample line: ${line}`)
    const [, name, labelText = '', value] = match
    const labels = [...labelText.matchAll(LABEL_PAIR)].map(([pair]) => pair).sort()
    samples.set(labels.length ? `${name}{${labels.join(',')}}` : name!, Number(value))
  }
  return samples
}

/** The series of `families` whose value changed between two scrapes, with the change. */
function changes(before: Samples, after: Samples, families: string[]): Record<string, number> {
  const changed: Record<string, number> = {}
  for (const [series, value] of after) {
    const family = series.split('{')[0]!
    if (!families.includes(family)) continue
    const delta = value - (before.get(series) ?? 0)
    if (delta !== 0) changed[series] = delta
  }
  return changed
}

describeWithServices('GET /api/metrics', ['postgres', 'redis'], () => {
  let app: AppProcess
  let fixture: JobsFixture
  let tenant: TenantCredentials
  let dropDatabase: (() => Promise<void>) | undefined

  beforeAll(async () => {
    const database = await createTestDatabase('metrics')
    dropDatabase = database.drop
    app = await startApp({ databaseUrl: database.url, redisUrl, label: 'metrics', env: fastJobsEnv })
    fixture = await openJobsFixture(database.url)
    tenant = await createTenant(app.url, 'metrics tenant')
  })

  afterAll(async () => {
    await stopAll()
    await fixture?.close()
    await dropDatabase?.()
  })

  async function scrapeText(): Promise<string> {
    const response = await opsRequest(app.url, '/api/metrics')
    expect(response.status, response.text).toBe(200)
    return response.text
  }

  const scrape = async () => parseSamples(await scrapeText())

  const post = (key: string | undefined, body: unknown, headers: Record<string, string> = {}) =>
    postOrder(app.url, { secretKey: tenant.secretKey, key, body, headers, timeoutMs: 20_000 })

  /** No job is waiting, running or due for a retry. */
  const jobsSettled = () => pollUntil('every job is completed or dead-lettered', async () => {
    const [row] = await fixture.sql<Array<{ count: number }>>`select count(*)::int as count from jobs where status not in ('completed', 'dead_letter')`
    return row!.count === 0
  }, { timeoutMs: 20_000, intervalMs: 100 })

  /**
   * Jobs settled and their counts landed: an attempt is counted just after its commit (once its
   * lock is given back), so two scrapes in a row must agree on every worker series.
   */
  async function workerAtRest(): Promise<Samples> {
    await jobsSettled()
    let previous = await scrape()
    let current = previous
    await pollUntil('the worker\'s counters are at rest', async () => {
      previous = current
      current = await scrape()
      return Object.keys(changes(previous, current, jobFamilies)).length === 0
    }, { timeoutMs: 20_000, intervalMs: 100 })
    return current
  }

  /** Scrapes until `series` has changed by `delta` since `before` (worker and request-log counts land after the response). */
  async function scrapeOnce(before: Samples, series: string, delta: number): Promise<Samples> {
    let after: Samples = new Map()
    await pollUntil(`${series} changed by ${delta}`, async () => {
      after = await scrape()
      return (after.get(series) ?? 0) - (before.get(series) ?? 0) >= delta
    }, { timeoutMs: 20_000, intervalMs: 100 })
    return after
  }

  describe('the endpoint', () => {
    it('answers 401 problems without the operator token, and Prometheus text with it', async () => {
      expectProblem(await request(app.url, '/api/metrics'), 'unauthorized')
      expectProblem(await request(app.url, '/api/metrics', { headers: { authorization: `Bearer ${tenant.secretKey}` } }), 'unauthorized')
      expectProblem(await request(app.url, '/api/metrics', { headers: { authorization: testSecrets.opsToken } }), 'unauthorized')

      const response = await opsRequest(app.url, '/api/metrics')
      expect(response.status).toBe(200)
      expect(response.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8')
      expect(response.headers.get('cache-control')).toBe('no-store')
      for (const [name, type] of declaredFamilies) {
        expect(response.text, name).toMatch(new RegExp(`^# HELP ${name} \\S.*$`, 'm'))
        expect(response.text, name).toContain(`\n# TYPE ${name} ${type}\n`)
      }
      // Every line parses as a sample or a comment.
      expect(parseSamples(response.text).get('process_cpu_seconds_total')).toBeGreaterThan(0)
    })
  })

  describe('idempotency outcomes, by route', () => {
    it('a first request and its replay: one miss, one replay, and the order\'s job claimed, locked and released once', async () => {
      const key = newIdempotencyKey()
      const body = validOrderBody()
      const before = await workerAtRest()

      const first = await post(key, body)
      expect(first.status, first.text).toBe(201)
      const replay = await post(key, body)
      expect(replay.status, replay.text).toBe(201)
      expect(replay.headers.get('idempotent-replayed')).toBe('true')

      // Both requests are in the HTTP histogram once the request log ran, under the route pattern.
      const httpSeries = 'http_request_duration_seconds_count{method="POST",route="/api/orders",status="201"}'
      await scrapeOnce(before, httpSeries, 2)
      const after = await workerAtRest()

      expect(changes(before, after, requestFamilies)).toEqual({
        'idempotency_outcomes_total{outcome="miss",route="POST /api/orders"}': 1,
        'idempotency_outcomes_total{outcome="replay",route="POST /api/orders"}': 1,
        'idempotency_replays_total{route="POST /api/orders"}': 1,
      })
      expect(changes(before, after, ['http_request_duration_seconds_count'])[httpSeries]).toBe(2)
      expect(changes(before, after, jobFamilies)).toEqual({
        'jobs_total{kind="payment.create_intent",result="completed"}': 1,
        'job_queue_wait_seconds_count{kind="payment.create_intent"}': 1,
        'job_processing_seconds_count{kind="payment.create_intent",result="completed"}': 1,
        'lock_acquire_total{result="acquired"}': 1,
        'lock_wait_seconds_count{result="acquired"}': 1,
        'lock_release_total{result="released"}': 1,
      })
      // Labels never carry ids or keys.
      const text = await scrapeText()
      for (const unbounded of [key, first.json.id, tenant.tenantId, body.cartId]) expect(text).not.toContain(unbounded)
    })

    it('a key reused with another body: one conflict, nothing executed', async () => {
      const key = newIdempotencyKey()
      expect((await post(key, validOrderBody())).status).toBe(201)
      const before = await scrape()

      expectProblem(await post(key, validOrderBody()), 'idempotency-key-reused')

      expect(changes(before, await scrape(), requestFamilies)).toEqual({
        'idempotency_outcomes_total{outcome="conflict",route="POST /api/orders"}': 1,
        'idempotency_fingerprint_conflicts_total{route="POST /api/orders"}': 1,
      })
    })

    it('a duplicate while the first is in flight: one in_progress, then the first\'s miss', async () => {
      const key = newIdempotencyKey()
      const body = validOrderBody()
      const before = await scrape()

      const first = post(key, body, { 'x-fault': 'delay-before-commit=3000' })
      await untilRequestInFlight(fixture.sql, { app, scope: `tenant:${tenant.tenantId}`, key })
      expectProblem(await post(key, body), 'request-in-progress')
      expect((await first).status).toBe(201)

      expect(changes(before, await scrape(), requestFamilies)).toEqual({
        'idempotency_outcomes_total{outcome="in_progress",route="POST /api/orders"}': 1,
        'idempotency_outcomes_total{outcome="miss",route="POST /api/orders"}': 1,
      })
    })

    it('a missing and a malformed key: one missing_key, one invalid', async () => {
      const before = await scrape()
      expectProblem(await post(undefined, validOrderBody()), 'idempotency-key-missing')
      expectProblem(await post('has space', validOrderBody()), 'idempotency-key-invalid')

      expect(changes(before, await scrape(), requestFamilies)).toEqual({
        'idempotency_outcomes_total{outcome="missing_key",route="POST /api/orders"}': 1,
        'idempotency_outcomes_total{outcome="invalid",route="POST /api/orders"}': 1,
      })
    })

    it('another key for an ordered cart: the unique constraint fires once and the 409 is a stored miss', async () => {
      const body = validOrderBody()
      expect((await post(newIdempotencyKey(), body)).status).toBe(201)
      const before = await scrape()

      const second = await post(newIdempotencyKey(), body)
      expectProblem(second, 'cart-already-ordered')

      expect(changes(before, await scrape(), requestFamilies)).toEqual({
        'idempotency_outcomes_total{outcome="miss",route="POST /api/orders"}': 1,
        'unique_constraint_violations_total{constraint="orders_tenant_cart_unique"}': 1,
      })
    })
  })

  describe('webhooks, by provider', () => {
    it('a delivery, its duplicate and a forgery: accepted, duplicate, signature_invalid', async () => {
      const order = await post(newIdempotencyKey(), validOrderBody())
      expect(order.status).toBe(201)
      const data = { orderId: order.json.id, paymentId: `pay_${randomUUID()}`, amount: order.json.amount, currency: order.json.currency }
      const webhookId = newWebhookId()
      const payload = standardBody('payment.succeeded', data)
      const before = await scrape()

      const accepted = await deliver(app.url, standardDelivery(webhookId, payload))
      expect(accepted.status, accepted.text).toBe(200)
      expect(accepted.json.idempotency.replayed).toBe(false)
      const duplicate = await deliver(app.url, standardDelivery(webhookId, payload))
      expect(duplicate.status, duplicate.text).toBe(200)
      expect(duplicate.json.idempotency.replayed).toBe(true)
      const forged = await deliver(app.url, standardDelivery(newWebhookId(), payload, { secret: `whsec_${Buffer.alloc(32, 7).toString('base64')}` }))
      expectProblem(forged, 'webhook-signature-invalid')

      // The forgery never reached the idempotency layer: no outcome for it.
      expect(changes(before, await scrape(), requestFamilies)).toEqual({
        'webhook_deliveries_total{provider="standard",result="accepted"}': 1,
        'webhook_deliveries_total{provider="standard",result="duplicate"}': 1,
        'webhook_deliveries_total{provider="standard",result="signature_invalid"}': 1,
        'idempotency_outcomes_total{outcome="miss",route="POST /api/webhooks/standard"}': 1,
        'idempotency_outcomes_total{outcome="replay",route="POST /api/webhooks/standard"}': 1,
        'idempotency_replays_total{route="POST /api/webhooks/standard"}': 1,
      })
    })
  })

  describe('the worker', () => {
    it('a poison job: one permanent error, one dead letter, and no lock taken for it', async () => {
      const before = await workerAtRest()

      const [jobId] = await enqueueJobs(fixture.db, [orderJob(newId('ord'), { faults: { failPermanently: true } })])
      await pollUntil(`job ${jobId} is dead-lettered`, async () => {
        const [row] = await fixture.sql<Array<{ status: string }>>`select status from jobs where id = ${jobId!}`
        return row?.status === 'dead_letter'
      }, { timeoutMs: 20_000, intervalMs: 100 })
      const after = await scrapeOnce(before, 'jobs_dead_lettered_total{kind="order.send_confirmation"}', 1)

      expect(changes(before, after, jobFamilies)).toEqual({
        'jobs_total{kind="order.send_confirmation",result="dead_letter"}': 1,
        'job_errors_total{error_class="permanent",kind="order.send_confirmation"}': 1,
        'jobs_dead_lettered_total{kind="order.send_confirmation"}': 1,
        'job_queue_wait_seconds_count{kind="order.send_confirmation"}': 1,
        'job_processing_seconds_count{kind="order.send_confirmation",result="dead_letter"}': 1,
      })
      expect(changes(before, after, requestFamilies)).toEqual({})
    })
  })
})
