import { setTimeout as delay } from 'node:timers/promises'
import { count, eq, getTableColumns, inArray, sql } from 'drizzle-orm'
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest'
import { z } from 'zod'
import type { Database, DatabaseHandle } from '@idempotent-checkout/db-kit'
import { newId } from '../../server/db/ids'
import { invoices, type JobErrorEntry, jobs, type JobStatus, mailbox, orders, paymentIntents, sideEffects } from '../../server/db/schema'
import { SnoozeJob } from '../../server/jobs/errors'
import { defineJobKind } from '../../server/jobs/kind'
import { createJobKinds } from '../../server/composition/job-kinds'
import { rescueStaleJobs } from '../../server/jobs/rescue'
import { createWorker, type Worker, type WorkerOptions } from '../../server/jobs/worker'
import { createJobStore } from '../../server/jobs/store'
import { JOBS_CHANNEL } from '../../server/jobs/wake'
import type { Locks } from 'nuxt-idempotency/core'
import { setLogLevel } from '../../server/observability/logger'
import { createMockpayProvider } from '../../server/payments/mockpay/provider'
import { paymentIdempotencyKey } from '../../server/payments'
import { type DatabaseDriver, openSuiteDatabase, type SuiteDatabase } from '../support/databases'
import { enqueueJobs, interceptStatements, orderJob, seedOrderWithId, seedOrders } from '../support/jobs'
import { describeOnBothBackends, type LockBackend } from '../support/lock-backends'
import { pollUntil } from '../support/poll'
import { postgresTopology } from '../support/postgres-topology'

// The real runner, in this process, against both pairs the app runs on: Postgres with Redis locks,
// and PGlite with in-process locks. Short timings keep retries, expiries and rescues inside a test;
// every expectation is about rows.

const POLL_INTERVAL_MS = 50
const HEARTBEAT_TIMEOUT_MS = 600
const LOCK_TTL_MS = 300
const LOCK_BUSY_DELAY_MS = 50
const BACKOFF = { baseMs: 100, capMs: 2_000 }
const BACKOFF_JITTER = 0.2
/** Date (ms) against Postgres (µs) rounding in the stored error timestamps. */
/** A history entry without its timestamps, for exact comparison. */
const withoutTimes = ({ at: _at, startedAt: _startedAt, retryAt: _retryAt, ...entry }: JobErrorEntry) => entry
/** Far longer than any test waits: only a wake-up can bring a job in early. */
const SLOW_POLL_INTERVAL_MS = 10_000
/** Heartbeats every 20 s: none falls inside a test whose subject is not the heartbeat. */
const QUIET_HEARTBEAT_TIMEOUT_MS = 60_000
/** Longer than the heartbeat interval (a third of the timeout): one heartbeat is always on its way. */
const HEARTBEAT_REPLY_DELAY_MS = 400
const COMPLETION_TEXT_START = 'with done as ('
const HEARTBEAT_TEXT_START = 'update "jobs" set "heartbeat_at"'

// The runner logs every attempt; LOG_LEVEL=info brings the lines back when a test needs explaining.
if (!process.env.LOG_LEVEL) setLogLevel('error')

interface StartedWorker {
  id: string
  worker: Worker
}

interface Deferred {
  promise: Promise<void>
  resolve: () => void
}

function deferred(): Deferred {
  let resolve!: () => void
  const promise = new Promise<void>((done) => { resolve = done })
  return { promise, resolve }
}

/** Waits for `gate`, or rejects with the abort reason as soon as `signal` fires. */
function untilOpenOrAborted(gate: Promise<void>, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason)
    const onAbort = () => reject(signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
    gate.then(() => {
      signal.removeEventListener('abort', onAbort)
      resolve()
    })
  })
}

