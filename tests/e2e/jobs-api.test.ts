import { randomUUID } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { newId } from '../../server/db/ids'
import { type AppProcess, fastJobsEnv, startApp, stopAll } from '../support/app'
import { startStack } from '../support/cluster'
import { createTenant, request, type TestResponse } from '../support/http'
import { effectsPerOrder, enqueueJobs, jobRow, type JobsFixture, openJobsFixture, orderJob, seedOrderWithId, seedOrders } from '../support/jobs'
import { opsHeaders, opsRequest } from '../support/ops'
import { expectProblem, postOrder, requestIdPattern, type TenantCredentials, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { describeWithServices, redisUrl } from '../support/services'
import type { Evidence, OpsJob } from '../../shared/ops-api'

// The worker as it ships: inside the built app (WORKER_ENABLED=true), driven and inspected over
// HTTP — orders enqueue through the outbox, operators list, redrive and run maintenance through
// /api/ops. Row reads on Postgres check what the answers claim; on PGlite the app holds the
// database, so there the ops API is the only window.

interface JobsStack {
  /** One built app per entry of `workers`, each with its in-app worker. */
  apps: AppProcess[]
  fixture: JobsFixture
  close: () => Promise<void>
}

/**
 * A fresh database, the built app with its in-app worker (one process per worker id, sharing one
 * Redis prefix so they contend for the same order locks), and a fixture on the same database.
 */
async function startJobsStack(label: string, workerIds: string[], env: Record<string, string> = {}): Promise<JobsStack> {
  const stack = await startStack({
    label,
    redisUrl,
    env: { ...fastJobsEnv, ...env },
    instances: workerIds.map(workerId => ({ name: workerId, env: { WORKER_ID: workerId } })),
  })
  const fixture = await openJobsFixture(stack.databaseUrl)
  return {
    apps: stack.instances,
    fixture,
    async close() {
      await fixture.close()
      await stack.close()
    },
  }
}

const opsPost = (baseUrl: string, path: string, headers: Record<string, string> = opsHeaders) =>
  request(baseUrl, path, { method: 'POST', headers })

async function listJobs(baseUrl: string, query: Record<string, string>): Promise<OpsJob[]> {
  const listed = await opsRequest(baseUrl, `/api/ops/jobs?${new URLSearchParams(query)}`)
  expect(listed.status, listed.text).toBe(200)
  expect(listed.json.object).toBe('list')
  return listed.json.data
}

/**
 * The order's only job, once completed at its first attempt: the payment.create_intent its creation
 * enqueued, carrying the request's idempotency key and request id.
 */
async function expectOneCompletedIntentJob(baseUrl: string, orderId: string, origin: { key: string, requestId: string | null, lockedBy?: string }): Promise<OpsJob> {
  const [job, ...others] = await jobsOfOrderOnce(baseUrl, orderId, 'completed')
  expect(others).toEqual([])
  expect(job).toMatchObject({
    kind: 'payment.create_intent',
    status: 'completed',
    resourceId: `order:${orderId}`,
    idempotencyKey: origin.key,
    requestId: origin.requestId,
    attempt: 1,
    ...(origin.lockedBy ? { lockedBy: origin.lockedBy } : {}),
    lastError: null,
    errors: [],
  })
  return job!
}

/** The jobs of one order once every one of them has reached `status`, as the ops API lists them. */
async function jobsOfOrderOnce(baseUrl: string, orderId: string, status: string): Promise<OpsJob[]> {
  let jobs: OpsJob[] = []
  await pollUntil(`the jobs of order ${orderId} are ${status}`, async () => {
    jobs = await listJobs(baseUrl, { resourceId: `order:${orderId}` })
    return jobs.length > 0 && jobs.every(job => job.status === status)
  }, { timeoutMs: 20_000, intervalMs: 100 })
  return jobs
}

async function jobStatusOnce(sql: postgres.Sql, jobId: string, status: string): Promise<void> {
  await pollUntil(`job ${jobId} is ${status}`, async () => (await jobRow(sql, jobId))?.status === status, { timeoutMs: 20_000, intervalMs: 100 })
}

const createdOrderId = (response: TestResponse): string => {
  expect(response.status, response.text).toBe(201)
  expect(response.json.id).toMatch(/^ord_/)
  return response.json.id
}

describeWithServices('jobs over HTTP: the in-app worker on Postgres and Redis', ['postgres', 'redis'], () => {
  const workerId = `jobs-api-${process.pid}`
  let stack: JobsStack | undefined
  let fixture: JobsFixture | undefined
  let app: AppProcess
  let tenant: TenantCredentials

  beforeAll(async () => {
    stack = await startJobsStack('jobs_api', [workerId], { JOB_HEARTBEAT_TIMEOUT_MS: '1000', JOB_RETENTION_DAYS: '1' })
    fixture = stack.fixture
    app = stack.apps[0]!
    tenant = await createTenant(app.url, 'jobs api')
  })

  afterAll(async () => {
    await stack?.close()
  })

  const sql = () => fixture!.sql

  async function jobsOfResource(resourceId: string) {
    return sql()<Array<{ id: string, kind: string, status: string }>>`
      select id, kind, status from jobs where resource_id = ${resourceId} order by id`
  }

  async function countJobs(): Promise<number> {
    const [row] = await sql()<Array<{ count: number }>>`select count(*)::int as count from jobs`
    return row!.count
  }

  async function ordersForCart(cartId: string) {
    return sql()<Array<{ id: string }>>`select id from orders where tenant_id = ${tenant.tenantId} and cart_id = ${cartId}`
  }

  it('an order enqueues one payment.create_intent job that completes once; a replay or another key for the cart adds none', async () => {
    const key = `jobs-api-${randomUUID()}`
    const body = validOrderBody()
    const created = await postOrder(app.url, { secretKey: tenant.secretKey, key, body })
    const orderId = createdOrderId(created)
    const requestId = created.headers.get('x-request-id')
    expect(requestId).toMatch(requestIdPattern)

    const job = await expectOneCompletedIntentJob(app.url, orderId, { key, requestId, lockedBy: workerId })

    const [order] = await sql()<Array<{ paymentIntentId: string | null }>>`select payment_intent_id as "paymentIntentId" from orders where id = ${orderId}`
    expect(order!.paymentIntentId).toMatch(/^pi_/)
    const intentsOfOrder = () => sql()<Array<{ id: string, requests: number }>>`select id, requests from payment_intents where order_id = ${orderId}`
    expect(await intentsOfOrder()).toEqual([{ id: order!.paymentIntentId, requests: 1 }])

    const replayed = await postOrder(app.url, { secretKey: tenant.secretKey, key, body })
    expect(replayed.status, replayed.text).toBe(201)
    expect(replayed.headers.get('idempotent-replayed')).toBe('true')
    expect(replayed.json).toMatchObject({ id: orderId, idempotency: { key, replayed: true } })

    const otherKey = await postOrder(app.url, { secretKey: tenant.secretKey, key: `jobs-api-${randomUUID()}`, body })
    expectProblem(otherKey, 'cart-already-ordered')
    expect(otherKey.json.orderId).toBe(orderId)

    // Neither enqueued anything, and the provider was asked exactly once.
    expect(await jobsOfResource(`order:${orderId}`)).toEqual([{ id: job!.id, kind: 'payment.create_intent', status: 'completed' }])
    expect(await listJobs(app.url, { resourceId: `order:${orderId}` })).toEqual([job])
    expect(await intentsOfOrder()).toEqual([{ id: order!.paymentIntentId, requests: 1 }])
  })

  it('enqueues atomically with the order: a failure before commit or a rejected body leaves no job', async () => {
    const jobsBefore = await countJobs()
    const key = `jobs-api-${randomUUID()}`
    const body = validOrderBody()

    const failed = await postOrder(app.url, { secretKey: tenant.secretKey, key, body, headers: { 'x-fault': 'fail-before-commit' } })
    expectProblem(failed, 'internal-error')
    expect(await ordersForCart(body.cartId)).toEqual([])
    const failedRequestId = failed.headers.get('x-request-id')!
    expect(await sql()`select id from jobs where idempotency_key = ${key} or request_id = ${failedRequestId}`).toEqual([])
    expect(await countJobs()).toBe(jobsBefore)

    const invalidKey = `jobs-api-${randomUUID()}`
    const invalidBody = validOrderBody({ amount: 1 })
    const invalid = await postOrder(app.url, { secretKey: tenant.secretKey, key: invalidKey, body: invalidBody })
    expectProblem(invalid, 'validation-failed')
    expect(await ordersForCart(invalidBody.cartId)).toEqual([])
    expect(await sql()`select id from jobs where idempotency_key = ${invalidKey}`).toEqual([])
    expect(await countJobs()).toBe(jobsBefore)

    // The failed attempt released its key: the retry commits the order and its job together.
    const retried = await postOrder(app.url, { secretKey: tenant.secretKey, key, body })
    const orderId = createdOrderId(retried)
    expect(retried.json.idempotency).toEqual({ key, replayed: false })
    const [job, ...others] = await jobsOfOrderOnce(app.url, orderId, 'completed')
    expect(others).toEqual([])
    expect(job).toMatchObject({ kind: 'payment.create_intent', idempotencyKey: key, requestId: retried.headers.get('x-request-id'), attempt: 1 })
    expect(await countJobs()).toBe(jobsBefore + 1)
  })

  it('a poison job dead-letters after its attempts; once its order exists, a redrive through the API completes it', async () => {
    const orderId = newId('ord')
    const [jobId] = await enqueueJobs(fixture!.db, [orderJob(orderId, { maxAttempts: 3 })])
    const notFound = `RetryableJobError: order ${orderId} not found`

    let deadLetter: OpsJob | undefined
    await pollUntil(`job ${jobId} is listed as a dead letter`, async () => {
      deadLetter = (await listJobs(app.url, { status: 'dead_letter' })).find(job => job.id === jobId)
      return deadLetter !== undefined
    }, { timeoutMs: 20_000, intervalMs: 100 })
    expect(deadLetter).toMatchObject({ kind: 'order.send_confirmation', status: 'dead_letter', attempt: 3, maxAttempts: 3, lastError: notFound })
    expect(deadLetter!.errors).toEqual([1, 2, 3].map(attempt => ({
      attempt,
      at: expect.any(String),
      startedAt: expect.any(String),
      retryAt: attempt < 3 ? expect.any(String) : null,
      errorClass: 'retryable',
      message: notFound,
      worker: workerId,
    })))

    // The missing order arrives (late replication, a fixed bug): now the redrive can succeed.
    await seedOrderWithId(fixture!.db, orderId, 'late@example.com', 'req_poison')
    expect((await effectsPerOrder(sql(), [orderId])).get(orderId)).toMatchObject({ emails: 0, markers: 0 })

    const redriven = await opsPost(app.url, `/api/ops/jobs/${jobId}/retry`)
    expect(redriven.status, redriven.text).toBe(200)
    expect(redriven.json).toMatchObject({ id: jobId, status: 'queued', attempt: 0, lockedBy: null })
    expect(redriven.json.errors).toEqual(deadLetter!.errors)

    await jobStatusOnce(sql(), jobId!, 'completed')
    const completed = await jobRow(sql(), jobId!)
    expect(completed).toMatchObject({ status: 'completed', attempt: 1, lastError: null, lockedBy: workerId })
    // The history of the three failed attempts survives the redrive and the success.
    expect(completed!.errors).toEqual(deadLetter!.errors)
    expect((await effectsPerOrder(sql(), [orderId])).get(orderId)).toEqual({ emails: 1, invoices: 0, markers: 1, intents: 0 })
    expect(await sql()`select "to", subject from mailbox where order_id = ${orderId}`).toEqual([{ to: 'late@example.com', subject: `Order ${orderId} confirmed` }])
  })

  describe('ops API problems', () => {
    let completedJob: string, queuedJob: string, failedJob: string, deadJob: string

    beforeAll(async () => {
      const { orderIds: [doneOrder, queuedOrder, failedOrder] } = await seedOrders(fixture!.db, 3)
      const hour = 3_600_000
      ;[completedJob, queuedJob, failedJob, deadJob] = await enqueueJobs(fixture!.db, [
        orderJob(doneOrder!),
        orderJob(queuedOrder!, { delayMs: hour }),
        orderJob(failedOrder!, { delayMs: hour }),
        orderJob(doneOrder!, { kind: 'order.issue_invoice', faults: { failPermanently: true } }),
      ]) as [string, string, string, string]
      // Waiting for its retry an hour from now: the worker leaves it alone.
      await sql()`update jobs set status = 'failed', attempt = 1, last_error = 'earlier failure' where id = ${failedJob}`
      await jobStatusOnce(sql(), completedJob, 'completed')
      await jobStatusOnce(sql(), deadJob, 'dead_letter')
    })

    /** Every job as it stands: nothing a rejected request does may show here. */
    const snapshot = () => sql()`select id, status, attempt, fence, locked_by, run_at, errors, updated_at from jobs order by id`

    it('401 without the ops token, 400 for a bad query, 404 for an unknown job or task; nothing changes', async () => {
      const before = await snapshot()

      expectProblem(await request(app.url, '/api/ops/jobs'), 'unauthorized')
      expectProblem(await request(app.url, '/api/ops/jobs', { headers: { authorization: 'Bearer not-the-ops-token' } }), 'unauthorized')
      expectProblem(await opsPost(app.url, `/api/ops/jobs/${deadJob}/retry`, {}), 'unauthorized')
      expectProblem(await opsPost(app.url, '/api/ops/tasks/jobs:rescue', {}), 'unauthorized')

      const invalidQueries: Array<[string, string, RegExp]> = [
        ['status=bogus', 'status', /expected one of "queued"\|"running"\|"failed"\|"completed"\|"dead_letter"/],
        ['limit=0', 'limit', />=1/],
        ['limit=501', 'limit', /<=500/],
        ['colour=red', '(query)', /Unrecognized key: "colour"/],
      ]
      for (const [query, path, message] of invalidQueries) {
        const invalid = await opsRequest(app.url, `/api/ops/jobs?${query}`)
        expectProblem(invalid, 'validation-failed')
        expect(invalid.json.errors, query).toEqual([{ path, message: expect.stringMatching(message) }])
      }

      expectProblem(await opsPost(app.url, '/api/ops/jobs/job_unknown/retry'), 'not-found')
      expectProblem(await opsPost(app.url, '/api/ops/tasks/nope'), 'not-found')

      expect(await snapshot()).toEqual(before)
      expect((await jobRow(sql(), deadJob))?.status).toBe('dead_letter')
    })

    it('every /api/ops path needs the token, an unknown one too: 401 without it, 404 with it', async () => {
      for (const path of ['/api/ops', '/api/ops/xyz', '/api/ops/jobs/job_unknown/xyz', '/api/ops/jobs?status=dead_letter', '/api//ops/jobs', '/api/%6Fps/jobs']) {
        const refused = await request(app.url, path)
        expectProblem(refused, 'unauthorized')
        expect(refused.json.detail, path).toBe('This is an operator route: send "Authorization: Bearer <OPS_TOKEN>".')
      }
      // A spelling the router still serves as the jobs listing: the guard refuses it all the same.
      expect((await request(app.url, '/%61pi/ops/jobs')).status).toBe(401)
      expect((await opsRequest(app.url, '/%61pi/ops/jobs')).status).toBe(200)
      for (const path of ['/api/ops', '/api/ops/xyz', '/api/ops/jobs/job_unknown/xyz']) {
        expect((await opsRequest(app.url, path)).status, path).toBe(404)
      }
    })

    it('409 job-not-retryable for a completed, queued or failed job, naming its status; nothing changes', async () => {
      const before = await snapshot()
      const answers = []
      for (const [jobId, jobStatus] of [[completedJob, 'completed'], [queuedJob, 'queued'], [failedJob, 'failed']] as const) {
        answers.push({ jobId, jobStatus, response: await opsPost(app.url, `/api/ops/jobs/${jobId}/retry`) })
      }
      expect(await snapshot()).toEqual(before)

      for (const { jobId, jobStatus, response } of answers) {
        // RFC 9457: `status` is the HTTP status code, so the job's own state needs a member of its own.
        expectProblem(response, 'job-not-retryable')
        expect(response.json.jobStatus).toBe(jobStatus)
        expect(response.json.detail).toContain(`Job ${jobId} is ${jobStatus}, not dead_letter`)
      }
    })
  })

  it('POST /api/ops/jobs/:id/dismiss ends a dead letter with its reason and an operator action; it is never redriven', async () => {
    const { tenantId, orderIds: [orderId] } = await seedOrders(fixture!.db, 1)
    const orphanOrderId = newId('ord')
    const [deadJob, orphanJob, queuedJob] = await enqueueJobs(fixture!.db, [
      orderJob(orderId!, { kind: 'order.issue_invoice', faults: { failPermanently: true } }),
      orderJob(orphanOrderId, { faults: { failPermanently: true } }),
      orderJob(orderId!, { delayMs: 3_600_000 }),
    ]) as [string, string, string]
    await jobStatusOnce(sql(), deadJob, 'dead_letter')
    await jobStatusOnce(sql(), orphanJob, 'dead_letter')
    const [listedDead] = await listJobs(app.url, { status: 'dead_letter', resourceId: `order:${orderId}` })
    expect(listedDead).toMatchObject({ id: deadJob, status: 'dead_letter', dismissedReason: null, dismissedAt: null })

    const dismiss = (jobId: string, body: unknown) => opsRequest(app.url, `/api/ops/jobs/${jobId}/dismiss`, { method: 'POST', body })
    const reason = 'The tenant retired invoicing; this invoice will never be issued.'
    const dismissed = await dismiss(deadJob, { reason: `  ${reason}\n` })
    expect(dismissed.status, dismissed.text).toBe(200)
    expect(dismissed.json).toEqual({
      ...listedDead,
      status: 'dismissed',
      lockedBy: null,
      dismissedReason: reason,
      dismissedAt: dismissed.json.updatedAt,
      updatedAt: expect.any(String),
    })
    expect(Date.parse(dismissed.json.dismissedAt)).toBeGreaterThanOrEqual(Date.parse(listedDead!.updatedAt))
    expect(await listJobs(app.url, { status: 'dismissed', resourceId: `order:${orderId}` })).toEqual([dismissed.json])

    const orphanDismissed = await dismiss(orphanJob, { reason: 'The order was never stored.' })
    expect(orphanDismissed.status, orphanDismissed.text).toBe(200)
    expect(orphanDismissed.json).toMatchObject({ id: orphanJob, status: 'dismissed', dismissedReason: 'The order was never stored.' })

    const actionsOf = (jobId: string) => sql()`
      select action, tenant_id as "tenantId", subject_id as "subjectId", request_id as "requestId", detail
      from operator_actions where subject_id = ${jobId}`
    expect(await actionsOf(deadJob)).toEqual([{
      action: 'job.dismissed',
      tenantId,
      subjectId: deadJob,
      requestId: dismissed.headers.get('x-server-request-id'),
      detail: { reason, kind: 'order.issue_invoice', resourceId: `order:${orderId}` },
    }])
    // No order, no tenant: the action is kept all the same.
    expect(await actionsOf(orphanJob)).toEqual([{
      action: 'job.dismissed',
      tenantId: null,
      subjectId: orphanJob,
      requestId: orphanDismissed.headers.get('x-server-request-id'),
      detail: { reason: 'The order was never stored.', kind: 'order.send_confirmation', resourceId: `order:${orphanOrderId}` },
    }])

    // The evidence of each dismissing request names the job, its tenant when it has one, and the reason.
    const actionEvidence = async (response: TestResponse) => {
      const requestId = response.headers.get('x-server-request-id')!
      const evidence = await opsRequest(app.url, `/api/ops/evidence?requestId=${requestId}`)
      expect(evidence.status, evidence.text).toBe(200)
      return (evidence.json as Evidence).timeline.filter(entry => entry.kind === 'operator_action').map(({ summary, ids }) => ({ summary, ids }))
    }
    const deadRequestId = dismissed.headers.get('x-server-request-id')!
    expect(await actionEvidence(dismissed)).toEqual([{
      summary: `Operator action job.dismissed on ${deadJob} of tenant ${tenantId} by request ${deadRequestId} with reason ${JSON.stringify(reason)}.`,
      ids: { requestId: deadRequestId, tenantId, jobId: deadJob },
    }])
    const orphanRequestId = orphanDismissed.headers.get('x-server-request-id')!
    expect(await actionEvidence(orphanDismissed)).toEqual([{
      summary: `Operator action job.dismissed on ${orphanJob} by request ${orphanRequestId} with reason "The order was never stored.".`,
      ids: { requestId: orphanRequestId, jobId: orphanJob },
    }])

    const rowsOfTest = () => sql()`select id, status, attempt, fence, locked_by, run_at, errors, dismissed_reason, dismissed_at, updated_at from jobs where id in ${sql()([deadJob, orphanJob, queuedJob])} order by id`
    const before = await rowsOfTest()
    const again = await dismiss(deadJob, { reason: 'twice' })
    expectProblem(again, 'job-not-dismissable')
    expect(again.json.jobStatus).toBe('dismissed')
    expect(again.json.detail).toBe(`Job ${deadJob} is dismissed, not dead_letter: it was dismissed already. Only dead letters can be dismissed.`)

    const queued = await dismiss(queuedJob, { reason: 'not yet' })
    expectProblem(queued, 'job-not-dismissable')
    expect(queued.json.jobStatus).toBe('queued')
    expect(queued.json.detail).toBe(`Job ${queuedJob} is queued, not dead_letter: it will still run by itself. Only dead letters can be dismissed.`)

    for (const body of [{}, { reason: '   ' }, { reason: 'x'.repeat(501) }, { reason: 42 }]) {
      const invalid = await dismiss(queuedJob, body)
      expectProblem(invalid, 'validation-failed')
      expect(invalid.json.errors.map((error: { path: string }) => error.path), JSON.stringify(body)).toEqual(['reason'])
    }

    expectProblem(await dismiss('job_unknown', { reason }), 'not-found')
    expectProblem(await request(app.url, `/api/ops/jobs/${orphanJob}/dismiss`, { method: 'POST', body: { reason } }), 'unauthorized')

    const redriven = await opsRequest(app.url, `/api/ops/jobs/${deadJob}/retry`, { method: 'POST' })
    expectProblem(redriven, 'job-not-retryable')
    expect(redriven.json.jobStatus).toBe('dismissed')
    expect(redriven.json.detail).toBe(`Job ${deadJob} is dismissed, not dead_letter: it was dismissed (${reason}) and stays so.`)

    // A rescue pass leaves it too: nothing a refused request or the maintenance does shows in the rows.
    const rescue = await opsRequest(app.url, '/api/ops/tasks/jobs:rescue', { method: 'POST' })
    expect(rescue.status, rescue.text).toBe(200)
    expect(await rowsOfTest()).toEqual(before)
    expect((await jobRow(sql(), deadJob))?.status).toBe('dismissed')
  })

  /**
   * The app itself runs jobs:rescue every 15 s and the retention services every minute, all on a 15 s
   * boundary of the clock. Arranging rows and calling the task right after a tick keeps the
   * scheduled run from taking them first (or holding the task lock, which answers skipped).
   */
  async function clearOfScheduledTasks(): Promise<void> {
    const untilNextTick = 15_000 - (Date.now() % 15_000)
    if (untilNextTick < 6_000) await sleep(untilNextTick + 1_500)
  }

  it('POST /api/ops/tasks/jobs:rescue puts back a job whose worker stopped heart-beating, and it then completes', async () => {
    const { orderIds: [orderId] } = await seedOrders(fixture!.db, 1)
    const retriedJob = newId('job')
    const lastAttemptJob = newId('job')
    await clearOfScheduledTasks()
    // Claimed an hour ago by a worker that has been silent since: one retryable, one on its last attempt.
    for (const [id, kind, attempt] of [[retriedJob, 'order.send_confirmation', 1], [lastAttemptJob, 'order.issue_invoice', 3]] as const) {
      await sql()`
        insert into jobs (id, kind, dedupe_key, payload, status, attempt, max_attempts, resource_id, locked_by, fence, started_at, heartbeat_at)
        values (${id}, ${kind}, ${orderId!}, ${sql().json({ orderId: orderId! })}, 'running', ${attempt}, 3, ${`order:${orderId}`},
          'vanished-worker', nextval('job_fence_seq'), now() - interval '1 hour', now() - interval '1 hour')`
    }

    const rescue = await opsPost(app.url, '/api/ops/tasks/jobs:rescue')
    expect(rescue.status, rescue.text).toBe(200)
    expect(rescue.json).toEqual({ result: { skipped: false, counts: { rescued: 2, deadLettered: 1 } } })

    const rescuedEntry = (attempt: number, deadLettered = false) => ({
      attempt,
      at: expect.any(String),
      startedAt: expect.any(String),
      retryAt: deadLettered ? null : expect.any(String),
      errorClass: 'rescued',
      message: 'rescued: no heartbeat from vanished-worker for 1000 ms',
      worker: 'vanished-worker',
    })
    await jobStatusOnce(sql(), retriedJob, 'completed')
    const retried = await jobRow(sql(), retriedJob)
    expect(retried).toMatchObject({ status: 'completed', attempt: 2, lockedBy: workerId, lastError: null })
    expect(retried!.errors).toEqual([rescuedEntry(1)])
    const lastAttempt = await jobRow(sql(), lastAttemptJob)
    expect(lastAttempt).toMatchObject({ status: 'dead_letter', attempt: 3, lastError: 'rescued: no heartbeat from vanished-worker for 1000 ms' })
    expect(lastAttempt!.errors).toEqual([rescuedEntry(3, true)])
    expect((await effectsPerOrder(sql(), [orderId!])).get(orderId!)).toEqual({ emails: 1, invoices: 0, markers: 1, intents: 0 })

    const again = await opsPost(app.url, '/api/ops/tasks/jobs:rescue')
    expect(again.json).toEqual({ result: { skipped: false, counts: { rescued: 0, deadLettered: 0 } } })
  })

  it('POST /api/ops/tasks/retention:cleanup deletes expired records and old completed jobs, and keeps the rest', async () => {
    const label = randomUUID()
    const [oldCompleted, recentCompleted, oldDeadLetter] = await enqueueJobs(fixture!.db, [
      orderJob(newId('ord'), { delayMs: 3_600_000 }),
      orderJob(newId('ord'), { delayMs: 3_600_000 }),
      orderJob(newId('ord'), { delayMs: 3_600_000 }),
    ])
    await clearOfScheduledTasks()
    // JOB_RETENTION_DAYS=1: two days old goes, an hour old stays, a dead letter stays however old.
    await sql()`update jobs set status = 'completed', completed_at = now() - interval '2 days' where id = ${oldCompleted!}`
    await sql()`update jobs set status = 'completed', completed_at = now() - interval '1 hour' where id = ${recentCompleted!}`
    await sql()`update jobs set status = 'dead_letter', attempt = 8, created_at = now() - interval '30 days', updated_at = now() - interval '30 days'
      where id = ${oldDeadLetter!}`
    for (const [key, expiresIn] of [[`expired-${label}`, '-1 hour'], [`current-${label}`, '1 hour']]) {
      await sql()`
        insert into idempotency_records (scope, key, route, fingerprint, status, request_id, response_status, expires_at)
        values ('tenant:retention', ${key!}, 'POST /api/orders', 'fingerprint', 'succeeded', 'req_retention', 201, now() + ${expiresIn!}::interval)`
    }
    const [expired] = await sql()<Array<{ count: number }>>`select count(*)::int as count from idempotency_records where expires_at < now()`
    expect(expired!.count).toBe(1)

    const cleanup = await opsPost(app.url, '/api/ops/tasks/retention:cleanup')
    expect(cleanup.status, cleanup.text).toBe(200)
    expect(cleanup.json).toMatchObject({
      result: {
        'retention:records': { skipped: false, deleted: 1, run: { drained: true } },
        'retention:jobs': { skipped: false, deleted: 1, run: { drained: true } },
        'retention:request-log': { skipped: false, run: { drained: true } },
      },
    })

    expect(await sql()`select key from idempotency_records where scope = 'tenant:retention'`).toEqual([{ key: `current-${label}` }])
    expect(await jobRow(sql(), oldCompleted!)).toBeUndefined()
    expect((await jobRow(sql(), recentCompleted!))?.status).toBe('completed')
    expect((await jobRow(sql(), oldDeadLetter!))?.status).toBe('dead_letter')

    const again = await opsPost(app.url, '/api/ops/tasks/retention:cleanup')
    expect(again.json).toMatchObject({ result: { 'retention:records': { skipped: false, deleted: 0 }, 'retention:jobs': { skipped: false, deleted: 0 } } })
  })
})

describeWithServices('jobs over HTTP: two app instances with in-app workers', ['postgres', 'redis'], () => {
  const orderCount = 40
  let stack: JobsStack | undefined
  let fixture: JobsFixture | undefined
  let instances: AppProcess[] = []
  const workerIds = ['jobs-api-pair-a', 'jobs-api-pair-b']

  beforeAll(async () => {
    // One database and one Redis prefix: the two workers contend for the same jobs and order locks.
    stack = await startJobsStack('jobs_api_pair', workerIds)
    fixture = stack.fixture
    instances = stack.apps
  })

  afterAll(async () => {
    await stack?.close()
  })

  it('40 orders posted alternately to both: every create_intent job completes once, one intent per order', async () => {
    const tenant = await createTenant(instances[0]!.url, 'jobs api pair')
    const created = await Promise.all(Array.from({ length: orderCount }, (_, index) => postOrder(instances[index % 2]!.url, {
      secretKey: tenant.secretKey,
      key: `jobs-api-pair-${randomUUID()}`,
      body: validOrderBody(),
    })))
    const orderIds = created.map(createdOrderId)
    const sql = fixture!.sql

    await pollUntil(`${orderCount} create_intent jobs are completed`, async () => {
      const [row] = await sql<Array<{ count: number }>>`select count(*)::int as count from jobs where status = 'completed'`
      return row!.count === orderCount
    }, { timeoutMs: 30_000, intervalMs: 100 })

    const jobs = await sql<Array<{ kind: string, status: string, attempt: number, errors: unknown[], lockedBy: string, resourceId: string }>>`
      select kind, status, attempt, errors, locked_by as "lockedBy", resource_id as "resourceId" from jobs`
    expect(jobs).toHaveLength(orderCount)
    expect(jobs.map(job => job.resourceId).sort()).toEqual(orderIds.map(id => `order:${id}`).sort())
    for (const job of jobs) {
      expect(job).toMatchObject({ kind: 'payment.create_intent', status: 'completed', attempt: 1, errors: [] })
      expect(workerIds).toContain(job.lockedBy)
    }

    const effects = await effectsPerOrder(sql, orderIds)
    expect(effects.size).toBe(orderCount)
    for (const counts of effects.values()) expect(counts).toEqual({ emails: 0, invoices: 0, markers: 0, intents: 1 })
    const intents = await sql<Array<{ orderId: string, requests: number, stored: boolean }>>`
      select p.order_id as "orderId", p.requests, o.payment_intent_id = p.id as stored
      from payment_intents p join orders o on o.id = p.order_id`
    expect(intents.map(intent => intent.orderId).sort()).toEqual([...orderIds].sort())
    for (const intent of intents) expect(intent).toMatchObject({ requests: 1, stored: true })

    const perWorker = workerIds.map(workerId => `${workerId}: ${jobs.filter(job => job.lockedBy === workerId).length}`)
    console.info(`[jobs-api] create_intent jobs per worker: ${perWorker.join(', ')}`)
  })
})

describe('jobs over HTTP: embedded on PGlite with the in-app worker', () => {
  let pgliteDir: string | undefined
  let app: AppProcess | undefined

  beforeAll(async () => {
    pgliteDir = await mkdtemp(join(tmpdir(), 'ic-jobs-api-'))
    app = await startApp({ redisUrl: null, label: 'jobs-api-embedded', env: { ...fastJobsEnv, PGLITE_DIR: pgliteDir } })
  })

  afterAll(async () => {
    await app?.stop()
    if (pgliteDir) await rm(pgliteDir, { recursive: true, force: true })
  })

  it('an order enqueues one payment.create_intent job that the worker completes', async () => {
    const tenant = await createTenant(app!.url, 'jobs api embedded')
    const order = { secretKey: tenant.secretKey, key: `jobs-api-embedded-${randomUUID()}`, body: validOrderBody() }
    const { key } = order
    const created = await postOrder(app!.url, order)
    const orderId = createdOrderId(created)

    const job = await expectOneCompletedIntentJob(app!.url, orderId, { key, requestId: created.headers.get('x-request-id') })

    const fetched = await request(app!.url, `/api/orders/${orderId}`, { headers: { authorization: `Bearer ${tenant.secretKey}` } })
    expect(fetched.status, fetched.text).toBe(200)
    expect(fetched.json).toMatchObject({ id: orderId, object: 'order', status: 'pending_payment' })
    // The replay neither adds a job nor reruns the one there is.
    const replayed = await postOrder(app!.url, order)
    expect(replayed.status, replayed.text).toBe(201)
    expect(replayed.headers.get('idempotent-replayed')).toBe('true')
    expect(await listJobs(app!.url, { resourceId: `order:${orderId}` })).toEqual([job])
  })
})

describeWithServices('jobs over HTTP: graceful shutdown of the app', ['postgres', 'redis'], () => {
  let stack: JobsStack | undefined
  let fixture: JobsFixture | undefined
  let app: AppProcess | undefined

  beforeAll(async () => {
    stack = await startJobsStack('jobs_api_shutdown', ['jobs-api-shutdown'], { JOB_SHUTDOWN_GRACE_MS: '200' })
    fixture = stack.fixture
    app = stack.apps[0]
  })

  afterAll(async () => {
    await stack?.close()
  })

  it('SIGTERM releases a job stuck in its attempt: exit code 0, the job queued again with its attempt given back', async () => {
    const { orderIds: [orderId] } = await seedOrders(fixture!.db, 1)
    const [jobId] = await enqueueJobs(fixture!.db, [orderJob(orderId!, { faults: { stallMs: 30_000 } })])
    await pollUntil(`job ${jobId} is running`, async () => (await jobRow(fixture!.sql, jobId!))?.lockedBy === 'jobs-api-shutdown', { timeoutMs: 20_000 })
    expect(await jobRow(fixture!.sql, jobId!)).toMatchObject({ status: 'running', attempt: 1 })

    await app!.stop()
    expect(await app!.exited).toBe(0)

    expect(await jobRow(fixture!.sql, jobId!)).toMatchObject({ status: 'queued', attempt: 0, lockedBy: null, completedAt: null, errors: [] })
    expect((await effectsPerOrder(fixture!.sql, [orderId!])).get(orderId!)).toEqual({ emails: 0, invoices: 0, markers: 0, intents: 0 })
  })
})

afterAll(async () => {
  await stopAll()
})