function workerContract(driver: DatabaseDriver, openLockBackend: () => Promise<LockBackend>) {
  let database: SuiteDatabase
  let handle: DatabaseHandle
  let db: Database
  let lockBackend: LockBackend
  let locks: Locks
  const runningWorkers = new Set<Worker>()
  let workerCount = 0

  beforeAll(async () => {
    // Two workers at concurrency 4, their heartbeats and the test's reads, without queueing in the pool.
    database = await openSuiteDatabase(driver, 'worker_contract', { poolSize: 24 })
    handle = database.handle
    db = handle.db
    lockBackend = await openLockBackend()
    locks = lockBackend.locks
  }, 60_000)

  afterAll(async () => {
    await lockBackend?.close()
    await database?.close()
  })

  afterEach(async () => {
    await Promise.all([...runningWorkers].map(worker => stopWorker(worker, 100)))
    for (const table of [jobs, mailbox, invoices, sideEffects, paymentIntents]) await db.delete(table)
  })

  async function startWorker(overrides: Partial<WorkerOptions> = {}): Promise<StartedWorker> {
    const id = `${driver}-worker-${++workerCount}`
    const worker = createWorker({
      db,
      notifications: handle.notifications,
      locks,
      kinds: createJobKinds({ payments: createMockpayProvider(db), mockpay: { url: 'http://127.0.0.1:9/unused', secret: 'whsec_unused' } }),
      workerId: id,
      concurrency: 4,
      prefetch: 8,
      pollIntervalMs: POLL_INTERVAL_MS,
      claimCoalesceMs: 25,
      heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS,
      lockTtlMs: LOCK_TTL_MS,
      lockBusyDelayMs: LOCK_BUSY_DELAY_MS,
      backoff: BACKOFF,
      snooze: { max: 20, maxDelayMs: 60 * 60 * 1000 },
      faultsEnabled: true,
      ...overrides,
    })
    runningWorkers.add(worker)
    await worker.start()
    return { id, worker }
  }

  async function stopWorker(worker: Worker, graceMs: number): Promise<void> {
    runningWorkers.delete(worker)
    await worker.stop(graceMs)
  }

  async function readJob(id: string) {
    const [row] = await db.select({
      ...getTableColumns(jobs),
      // Both from the same statement's now(): the delay a put-back or a failure asked for, exactly.
      runAtAfterUpdateMs: sql<number>`round(extract(epoch from ${jobs.runAt} - ${jobs.updatedAt}) * 1000)`.mapWith(Number),
      startedAfterCreatedMs: sql<number | null>`round(extract(epoch from ${jobs.startedAt} - ${jobs.createdAt}) * 1000)`.mapWith(Number),
    }).from(jobs).where(eq(jobs.id, id))
    expect(row, `job ${id}`).toBeDefined()
    return row!
  }

  async function waitForStatus(id: string, status: JobStatus, timeoutMs = 10_000): Promise<void> {
    await pollUntil(`job ${id} is ${status}`, async () => (await readJob(id)).status === status, { timeoutMs, intervalMs: 20 })
  }

  async function statusCounts(): Promise<Record<string, number>> {
    const rows = await db.select({ status: jobs.status, count: count() }).from(jobs).groupBy(jobs.status)
    return Object.fromEntries(rows.map(row => [row.status, row.count]))
  }

  const mailFor = (orderId: string) => db.select().from(mailbox).where(eq(mailbox.orderId, orderId))

  async function rowsPerOrder(table: typeof mailbox | typeof invoices | typeof sideEffects): Promise<Record<string, number>> {
    const rows = await db.select({ orderId: table.orderId, count: count() }).from(table).groupBy(table.orderId)
    return Object.fromEntries(rows.map(row => [row.orderId, row.count]))
  }

  const onePerOrder = (orderIds: string[], perOrder = 1) => Object.fromEntries(orderIds.map(orderId => [orderId, perOrder]))

  async function seedOrder(): Promise<{ tenantId: string, orderId: string }> {
    const { tenantId, orderIds } = await seedOrders(db, 1)
    return { tenantId, orderId: orderIds[0]! }
  }

  async function enqueueOne(input: Parameters<typeof orderJob>[1] & { orderId: string }): Promise<string> {
    const { orderId, ...overrides } = input
    const [id] = await enqueueJobs(db, [orderJob(orderId, overrides)])
    return id!
  }

  /**
   * test.gated_mail: each job waits for the gate of its key, then completes with one mailbox row
   * for that key as its effect (a null tenant makes the effect violate mailbox.tenant_id not null).
   * With `resource`, every job of the kind locks that one resource.
   */
  function gatedMailKind(options: { resource?: string } = {}) {
    const gates = new Map<string, Deferred>()
    const gate = (key: string) => {
      if (!gates.has(key)) gates.set(key, deferred())
      return gates.get(key)!
    }
    /** Keys in the order their handlers started, and in the order they called complete(). */
    const entered: string[] = []
    const completing: string[] = []
    const kind = defineJobKind({
      kind: 'test.gated_mail',
      payload: z.object({ key: z.string(), tenantId: z.string().nullable() }).strict(),
      resource: options.resource === undefined ? undefined : () => options.resource!,
      async run({ complete }, { key, tenantId }) {
        entered.push(key)
        await gate(key).promise
        completing.push(key)
        await complete({
          text: 'mail as (insert into mailbox (id, tenant_id, order_id, "to", subject, body) select $1::text, $2::text, $3::text, $4::text, $5::text, $6::text from done)',
          params: [newId('msg'), tenantId, key, 'gated@example.com', 'gated', `job for ${key}`],
        })
      },
    })
    const enqueue = (keys: string[], overrides: { tenantId?: string | null, maxAttempts?: number } = {}) => enqueueJobs(db, keys.map(key => ({
      kind: 'test.gated_mail', dedupeKey: key, payload: { key, tenantId: overrides.tenantId === undefined ? 'ten_gated' : overrides.tenantId }, maxAttempts: overrides.maxAttempts,
    })))
    return { kind, enqueue, open: (key: string) => gate(key).resolve(), entered, completing }
  }

  /**
   * `db` on which the first completion statement is held on its way to the database (in flight, as
   * the runner sees it) until released; every other statement goes through. `heldJobId` names its job.
   */
  function holdingFirstCompletion() {
    const held = deferred()
    const release = deferred()
    let heldJobId: string | undefined
    const holding = interceptStatements(db, async (text, params) => {
      if (heldJobId || !text.startsWith(COMPLETION_TEXT_START)) return
      heldJobId = params.find((param): param is string => typeof param === 'string' && param.startsWith('job_'))
      held.resolve()
      await release.promise
    })
    return { db: holding, held: held.promise, release: release.resolve, heldJobId: () => heldJobId }
  }

  /** How many distinct completed_at (microseconds, as stored) the jobs have: 1 when one transaction completed them all. */
  async function distinctCompletionTimes(ids: string[]): Promise<number> {
    const [row] = await db.select({ times: sql<number>`count(distinct ${jobs.completedAt})::int`.mapWith(Number) }).from(jobs).where(inArray(jobs.id, ids))
    return row!.times
  }

  const readJobs = (ids: string[]) => Promise.all(ids.map(readJob))

  it('two workers complete 200 jobs on 100 orders, each at attempt 1, with one email and one invoice per order', async () => {
    const { orderIds } = await seedOrders(db, 100)
    await enqueueJobs(db, orderIds.flatMap(orderId => [orderJob(orderId), orderJob(orderId, { kind: 'order.issue_invoice' })]))

    const first = await startWorker()
    const second = await startWorker()
    await pollUntil('all 200 jobs are completed', async () => (await statusCounts()).completed === 200, { timeoutMs: 25_000 })

    expect(await statusCounts()).toEqual({ completed: 200 })
    const rows = await db.select({ id: jobs.id, attempt: jobs.attempt, lockedBy: jobs.lockedBy, errors: jobs.errors }).from(jobs)
    // The two kinds of one order contend for its lock: a busy lock gives the attempt back.
    expect(rows.filter(row => row.attempt !== 1 || row.errors.length > 0)).toEqual([])
    expect(new Set(rows.map(row => row.lockedBy))).toEqual(new Set([first.id, second.id]))
    expect(await rowsPerOrder(mailbox)).toEqual(onePerOrder(orderIds))
    expect(await rowsPerOrder(invoices)).toEqual(onePerOrder(orderIds))
    expect(await rowsPerOrder(sideEffects)).toEqual(onePerOrder(orderIds, 2))
    expect(await db.select({ count: count() }).from(sideEffects)).toEqual([{ count: 200 }])
  })

  it('payment.create_intent stores one provider intent per order, asked for once', async () => {
    const { orderIds } = await seedOrders(db, 50)
    await enqueueJobs(db, orderIds.map(orderId => orderJob(orderId, { kind: 'payment.create_intent' })))

    await startWorker()
    await pollUntil('all 50 jobs are completed', async () => (await statusCounts()).completed === 50, { timeoutMs: 20_000 })

    expect(await statusCounts()).toEqual({ completed: 50 })
    const intents = await db.select().from(paymentIntents)
    expect(intents).toHaveLength(50)
    expect(intents.filter(intent => intent.requests !== 1 || intent.provider !== 'mockpay' || intent.idempotencyToken !== paymentIdempotencyKey(intent.orderId))).toEqual([])
    const orderRows = await db.select({ id: orders.id, paymentIntentId: orders.paymentIntentId }).from(orders).where(inArray(orders.id, orderIds))
    expect(Object.fromEntries(orderRows.map(order => [order.id, order.paymentIntentId])))
      .toEqual(Object.fromEntries(intents.map(intent => [intent.orderId, intent.id])))
  })

  it('a job whose order is missing is retried with backoff, dead-lettered after max attempts, and completes once redriven after the fix', async () => {
    const orderId = newId('ord')
    const id = await enqueueOne({ orderId, maxAttempts: 4 })
    const worker = await startWorker()

    await waitForStatus(id, 'dead_letter')
    const notFound = `RetryableJobError: order ${orderId} not found`
    const dead = await readJob(id)
    expect(dead).toMatchObject({ status: 'dead_letter', attempt: 4, lastError: notFound })
    expect(dead.errors.map(withoutTimes)).toEqual([1, 2, 3, 4].map(attempt => (
      { attempt, errorClass: 'retryable', message: notFound, worker: worker.id }
    )))
    // Each retry was scheduled min(cap, base·2^(n-1)) ± 20 % after failure n (database clock, ms
    // precision), and attempt n+1 started no earlier; the last failure scheduled none.
    for (const [index, entry] of dead.errors.entries()) {
      const attempt = index + 1
      if (attempt === dead.errors.length) {
        expect(entry.retryAt).toBeNull()
        continue
      }
      const formulaMs = Math.min(BACKOFF.capMs, BACKOFF.baseMs * 2 ** (attempt - 1))
      const scheduledMs = Date.parse(entry.retryAt!) - Date.parse(entry.at)
      expect(scheduledMs, `retry delay after attempt ${attempt}`).toBeGreaterThanOrEqual(Math.floor((1 - BACKOFF_JITTER) * formulaMs) - 1)
      expect(scheduledMs, `retry delay after attempt ${attempt}`).toBeLessThanOrEqual(Math.ceil((1 + BACKOFF_JITTER) * formulaMs) + 1)
      expect(Date.parse(dead.errors[index + 1]!.startedAt!)).toBeGreaterThanOrEqual(Date.parse(entry.retryAt!))
    }

    await seedOrderWithId(db, orderId, 'late@example.com', 'req_late')
    expect(await createJobStore(db).redrive(id)).toMatchObject({ id, status: 'queued', attempt: 0 })

    await waitForStatus(id, 'completed')
    const completed = await readJob(id)
    expect(completed).toMatchObject({ status: 'completed', attempt: 1, lastError: null, lockedBy: worker.id })
    expect(completed.errors).toHaveLength(4)
    expect(await mailFor(orderId)).toHaveLength(1)
  })

  it('a payload that does not parse is dead-lettered at attempt 1 as permanent', async () => {
    const { orderId } = await seedOrder()
    const id = await enqueueOne({ orderId, payload: {} })
    await startWorker()

    await waitForStatus(id, 'dead_letter')
    const row = await readJob(id)
    expect(row).toMatchObject({ status: 'dead_letter', attempt: 1 })
    expect(row.errors).toHaveLength(1)
    expect(row.errors[0]).toMatchObject({ attempt: 1, errorClass: 'permanent' })
    expect(row.errors[0]!.message).toMatch(/^PermanentJobError: invalid payload: /)
    expect(await mailFor(orderId)).toHaveLength(0)
  })

  it('a permanent failure on a valid job is dead-lettered after exactly one attempt, with no email', async () => {
    const { orderId } = await seedOrder()
    const id = await enqueueOne({ orderId, faults: { failPermanently: true } })
    const worker = await startWorker()

    await waitForStatus(id, 'dead_letter')
    const row = await readJob(id)
    expect(row).toMatchObject({ status: 'dead_letter', attempt: 1, lastError: 'PermanentJobError: permanent failure injected' })
    expect(row.errors.map(withoutTimes)).toEqual([
      { attempt: 1, errorClass: 'permanent', message: 'PermanentJobError: permanent failure injected', worker: worker.id },
    ])
    expect(await mailFor(orderId)).toHaveLength(0)
  })

  it('two retryable failures, then success at attempt 3 with one email', async () => {
    const { orderId } = await seedOrder()
    const id = await enqueueOne({ orderId, faults: { failTimes: 2 } })
    await startWorker()

    await waitForStatus(id, 'completed')
    const row = await readJob(id)
    expect(row).toMatchObject({ status: 'completed', attempt: 3, lastError: null })
    expect(row.errors.map(entry => [entry.attempt, entry.errorClass, entry.message])).toEqual([
      [1, 'retryable', 'RetryableJobError: failure injected (attempt 1 of the first 2)'],
      [2, 'retryable', 'RetryableJobError: failure injected (attempt 2 of the first 2)'],
    ])
    expect(await mailFor(orderId)).toHaveLength(1)
  })

  it('a snooze puts the job back for the asked delay without spending an attempt', async () => {
    const { orderId } = await seedOrder()
    const id = await enqueueOne({ orderId, faults: { snoozeMs: 700 } })
    await startWorker()

    // A claim sets the fence and a put-back keeps it: queued with a fence means snoozed.
    await pollUntil('the job has snoozed', async () => {
      const row = await readJob(id)
      return row.status === 'queued' && row.fence !== null
    }, { intervalMs: 20 })
    const snoozed = await readJob(id)
    expect(snoozed).toMatchObject({ status: 'queued', attempt: 0, lockedBy: null, faults: null, runAtAfterUpdateMs: 700, errors: [] })

    await waitForStatus(id, 'completed')
    const completed = await readJob(id)
    expect(completed).toMatchObject({ status: 'completed', attempt: 1, faults: null, errors: [] })
    expect(completed.startedAt!.getTime()).toBeGreaterThanOrEqual(snoozed.runAt.getTime())
    expect(await mailFor(orderId)).toHaveLength(1)
  })

  it('while its order lock is held elsewhere the job is put back again and again without spending attempts', async () => {
    const { orderId } = await seedOrder()
    const lockKey = `lock:order:${orderId}`
    const token = await locks.acquire(lockKey, 5_000)
    expect(token).not.toBeNull()
    try {
      const id = await enqueueOne({ orderId })
      await startWorker()

      await pollUntil('the worker has tried the job', async () => (await readJob(id)).fence !== null, { intervalMs: 20 })
      const firstFence = (await readJob(id)).fence!
      const observed: Array<Awaited<ReturnType<typeof readJob>>> = []
      const holdUntil = Date.now() + 1_000
      while (Date.now() < holdUntil) {
        observed.push(await readJob(id))
        await delay(20)
      }
      expect(observed.filter(row => !['queued', 'running'].includes(row.status) || row.attempt > 1 || row.errors.length > 0)).toEqual([])
      // Each claim draws a new fence: a higher one means the job was put back and claimed again.
      expect(Math.max(...observed.map(row => row.fence!))).toBeGreaterThan(firstFence)
      expect(await mailFor(orderId)).toHaveLength(0)

      expect(await locks.release(lockKey, token!)).toBe(true)
      await waitForStatus(id, 'completed')
      expect(await readJob(id)).toMatchObject({ status: 'completed', attempt: 1, errors: [] })
      expect(await mailFor(orderId)).toHaveLength(1)
    }
    finally {
      await locks.release(lockKey, token!)
    }
  })

  it('a worker frozen past its heartbeat and lock expiry is rescued, another completes the job, and the late commit is fenced out', async () => {
    const { orderId } = await seedOrder()
    const id = await enqueueOne({ orderId, faults: { stallMs: 2_000 } })
    // Concurrency 1 and no prefetch: A's only slot stays taken by the frozen run, so the rescued job is B's to claim.
    const workerA = await startWorker({ concurrency: 1, prefetch: 0 })

    await pollUntil('the frozen claim is rescued', async () => {
      const result = await rescueStaleJobs(db, locks, HEARTBEAT_TIMEOUT_MS)
      return !result.skipped && result.counts.rescued === 1
    }, { timeoutMs: 5_000 })
    const rescued = await readJob(id)
    expect(rescued).toMatchObject({ status: 'failed', attempt: 1, lockedBy: workerA.id })

    const workerB = await startWorker()
    await waitForStatus(id, 'completed')
    const completedByB = await readJob(id)
    // A wakes from its freeze and tries to commit with its old fence.
    await pollUntil('worker A has finished its frozen run', async () => workerA.worker.running === 0, { timeoutMs: 10_000 })

    // The email marker would hide a second send; an unchanged row shows A's commit wrote nothing at all.
    const completed = await readJob(id)
    expect(completed).toEqual(completedByB)
    expect(completed).toMatchObject({ status: 'completed', attempt: 2, lockedBy: workerB.id })
    expect(completed.fence!).toBeGreaterThan(rescued.fence!)
    expect(completed.errors.map(withoutTimes)).toEqual([
      { attempt: 1, errorClass: 'rescued', message: `rescued: no heartbeat from ${workerA.id} for ${HEARTBEAT_TIMEOUT_MS} ms`, worker: workerA.id },
    ])
    expect(await mailFor(orderId)).toHaveLength(1)
  })

  it('a job whose resource lock is lost mid-run is aborted, put back with its attempt given back, and completes once on its next run', async () => {
    const { tenantId, orderId } = await seedOrder()
    const lockKey = `lock:order:${orderId}`
    // The handler's two runs: each says when it started and waits for the test to let it commit.
    const runs = [1, 2].map(() => ({ entered: deferred(), proceed: deferred(), interruption: undefined as string | undefined }))
    let runCount = 0
    const gatedConfirmation = defineJobKind({
      kind: 'test.gated_confirmation',
      payload: z.object({ orderId: z.string() }).strict(),
      resource: ({ orderId }) => `order:${orderId}`,
      async run({ signal, commit }, { orderId }) {
        const run = runs[runCount++]!
        run.entered.resolve()
        try {
          await untilOpenOrAborted(run.proceed.promise, signal)
        }
        catch (error) {
          run.interruption = (signal.reason as { reason?: string } | undefined)?.reason
          throw error
        }
        await commit(async (tx) => {
          await tx.insert(mailbox).values({ id: newId('msg'), tenantId, orderId, to: 'gated@example.com', subject: 'gated', body: 'gated' })
        })
      },
    })
    // The test needs the worker's token to take the lock from under it on the in-process backend.
    const tokens = new Map<string, string>()
    const recordingLocks: Locks = {
      ...locks,
      async acquire(key, ttlMs) {
        const token = await locks.acquire(key, ttlMs)
        if (token) tokens.set(key, token)
        return token
      },
    }
    // The lock-lost put-back waits lockBusyDelayMs: long enough here to read the queued row.
    await startWorker({ kinds: [gatedConfirmation], locks: recordingLocks, lockBusyDelayMs: 800 })
    const id = await enqueueOne({ orderId, kind: 'test.gated_confirmation' })

    await runs[0]!.entered.promise
    const firstRun = await readJob(id)
    expect(firstRun).toMatchObject({ status: 'running', attempt: 1 })
    await lockBackend.loseLock(lockKey, tokens.get(lockKey)!)

    await waitForStatus(id, 'queued')
    expect(runs[0]!.interruption).toBe('lock_lost')
    expect(await readJob(id)).toMatchObject({ status: 'queued', attempt: 0, lockedBy: null, runAtAfterUpdateMs: 800, errors: [] })
    expect(await mailFor(orderId)).toHaveLength(0)

    await runs[1]!.entered.promise
    const secondRun = await readJob(id)
    expect(secondRun).toMatchObject({ status: 'running', attempt: 1 })
    expect(secondRun.fence!).toBeGreaterThan(firstRun.fence!)
    expect(await mailFor(orderId)).toHaveLength(0)
    runs[1]!.proceed.resolve()

    await waitForStatus(id, 'completed')
    expect(await readJob(id)).toMatchObject({ status: 'completed', attempt: 1, errors: [] })
    expect(runCount).toBe(2)
    expect(runs[1]!.interruption).toBeUndefined()
    expect(await mailFor(orderId)).toHaveLength(1)
  })

  it('stop() releases a job still running after the grace period with its attempt given back; a new worker completes it', async () => {
    const { orderId } = await seedOrder()
    const id = await enqueueOne({ orderId, faults: { stallMs: 5_000 } })
    const first = await startWorker()

    await waitForStatus(id, 'running')
    await stopWorker(first.worker, 200)
    expect(first.worker.running).toBe(0)
    expect(await readJob(id)).toMatchObject({ status: 'queued', attempt: 0, lockedBy: null, errors: [] })
    expect(await mailFor(orderId)).toHaveLength(0)

    // Given back, the next run is attempt 1 again and freezes again (the fault is first-attempt only).
    const second = await startWorker()
    await waitForStatus(id, 'completed', 15_000)
    expect(await readJob(id)).toMatchObject({ status: 'completed', attempt: 1, lockedBy: second.id, errors: [] })
    expect(await mailFor(orderId)).toHaveLength(1)
  }, 30_000)

  it('a worker claims only the kinds it runs: a job of another kind waits queued, untouched, for a worker that runs it', async () => {
    const { orderId } = await seedOrder()
    const [confirmationOnly] = createJobKinds({ payments: createMockpayProvider(db) }).filter(kind => kind.kind === 'order.send_confirmation')
    await startWorker({ kinds: [confirmationOnly!] })
    const invoice = await enqueueOne({ orderId, kind: 'order.issue_invoice' })
    const confirmation = await enqueueOne({ orderId, kind: 'order.send_confirmation' })

    await waitForStatus(confirmation, 'completed')
    // Several polls later the invoice job is still as it was enqueued: never claimed, no attempt spent.
    await delay(POLL_INTERVAL_MS * 6)
    expect(await readJob(invoice)).toMatchObject({ status: 'queued', attempt: 0, lockedBy: null, errors: [] })

    const everyKind = await startWorker()
    await waitForStatus(invoice, 'completed')
    expect(await readJob(invoice)).toMatchObject({ status: 'completed', attempt: 1, lockedBy: everyKind.id, errors: [] })
  })

  it('claims concurrency + prefetch jobs at once, heart-beats the buffered claims, and stop() gives them back at once for another worker', async () => {
    const gated = gatedMailKind()
    const keys = ['gated-1', 'gated-2', 'gated-3', 'gated-4', 'gated-5']
    const ids = await gated.enqueue(keys)
    const first = await startWorker({ kinds: [gated.kind], concurrency: 1, prefetch: 2 })
    await pollUntil('the first job runs', async () => gated.entered.length === 1, { intervalMs: 20 })

    const rows = await readJobs(ids)
    const claimed = rows.filter(row => row.status === 'running')
    expect(claimed.map(row => ({ attempt: row.attempt, lockedBy: row.lockedBy }))).toEqual(Array(3).fill({ attempt: 1, lockedBy: first.id }))
    expect(rows.filter(row => row.status !== 'running').map(row => ({ status: row.status, attempt: row.attempt, fence: row.fence })))
      .toEqual(Array(2).fill({ status: 'queued', attempt: 0, fence: null }))
    const running = claimed.find(row => (row.payload as { key: string }).key === gated.entered[0])!
    const buffered = claimed.filter(row => row !== running)

    // Waiting in the buffer is holding a claim: the heartbeat keeps it alive like a running one's.
    await pollUntil('a heartbeat has renewed the buffered claims', async () =>
      (await readJobs(buffered.map(row => row.id))).every(row => row.heartbeatAt!.getTime() > row.startedAt!.getTime()), { intervalMs: 20 })
    expect((await readJobs(buffered.map(row => row.id))).map(row => ({ status: row.status, fence: row.fence, lockedBy: row.lockedBy })))
      .toEqual(buffered.map(row => ({ status: 'running', fence: row.fence, lockedBy: first.id })))
    expect(gated.entered).toEqual([gated.entered[0]])

    // The running job has its grace period; the buffered ones, never started, go back at once.
    const stopping = stopWorker(first.worker, 5_000)
    await pollUntil('the buffered jobs are back in the queue', async () =>
      (await readJobs(buffered.map(row => row.id))).every(row => row.status === 'queued'), { intervalMs: 20 })
    for (const row of await readJobs(buffered.map(row => row.id))) {
      expect(row).toMatchObject({ status: 'queued', attempt: 0, lockedBy: null, heartbeatAt: null, errors: [], runAtAfterUpdateMs: 0 })
    }
    expect(await readJob(running.id)).toMatchObject({ status: 'running', attempt: 1, lockedBy: first.id })
    gated.open(gated.entered[0]!)
    await stopping
    expect(await readJob(running.id)).toMatchObject({ status: 'completed', attempt: 1, lockedBy: first.id, errors: [] })
    expect(gated.entered).toHaveLength(1)

    for (const key of keys) gated.open(key)
    const second = await startWorker({ kinds: [gated.kind] })
    await pollUntil('all five jobs are completed', async () => (await statusCounts()).completed === 5)
    const others = ids.filter(id => id !== running.id)
    expect((await readJobs(others)).map(row => ({ id: row.id, status: row.status, attempt: row.attempt, lockedBy: row.lockedBy, errors: row.errors })))
      .toEqual(others.map(id => ({ id, status: 'completed', attempt: 1, lockedBy: second.id, errors: [] })))
    expect(await rowsPerOrder(mailbox)).toEqual(onePerOrder(keys))
  })

  it('jobs claimed into the buffer while a heartbeat is on its way keep their claims and run', async () => {
    const gated = gatedMailKind()
    // Every heartbeat is answered late: from the first one on, one is always on its way.
    let heartbeatsSent = 0
    const slowHeartbeats = interceptStatements(db, async (text) => {
      if (!text.startsWith(HEARTBEAT_TEXT_START)) return
      heartbeatsSent++
      await delay(HEARTBEAT_REPLY_DELAY_MS)
    })
    const worker = await startWorker({ db: slowHeartbeats, kinds: [gated.kind], concurrency: 1, prefetch: 2 })
    const [firstId] = await gated.enqueue(['first'])
    await pollUntil('the first job runs', async () => gated.entered.length === 1, { intervalMs: 20 })
    await pollUntil('a heartbeat is on its way', async () => heartbeatsSent > 0, { intervalMs: 10 })
    const laterIds = await gated.enqueue(['second', 'third'])
    await pollUntil('the later jobs are claimed into the buffer', async () =>
      (await readJobs(laterIds)).every(row => row.status === 'running'), { intervalMs: 20 })
    // A heartbeat sent after their claim has been answered, so every one sent before it has been too.
    await pollUntil('a heartbeat sent after the claim has renewed them', async () =>
      (await readJobs(laterIds)).every(row => row.heartbeatAt!.getTime() > row.startedAt!.getTime()), { intervalMs: 20 })

    for (const key of ['first', 'second', 'third']) gated.open(key)
    await pollUntil('all three jobs are completed', async () => (await statusCounts()).completed === 3, { timeoutMs: 3_000 }).catch(() => {})
    const ids = [firstId!, ...laterIds]
    expect((await readJobs(ids)).map(row => ({ id: row.id, status: row.status, attempt: row.attempt, lockedBy: row.lockedBy })))
      .toEqual(ids.map(id => ({ id, status: 'completed', attempt: 1, lockedBy: worker.id })))
    expect([...gated.entered].sort()).toEqual(['first', 'second', 'third'])
    expect(await rowsPerOrder(mailbox)).toEqual(onePerOrder(['first', 'second', 'third']))
  })

  /** The suite's locks, with every acquire's key recorded in order. */
  function recordingAcquires() {
    const acquired: string[] = []
    const recordingLocks: Locks = {
      ...locks,
      async acquire(key, ttlMs) {
        acquired.push(key)
        return locks.acquire(key, ttlMs)
      },
    }
    return { acquired, recordingLocks }
  }

  it('the jobs of one batch on one order share one lock and run in turn: no lock_busy put-back, no attempt spent', async () => {
    const { orderIds } = await seedOrders(db, 5)
    const ids = await enqueueJobs(db, orderIds.flatMap(orderId => [orderJob(orderId), orderJob(orderId, { kind: 'order.issue_invoice' })]))
    const { acquired, recordingLocks } = recordingAcquires()
    // A job that found its order's lock busy would be put back for 5–10 s, long past this test's wait.
    await startWorker({ locks: recordingLocks, lockBusyDelayMs: 5_000 })
    await pollUntil('all ten jobs are completed', async () => (await statusCounts()).completed === 10, { timeoutMs: 4_000 })

    // A put-back pushes run_at past created_at (the same now() at enqueue) and gives the attempt back.
    expect((await readJobs(ids)).map(row => ({ id: row.id, status: row.status, attempt: row.attempt, errors: row.errors, runAtIsCreatedAt: row.runAt.getTime() === row.createdAt.getTime() })))
      .toEqual(ids.map(id => ({ id, status: 'completed', attempt: 1, errors: [], runAtIsCreatedAt: true })))
    expect([...acquired].sort()).toEqual(orderIds.map(orderId => `lock:order:${orderId}`).sort())
    expect(await rowsPerOrder(mailbox)).toEqual(onePerOrder(orderIds))
    expect(await rowsPerOrder(invoices)).toEqual(onePerOrder(orderIds))
    expect(await rowsPerOrder(sideEffects)).toEqual(onePerOrder(orderIds, 2))
    // Released after the commits: the next holder gets each lock at once.
    for (const orderId of orderIds) expect(await locks.acquire(`lock:order:${orderId}`, 1_000)).not.toBeNull()
  })

  it('a job claimed in a later batch for a resource this worker already holds shares its lock: the jobs run one at a time, none is put back', async () => {
    const resource = 'order:ord_shared'
    const lockKey = `lock:${resource}`
    const gated = gatedMailKind({ resource })
    const { acquired, recordingLocks } = recordingAcquires()
    await startWorker({ kinds: [gated.kind], locks: recordingLocks, lockBusyDelayMs: 5_000 })
    const batchIds = await gated.enqueue(['one', 'two'])
    await pollUntil('one of the batch runs', async () => gated.entered.length === 1, { intervalMs: 20 })
    expect((await readJobs(batchIds)).map(row => row.status)).toEqual(['running', 'running'])
    expect(await locks.acquire(lockKey, 1_000)).toBeNull()
    const [laterId] = await gated.enqueue(['three'])
    await pollUntil('the later job is claimed', async () => (await readJob(laterId!)).status === 'running', { intervalMs: 20 })

    // Each job starts only once the one before it has committed.
    const ids = [...batchIds, laterId!]
    const keyOf = new Map(ids.map((id, i) => [['one', 'two', 'three'][i]!, id]))
    for (let turn = 0; turn < 3; turn++) {
      expect(gated.entered).toHaveLength(turn + 1)
      gated.open(gated.entered[turn]!)
      await waitForStatus(keyOf.get(gated.entered[turn]!)!, 'completed')
      if (turn < 2) await pollUntil('the next job runs', async () => gated.entered.length === turn + 2, { intervalMs: 20 })
    }
    expect(gated.entered.slice(2)).toEqual(['three'])
    expect((await readJobs(ids)).map(row => ({ id: row.id, status: row.status, attempt: row.attempt, errors: row.errors, runAtIsCreatedAt: row.runAt.getTime() === row.createdAt.getTime() })))
      .toEqual(ids.map(id => ({ id, status: 'completed', attempt: 1, errors: [], runAtIsCreatedAt: true })))
    expect(acquired).toEqual([lockKey])
    // Released once the last holder is done, without being waited for.
    let token: string | null = null
    await pollUntil('the lock is released', async () => (token = await locks.acquire(lockKey, 1_000)) !== null, { intervalMs: 20 })
    await locks.release(lockKey, token!)
  })

  /** A worker of the gated kind whose first job's completion is held in flight: later completions queue into one batch behind it. */
  async function workerWithFirstCompletionHeld() {
    const gated = gatedMailKind()
    const hold = holdingFirstCompletion()
    const started = await startWorker({ db: hold.db, kinds: [gated.kind], heartbeatTimeoutMs: QUIET_HEARTBEAT_TIMEOUT_MS })
    const [firstId] = await gated.enqueue(['first'])
    gated.open('first')
    await hold.held
    return { gated, hold, started, firstId }
  }

  it('while one completion is in flight the freed slots keep running jobs, their completions leave together, and 40 jobs at concurrency 4 send one email each', async () => {
    const { orderIds } = await seedOrders(db, 40)
    const hold = holdingFirstCompletion()
    const started = await startWorker({ db: hold.db, concurrency: 4, prefetch: 8, heartbeatTimeoutMs: QUIET_HEARTBEAT_TIMEOUT_MS })
    const [firstId] = await enqueueJobs(db, [orderJob(orderIds[0]!)])
    await hold.held
    expect(hold.heldJobId()).toBe(firstId)
    const laterIds = await enqueueJobs(db, orderIds.slice(1).map(orderId => orderJob(orderId)))

    // A finished handler frees its slot: all 40 run (ten times the concurrency) while the first completion waits.
    await pollUntil('every job has run its handler', async () => started.worker.running === 40)
    expect(await statusCounts()).toEqual({ running: 40 })
    expect(await db.select({ count: count() }).from(mailbox)).toEqual([{ count: 0 }])
    hold.release()

    await pollUntil('all 40 jobs are completed', async () => (await statusCounts()).completed === 40)
    const ids = [firstId!, ...laterIds]
    expect((await readJobs(ids)).map(row => ({ id: row.id, status: row.status, attempt: row.attempt, errors: row.errors, lockedBy: row.lockedBy })))
      .toEqual(ids.map(id => ({ id, status: 'completed', attempt: 1, errors: [], lockedBy: started.id })))
    // The 39 completions that queued behind the first went out as one transaction: one now() for all.
    expect(await distinctCompletionTimes(laterIds)).toBe(1)
    expect(await rowsPerOrder(mailbox)).toEqual(onePerOrder(orderIds))
    expect(await rowsPerOrder(sideEffects)).toEqual(onePerOrder(orderIds))
  })

  it('a completion batch in which one claim was lost completes the others and writes nothing for the lost one', async () => {
    const { gated, hold, started, firstId } = await workerWithFirstCompletionHeld()
    expect(hold.heldJobId()).toBe(firstId)

    const [keptId1, fencedId, keptId2] = await gated.enqueue(['kept-1', 'fenced', 'kept-2'])
    await pollUntil('the three handlers wait at their gates', async () => gated.entered.length === 4, { intervalMs: 20 })
    for (const key of ['kept-1', 'fenced', 'kept-2']) gated.open(key)
    await pollUntil('their completions wait behind the first', async () => gated.completing.length === 4, { intervalMs: 20 })
    // As a rescue and another worker's claim would: a new fence while its completion waits in the batch.
    await db.update(jobs).set({ fence: sql`nextval('job_fence_seq')` }).where(eq(jobs.id, fencedId!))
    const fencedBefore = await readJob(fencedId!)
    hold.release()

    await pollUntil('the worker has settled every job', async () => started.worker.running === 0)
    const completedIds = [firstId!, keptId1!, keptId2!]
    expect((await readJobs(completedIds)).map(row => ({ id: row.id, status: row.status, attempt: row.attempt, errors: row.errors })))
      .toEqual(completedIds.map(id => ({ id, status: 'completed', attempt: 1, errors: [] })))
    expect(await distinctCompletionTimes([keptId1!, keptId2!])).toBe(1)
    expect(await readJob(fencedId!)).toEqual(fencedBefore)
    expect(await rowsPerOrder(mailbox)).toEqual(onePerOrder(['first', 'kept-1', 'kept-2']))
  })

  it('a completion batch in which one effect fails completes the others at attempt 1; the failing job is retried alone and dead-lettered after its attempts', async () => {
    const { gated, hold, started, firstId } = await workerWithFirstCompletionHeld()

    const [keptId1, keptId2] = await gated.enqueue(['kept-1', 'kept-2'])
    const [failingId] = await gated.enqueue(['failing'], { tenantId: null, maxAttempts: 2 })
    await pollUntil('the three handlers wait at their gates', async () => gated.entered.length === 4, { intervalMs: 20 })
    for (const key of ['kept-1', 'failing', 'kept-2']) gated.open(key)
    await pollUntil('their completions wait behind the first', async () => gated.completing.length === 4, { intervalMs: 20 })
    hold.release()

    await waitForStatus(failingId!, 'dead_letter')
    const completedIds = [firstId!, keptId1!, keptId2!]
    expect((await readJobs(completedIds)).map(row => ({ id: row.id, status: row.status, attempt: row.attempt, errors: row.errors })))
      .toEqual(completedIds.map(id => ({ id, status: 'completed', attempt: 1, errors: [] })))
    const failed = await readJob(failingId!)
    const message = 'database error 23502 not_null_violation'
    expect(failed).toMatchObject({ status: 'dead_letter', attempt: 2, lastError: message })
    expect(failed.errors.map(withoutTimes)).toEqual([1, 2].map(attempt => ({ attempt, errorClass: 'retryable', message, worker: started.id })))
    expect(gated.completing.filter(key => key === 'failing')).toHaveLength(2)
    expect(await rowsPerOrder(mailbox)).toEqual(onePerOrder(['first', 'kept-1', 'kept-2']))
  })

  it('a job that always snoozes is put back snooze.max times without spending an attempt, then each snooze is a failed attempt until it dead-letters', async () => {
    let runs = 0
    const alwaysSnoozes = defineJobKind({
      kind: 'test.always_snoozes',
      payload: z.object({}).strict(),
      async run() {
        runs++
        throw new SnoozeJob(10, 'always busy')
      },
    })
    const started = await startWorker({ kinds: [alwaysSnoozes], snooze: { max: 2, maxDelayMs: 60_000 }, backoff: { baseMs: 20, capMs: 50 } })
    const [id] = await enqueueJobs(db, [{ kind: 'test.always_snoozes', dedupeKey: 'always', payload: {}, maxAttempts: 2 }])

    await waitForStatus(id!, 'dead_letter')
    const message = 'RetryableJobError: snoozed 2 times (JOB_MAX_SNOOZES), now counted as a failed attempt: always busy; run again in 10 ms'
    const row = await readJob(id!)
    expect(row).toMatchObject({ status: 'dead_letter', attempt: 2, snoozes: 2, lastError: message })
    expect(row.errors.map(withoutTimes)).toEqual([1, 2].map(attempt => ({ attempt, errorClass: 'retryable', message, worker: started.id })))
    // Two snoozes given back, then two attempts spent.
    expect(runs).toBe(4)
  })

  it('a snooze asking for 2^40 ms is put back for snooze.maxDelayMs, and the worker keeps working', async () => {
    let runs = 0
    const snoozesForAges = defineJobKind({
      kind: 'test.snoozes_for_ages',
      payload: z.object({}).strict(),
      async run({ complete }) {
        if (++runs === 1) throw new SnoozeJob(2 ** 40, 'provider asked for ages')
        await complete()
      },
    })
    const [confirmation] = createJobKinds({ payments: createMockpayProvider(db) }).filter(kind => kind.kind === 'order.send_confirmation')
    await startWorker({ kinds: [snoozesForAges, confirmation!], snooze: { max: 5, maxDelayMs: 700 } })
    const [id] = await enqueueJobs(db, [{ kind: 'test.snoozes_for_ages', dedupeKey: 'ages', payload: {} }])

    await pollUntil('the job has snoozed', async () => (await readJob(id!)).snoozes === 1, { intervalMs: 20 })
    expect(await readJob(id!)).toMatchObject({ status: 'queued', attempt: 0, snoozes: 1, lockedBy: null, runAtAfterUpdateMs: 700, errors: [] })
    const { orderId } = await seedOrder()
    const orderJobId = await enqueueOne({ orderId })
    await waitForStatus(orderJobId, 'completed')

    await waitForStatus(id!, 'completed')
    expect(await readJob(id!)).toMatchObject({ status: 'completed', attempt: 1, snoozes: 1, errors: [] })
    expect(runs).toBe(2)
    expect(await statusCounts()).toEqual({ completed: 2 })
    expect(await mailFor(orderId)).toHaveLength(1)
  })

  it('jobs of several kinds sharing a loader in one batch each get their own order, read once for the batch; a missing order fails alone', async () => {
    const a = await seedOrder()
    const b = await seedOrder()
    const c = await seedOrder()
    await db.update(orders).set({ amount: 99_000 }).where(eq(orders.id, b.orderId))
    await db.update(orders).set({ amount: 7_500, customer: { email: 'c@example.com' } }).where(eq(orders.id, c.orderId))
    const missingOrderId = newId('ord')
    const ids = await enqueueJobs(db, [
      orderJob(a.orderId),
      orderJob(b.orderId, { kind: 'order.issue_invoice' }),
      orderJob(c.orderId),
      orderJob(c.orderId, { kind: 'order.issue_invoice' }),
      orderJob(missingOrderId, { maxAttempts: 1 }),
    ])
    let orderReads = 0
    const counting = interceptStatements(db, (text) => {
      if (text.includes('from "orders"')) orderReads++
    })
    // Started after the enqueue: its first claim takes all five in one batch.
    await startWorker({ db: counting })
    await pollUntil('every job is settled', async () => {
      const counts = await statusCounts()
      return counts.completed === 4 && counts.dead_letter === 1
    })

    expect(orderReads).toBe(1)
    expect(await readJob(ids[4]!)).toMatchObject({ status: 'dead_letter', attempt: 1, lastError: `RetryableJobError: order ${missingOrderId} not found` })
    const emails = await db.select({ orderId: mailbox.orderId, tenantId: mailbox.tenantId, to: mailbox.to, subject: mailbox.subject, body: mailbox.body }).from(mailbox)
    expect(emails.sort((x, y) => x.orderId!.localeCompare(y.orderId!))).toEqual([
      { orderId: a.orderId, tenantId: a.tenantId, to: 'shopper0@example.com', subject: `Order ${a.orderId} confirmed`, body: `Thank you. We received IDR 150,000 for order ${a.orderId} (cart cart_${a.orderId}).` },
      { orderId: c.orderId, tenantId: c.tenantId, to: 'c@example.com', subject: `Order ${c.orderId} confirmed`, body: `Thank you. We received IDR 7,500 for order ${c.orderId} (cart cart_${c.orderId}).` },
    ].sort((x, y) => x.orderId.localeCompare(y.orderId)))
    const invoiceRows = await db.select({ orderId: invoices.orderId, tenantId: invoices.tenantId, amount: invoices.amount, currency: invoices.currency }).from(invoices)
    expect(invoiceRows.sort((x, y) => x.orderId.localeCompare(y.orderId))).toEqual([
      { orderId: b.orderId, tenantId: b.tenantId, amount: 99_000, currency: 'IDR' },
      { orderId: c.orderId, tenantId: c.tenantId, amount: 7_500, currency: 'IDR' },
    ].sort((x, y) => x.orderId.localeCompare(y.orderId)))
  })

  it('a committed enqueue wakes an idle worker by itself (its after-commit hook), long before the next poll', async () => {
    const { orderId } = await seedOrder()
    await startWorker({ pollIntervalMs: SLOW_POLL_INTERVAL_MS })
    // Let the claim made at start find nothing: from then on only a wake-up brings the job in early.
    await delay(500)
    const id = await enqueueOne({ orderId })

    await waitForStatus(id, 'completed', SLOW_POLL_INTERVAL_MS + 5_000)
    const row = await readJob(id)
    expect(row.startedAfterCreatedMs!).toBeLessThan(5_000)
    expect(await mailFor(orderId)).toHaveLength(1)
  })

  // Behind a transaction pooler without a direct URL no LISTEN outlives its transaction: workers poll.
  if (driver === 'postgres' && postgresTopology === 'pgbouncer') {
    it('behind a transaction pooler without a direct URL there is no LISTEN: jobs are found by this process\'s wake-ups and polls', async () => {
      expect(handle.notifications).toBeUndefined()
      const { orderId } = await seedOrder()
      await startWorker({ pollIntervalMs: 200 })
      const id = await enqueueOne({ orderId })

      await waitForStatus(id, 'completed', 5_000)
      expect(await mailFor(orderId)).toHaveLength(1)
    })
  }

  // Only Postgres carries a wake-up to other processes; PGlite is one process.
  if (driver === 'postgres' && postgresTopology !== 'pgbouncer') {
    it('a NOTIFY alone, as another process sends it, wakes an idle worker', async () => {
      const { orderId } = await seedOrder()
      await startWorker({ pollIntervalMs: SLOW_POLL_INTERVAL_MS })
      await delay(500)
      const id = await enqueueOne({ orderId })
      await handle.notifications!.notify(JOBS_CHANNEL)

      await waitForStatus(id, 'completed', SLOW_POLL_INTERVAL_MS + 5_000)
      expect((await readJob(id)).startedAfterCreatedMs!).toBeLessThan(5_000)
    })
  }
}

describeOnBothBackends('worker contract', workerContract)
