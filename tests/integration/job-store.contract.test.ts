import { randomUUID } from 'node:crypto'
import { setTimeout as delay } from 'node:timers/promises'
import { and, asc, count, eq, inArray, sql } from 'drizzle-orm'
import type { PgColumn } from 'drizzle-orm/pg-core'
import fc from 'fast-check'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest'
import type { Database } from '@idempotent-checkout/db-kit'
import { describeDatabaseError, transaction } from '@idempotent-checkout/db-kit'
import { newId } from '../../server/db/ids'
import { invoices, jobs, mailbox, orders, sideEffects, tenants } from '../../server/db/schema'
import { idempotencyRecords, createMemoryLocks } from 'nuxt-idempotency/core'
import { rescueStaleJobs } from '../../server/jobs/rescue'
import { deleteCompletedJobs } from '../../server/jobs/retention'
import { deleteExpiredIdempotencyRecords } from '../../server/maintenance/records-retention'
import { type ClaimedJob, claimStatements, createJobStore, type JobEffect, type JobRow, type JobStore } from '../../server/jobs/store'
import type { Locks } from 'nuxt-idempotency/core'
import { markedEffect, type SideEffect } from '../../server/orders/effects'
import { applyPaymentStatus, type PaymentStatus, paymentStatusPrecedence } from '../../server/orders/payment-state'
import { type DatabaseDriver, openSuiteDatabase, type SuiteDatabase } from '../support/databases'
import { type EnqueueInput, enqueueJobs, enqueueTestJob, orderJob, seedOrders } from '../support/jobs'
import { pollUntil } from '../support/poll'
import { describeWithServices } from '../support/services'

const WORKER_A = 'worker-a'
const WORKER_B = 'worker-b'
const WORKER_C = 'worker-c'
/** Long enough that a job scheduled this far ahead cannot become due during a test. */
const FAR_FUTURE_MS = 60_000
const SHORT_DELAY_MS = 300
const RETRY_IN_MS = 30_000
/** run_at and updated_at come from one statement's now(): only rounding may separate them from retryInMs. */
const RETRY_TOLERANCE_MS = 50
const HEARTBEAT_TIMEOUT_MS = 5_000
/** Heartbeat ages on either side of the timeout. */
const STALE_HEARTBEAT_SECONDS = 10
const RECENT_HEARTBEAT_SECONDS = 2
const RETENTION_DAYS = 30
const CONCURRENT_CLAIMERS = 8
const CLAIM_LIMIT = 5
const EFFECT_KINDS = ['order.issue_invoice', 'order.send_confirmation']
/** A delay past Postgres' int in milliseconds (2³¹ − 1 ms ≈ 24.8 days): the store keeps it within. */
const HUGE_DELAY_MS = 2 ** 40
const MAX_DELAY_MS = 2 ** 31 - 1

/**
 * The behaviour the job store, the outbox and the payment state machine must have on every
 * database the app runs on. `concurrentTransactions` is false for PGlite, whose single connection
 * runs one transaction at a time.
 */
function jobStoreContract(driver: DatabaseDriver, concurrentTransactions: boolean) {
  let database: SuiteDatabase
  let db: Database
  let store: JobStore
  let dedupeCounter = 0

  beforeAll(async () => {
    // One connection per concurrent claimer, so the race happens in Postgres, not in the pool queue.
    database = await openSuiteDatabase(driver, 'job_store', { poolSize: CONCURRENT_CLAIMERS + 4 })
    db = database.handle.db
    store = createJobStore(db)
  }, 60_000)

  afterAll(async () => {
    await database?.close()
  })

  beforeEach(async () => {
    // claim() takes any due job and retention deletes any expired row: every test starts empty.
    await db.delete(jobs)
    await db.delete(idempotencyRecords)
  })

  const jobInput = (overrides: Partial<EnqueueInput> = {}): EnqueueInput => {
    dedupeCounter++
    return { kind: 'contract.noop', dedupeKey: `dedupe-${dedupeCounter}`, payload: { n: dedupeCounter }, ...overrides }
  }

  async function enqueue(overrides: Partial<EnqueueInput> = {}): Promise<string> {
    const id = await enqueueTestJob(db, jobInput(overrides))
    expect(id).toMatch(/^job_/)
    return id!
  }

  async function find(id: string): Promise<JobRow> {
    const row = await store.find(id)
    expect(row, `job ${id}`).toBeDefined()
    return row!
  }

  /** Claims everything due, which must be exactly the job `id`. */
  async function claimOnly(id: string, workerId = WORKER_A): Promise<ClaimedJob> {
    const claimed = await store.claim(workerId, 100)
    expect(claimed.map(job => job.id)).toEqual([id])
    return claimed[0]!
  }

  const enqueueAndClaim = async (overrides: Partial<EnqueueInput> = {}, workerId = WORKER_A) =>
    claimOnly(await enqueue(overrides), workerId)

  async function completedJob(): Promise<string> {
    const job = await enqueueAndClaim()
    expect(await store.complete(job, async () => {})).toBe(true)
    return job.id
  }

  /** later - earlier in milliseconds, computed by the database from the job's own columns. */
  async function millisBetween(id: string, later: PgColumn, earlier: PgColumn): Promise<number> {
    const [row] = await db.select({ ms: sql<number>`extract(epoch from ${later} - ${earlier}) * 1000`.mapWith(Number) })
      .from(jobs).where(eq(jobs.id, id))
    return row!.ms
  }

  /** As if the worker had last heart-beaten `seconds` ago. */
  async function ageHeartbeat(id: string, seconds: number): Promise<void> {
    await db.update(jobs).set({ heartbeatAt: sql`now() - (${seconds}::int * interval '1 second')` }).where(eq(jobs.id, id))
  }

  async function ageCompletion(id: string, days: number): Promise<void> {
    await db.update(jobs).set({ completedAt: sql`now() - (${days}::int * interval '1 day')` }).where(eq(jobs.id, id))
  }

  const remainingJobIds = async () => (await db.select({ id: jobs.id }).from(jobs)).map(row => row.id).sort()

  async function jobStatusCountsOf(ids: string[]): Promise<Record<string, number>> {
    const rows = await db.select({ status: jobs.status, count: count() }).from(jobs).where(inArray(jobs.id, ids)).groupBy(jobs.status)
    return Object.fromEntries(rows.map(row => [row.status, row.count]))
  }

  /** Backends of this database blocked on a lock held by another transaction. */
  async function transactionsWaitingOnLocks(): Promise<number> {
    const [row] = await db.select({ waiting: sql<number>`count(*)::int`.mapWith(Number) }).from(sql`pg_stat_activity`)
      .where(sql`datname = current_database() and wait_event_type = 'Lock'`)
    return row!.waiting
  }

  /** Business work that writes a mailbox row for `orderId`, so a test can see whether it committed. */
  const sendEmail = (orderId: string) => async (tx: Database) => {
    await tx.insert(mailbox).values({
      id: newId('mail'), tenantId: 'ten_contract', orderId, to: 'shopper@example.com', subject: 'Order confirmed', body: `Order ${orderId}`,
    })
  }

  async function emailsFor(orderId: string): Promise<number> {
    const [row] = await db.select({ emails: count() }).from(mailbox).where(eq(mailbox.orderId, orderId))
    return row!.emails
  }

  describe('enqueueJob', () => {
    it('commits the job with the business write, and rolls it back with it', async () => {
      const failure = new Error('order validation failed after the insert')
      let rolledBackOrderId = ''
      let rolledBackTenantId = ''
      await expect(transaction(db, async (tx) => {
        const { tenantId, orderIds: [orderId] } = await seedOrders(tx, 1)
        rolledBackOrderId = orderId!
        rolledBackTenantId = tenantId
        expect(await enqueueTestJob(tx, orderJob(orderId!))).toMatch(/^job_/)
        throw failure
      })).rejects.toBe(failure)
      expect(await db.select().from(tenants).where(eq(tenants.id, rolledBackTenantId))).toEqual([])
      expect(await db.select().from(orders).where(eq(orders.id, rolledBackOrderId))).toEqual([])
      expect(await db.select().from(jobs).where(eq(jobs.dedupeKey, rolledBackOrderId))).toEqual([])

      const { committedOrderId, jobId } = await transaction(db, async (tx) => {
        const { orderIds: [orderId] } = await seedOrders(tx, 1)
        return { committedOrderId: orderId!, jobId: await enqueueTestJob(tx, orderJob(orderId!)) }
      })
      expect(await db.select({ id: orders.id }).from(orders).where(eq(orders.id, committedOrderId))).toEqual([{ id: committedOrderId }])
      expect(await db.select({ id: jobs.id, kind: jobs.kind, resourceId: jobs.resourceId, payload: jobs.payload })
        .from(jobs).where(eq(jobs.dedupeKey, committedOrderId))).toEqual([
        { id: jobId, kind: 'order.send_confirmation', resourceId: `order:${committedOrderId}`, payload: { orderId: committedOrderId } },
      ])
    })

    it('enqueues a (kind, dedupe key) once, even after the job completed; another kind is another job', async () => {
      const first = await enqueueTestJob(db, { kind: 'order.send_confirmation', dedupeKey: 'ord_dedupe', payload: { orderId: 'ord_dedupe', copy: 1 } })
      expect(first).toMatch(/^job_/)
      expect(await enqueueTestJob(db, { kind: 'order.send_confirmation', dedupeKey: 'ord_dedupe', payload: { orderId: 'ord_dedupe', copy: 2 } })).toBeUndefined()

      const job = await claimOnly(first!)
      expect(await store.complete(job, async () => {})).toBe(true)
      expect(await enqueueTestJob(db, { kind: 'order.send_confirmation', dedupeKey: 'ord_dedupe', payload: { orderId: 'ord_dedupe', copy: 3 } })).toBeUndefined()

      const invoice = await enqueueTestJob(db, { kind: 'order.issue_invoice', dedupeKey: 'ord_dedupe', payload: { orderId: 'ord_dedupe' } })
      expect(invoice).toMatch(/^job_/)
      expect(invoice).not.toBe(first)
      expect(await db.select({ id: jobs.id, kind: jobs.kind, payload: jobs.payload }).from(jobs)
        .where(eq(jobs.dedupeKey, 'ord_dedupe')).orderBy(asc(jobs.kind))).toEqual([
        { id: invoice, kind: 'order.issue_invoice', payload: { orderId: 'ord_dedupe' } },
        { id: first, kind: 'order.send_confirmation', payload: { orderId: 'ord_dedupe', copy: 1 } },
      ])
    })

    it('stores a queued job with no attempt, eight attempts allowed, no errors and no fence, due at once', async () => {
      const id = await enqueue({ resourceId: 'order:ord_defaults', requestId: 'req_defaults', idempotencyKey: 'key-defaults' })
      const row = await find(id)
      expect(row).toMatchObject({
        kind: 'contract.noop',
        status: 'queued',
        attempt: 0,
        maxAttempts: 8,
        errors: [],
        lastError: null,
        fence: null,
        lockedBy: null,
        faults: null,
        startedAt: null,
        heartbeatAt: null,
        completedAt: null,
        resourceId: 'order:ord_defaults',
        requestId: 'req_defaults',
        idempotencyKey: 'key-defaults',
      })
      expect(row.runAt.getTime()).toBe(row.createdAt.getTime())
    })

    it('holds a delayed job back until run_at', async () => {
      const later = await enqueue({ delayMs: FAR_FUTURE_MS })
      expect(await millisBetween(later, jobs.runAt, jobs.createdAt)).toBe(FAR_FUTURE_MS)
      expect(await store.claim(WORKER_A, 10)).toEqual([])

      const soon = await enqueue({ delayMs: SHORT_DELAY_MS })
      expect(await millisBetween(soon, jobs.runAt, jobs.createdAt)).toBe(SHORT_DELAY_MS)
      let claimed: ClaimedJob[] = []
      await pollUntil('the delayed job becomes claimable', async () => {
        claimed = await store.claim(WORKER_A, 10)
        return claimed.length > 0
      })
      expect(claimed.map(job => job.id)).toEqual([soon])
      // Whenever the poll got it, the database never handed it out before its run_at.
      expect(await millisBetween(soon, jobs.startedAt, jobs.runAt)).toBeGreaterThanOrEqual(0)
      expect(claimed[0]!.queueWaitMs).toBeGreaterThanOrEqual(0)
      expect((await find(later)).status).toBe('queued')
    })
  })

  describe('claim', () => {
    it('marks the job running for the worker under a fresh fence', async () => {
      const id = await enqueue()
      const job = await claimOnly(id)
      expect(job).toMatchObject({ id, status: 'running', attempt: 1, lockedBy: WORKER_A })
      expect(typeof job.fence).toBe('number')
      expect(job.fence).toBeGreaterThan(0)
      expect(job.startedAt).toBeInstanceOf(Date)
      expect(job.heartbeatAt!.getTime()).toBe(job.startedAt!.getTime())
      expect(job.queueWaitMs).toBeGreaterThanOrEqual(0)

      const { queueWaitMs: _queueWaitMs, ...claimedColumns } = job
      expect(await find(id)).toEqual(claimedColumns)
    })

    it('draws strictly increasing fences, also when a put-back job is claimed again', async () => {
      const ids = await enqueueJobs(db, [jobInput(), jobInput(), jobInput()])
      const claims: ClaimedJob[] = []
      for (let i = 0; i < ids.length; i++) claims.push(...await store.claim(WORKER_A, 1))
      expect(claims.map(job => job.id).sort()).toEqual([...ids].sort())
      for (let i = 1; i < claims.length; i++) expect(claims[i]!.fence).toBeGreaterThan(claims[i - 1]!.fence)

      expect(await store.putBack(claims[0]!, 0)).toBe(true)
      const again = await claimOnly(claims[0]!.id, WORKER_B)
      expect(again.fence).toBeGreaterThan(claims[2]!.fence)
      expect(again.attempt).toBe(1)
    })

    it('claims at most `limit` jobs, the earliest run_at first, returns them in that order, and never claims a running job again', async () => {
      const ids = await enqueueJobs(db, Array.from({ length: 5 }, () => jobInput()))
      // Oldest first: ids[3], ids[0], ids[4], ids[1], ids[2].
      const dueSecondsAgo = [40, 20, 10, 50, 30]
      for (const [i, id] of ids.entries()) {
        await db.update(jobs).set({ runAt: sql`now() - (${dueSecondsAgo[i]!}::int * interval '1 second')` }).where(eq(jobs.id, id))
      }

      const first = await store.claim(WORKER_A, 2)
      expect(first.map(job => job.id)).toEqual([ids[3]!, ids[0]!])
      const rest = await store.claim(WORKER_B, 10)
      expect(rest.map(job => job.id)).toEqual([ids[4]!, ids[1]!, ids[2]!])
      expect(await store.claim(WORKER_C, 10)).toEqual([])

      for (const job of first) expect(await find(job.id)).toMatchObject({ status: 'running', lockedBy: WORKER_A, fence: job.fence, attempt: 1 })
    })

    it('claims from a backlog through the ready index in run_at order and stops at the limit, also in the generic plan a prepared claim settles on', async () => {
      // 200 due jobs, each due at its own time, as orders enqueue them; statistics from an empty queue.
      await db.execute(sql`analyze ${jobs}`)
      await enqueueJobs(db, Array.from({ length: 200 }, () => jobInput()))
      await db.update(jobs).set({ runAt: sql`now() - random() * interval '1 minute'` })
      const literal = (value: unknown) => (value === null ? 'null' : typeof value === 'number' ? String(value) : `'${String(value).replaceAll('\'', '\'\'')}'`)
      const [plan, claim] = claimStatements(db, { workerId: WORKER_A, limit: CLAIM_LIMIT, kinds: null })
      const explained = await transaction(db, async (tx) => {
        await tx.execute(sql`set local plan_cache_mode = force_generic_plan`)
        await tx.execute(sql.raw(plan!.text))
        await tx.execute(sql.raw(`prepare generic_claim as ${claim!.text}`))
        const result = await tx.execute(sql.raw(`explain (analyze, costs off, timing off) execute generic_claim(${claim!.params.map(literal).join(', ')})`)) as unknown
        await tx.execute(sql`deallocate generic_claim`)
        return (Array.isArray(result) ? result : (result as { rows: unknown[] }).rows).map(row => Object.values(row as object)[0]).join('\n')
      })
      const indexRead = explained.match(/Index Scan using jobs_ready_idx on jobs .*actual rows=(\d+)/)
      expect(indexRead, explained).not.toBeNull()
      // An incremental sort reads its first 32 rows, and one more to end their group; a sort of the backlog reads all 200.
      expect(Number(indexRead![1])).toBeLessThanOrEqual(33)
    })

    it('claims only the kinds asked for, every kind when none are named, and nothing for an empty list', async () => {
      const [a1, b, c, a2] = await enqueueJobs(db, [
        jobInput({ kind: 'contract.kind-a' }), jobInput({ kind: 'contract.kind-b' }), jobInput({ kind: 'contract.kind-c' }), jobInput({ kind: 'contract.kind-a' }),
      ])
      expect(await store.claim(WORKER_A, 10, [])).toEqual([])
      expect((await store.claim(WORKER_A, 10, ['contract.kind-b', 'contract.unknown'])).map(job => job.id)).toEqual([b])
      expect((await store.claim(WORKER_B, 10, ['contract.kind-a'])).map(job => job.id).sort()).toEqual([a1!, a2!].sort())
      expect((await store.claim(WORKER_C, 10)).map(job => job.id)).toEqual([c])
      expect(await store.claim(WORKER_C, 10)).toEqual([])
      expect((await store.list({ limit: 10 })).map(row => [row.id, row.status, row.lockedBy]).sort()).toEqual([
        [a1, 'running', WORKER_B], [b, 'running', WORKER_A], [c, 'running', WORKER_C], [a2, 'running', WORKER_B],
      ].sort())
    })

    if (concurrentTransactions) it('passes over a job whose row another transaction holds locked, without waiting for it', async () => {
      const [lockedJob, nextJob] = await enqueueJobs(db, [jobInput(), jobInput()])
      await db.update(jobs).set({ runAt: sql`now() - interval '1 minute'` }).where(eq(jobs.id, lockedJob!))
      let letHolderFinish!: () => void
      const holderMayFinish = new Promise<void>((resolve) => { letHolderFinish = resolve })
      let reportLocked!: () => void
      const rowLocked = new Promise<void>((resolve) => { reportLocked = resolve })
      const holder = db.transaction(async (tx) => {
        await tx.select({ id: jobs.id }).from(jobs).where(eq(jobs.id, lockedJob!)).for('update')
        reportLocked()
        await holderMayFinish
      })
      await rowLocked

      let claimSettled = false
      const claiming = store.claim(WORKER_B, 1).finally(() => { claimSettled = true })
      let waitedOnLock = false
      await pollUntil('the claim returns or blocks on the locked row', async () => {
        if (claimSettled) return true
        waitedOnLock = (await transactionsWaitingOnLocks()) > 0
        return waitedOnLock
      })
      letHolderFinish()
      await holder
      const claimed = await claiming

      expect(waitedOnLock).toBe(false)
      expect(claimed.map(job => job.id)).toEqual([nextJob])
      expect((await find(lockedJob!)).status).toBe('queued')
      expect((await claimOnly(lockedJob!, WORKER_C)).attempt).toBe(1)
    })

    if (concurrentTransactions) it(`gives ${CONCURRENT_CLAIMERS} concurrent claimers disjoint jobs, each claimed once`, async () => {
      const ids = await enqueueJobs(db, Array.from({ length: CONCURRENT_CLAIMERS * CLAIM_LIMIT }, () => jobInput()))
      const claims = await Promise.all(Array.from({ length: CONCURRENT_CLAIMERS }, (_, i) => store.claim(`worker-${i}`, CLAIM_LIMIT)))

      // SKIP LOCKED: a claimer passes over rows another is claiming and takes the next ones.
      expect(claims.map(claimed => claimed.length)).toEqual(Array(CONCURRENT_CLAIMERS).fill(CLAIM_LIMIT))
      const claimedIds = claims.flat().map(job => job.id)
      expect(new Set(claimedIds).size).toBe(ids.length)
      expect([...claimedIds].sort()).toEqual([...ids].sort())
      expect(new Set(claims.flat().map(job => job.fence)).size).toBe(ids.length)

      const rows = await store.list({ limit: 100 })
      expect(rows).toHaveLength(ids.length)
      const claimerOf = new Map(claims.flatMap((claimed, i) => claimed.map(job => [job.id, `worker-${i}`] as const)))
      for (const row of rows) expect(row).toMatchObject({ status: 'running', attempt: 1, lockedBy: claimerOf.get(row.id) })
    })
  })

  describe('heartbeat', () => {
    it('moves heartbeat_at forward for the current claim', async () => {
      const job = await enqueueAndClaim()
      expect((await store.heartbeatAll([job])).has(job.fence)).toBe(true)
      expect((await find(job.id)).heartbeatAt!.getTime()).toBeGreaterThan(job.heartbeatAt!.getTime())
    })

    it('heartbeatAll renews every current claim in one statement and answers their fences; superseded and finished claims are left alone', async () => {
      const current = await enqueueAndClaim()
      const superseded = await enqueueAndClaim()
      expect(await store.putBack(superseded, 0)).toBe(true)
      const reclaimed = await claimOnly(superseded.id, WORKER_B)
      const finished = await enqueueAndClaim()
      expect(await store.completeWith(finished)).toBe(true)
      const finishedBefore = await find(finished.id)
      // Separate statements a few milliseconds apart: PGlite's clock can give two quick ones the same time.
      await delay(5)

      expect(await store.heartbeatAll([current, superseded, reclaimed, finished])).toEqual(new Set([current.fence, reclaimed.fence]))
      expect((await find(current.id)).heartbeatAt!.getTime()).toBeGreaterThan(current.heartbeatAt!.getTime())
      expect((await find(reclaimed.id)).heartbeatAt!.getTime()).toBeGreaterThan(reclaimed.heartbeatAt!.getTime())
      expect(await find(finished.id)).toEqual(finishedBefore)

      expect(await store.heartbeatAll([superseded, finished])).toEqual(new Set())
      expect(await store.heartbeatAll([])).toEqual(new Set())
      expect((await store.heartbeatAll([superseded])).has(superseded.fence)).toBe(false)
      expect((await store.heartbeatAll([reclaimed])).has(reclaimed.fence)).toBe(true)
    })
  })

  describe('complete', () => {
    it('commits the work and the completion together, once', async () => {
      const job = await enqueueAndClaim()
      const orderId = newId('ord')
      expect(await store.complete(job, sendEmail(orderId))).toBe(true)
      expect(await emailsFor(orderId)).toBe(1)
      const row = await find(job.id)
      expect(row).toMatchObject({ status: 'completed', lastError: null, fence: job.fence, attempt: 1 })
      expect(row.completedAt).toBeInstanceOf(Date)

      const work = vi.fn(sendEmail(orderId))
      expect(await store.complete(job, work)).toBe(false)
      expect(work).not.toHaveBeenCalled()
      expect(await emailsFor(orderId)).toBe(1)
    })

    it('rolls the work back and keeps the claim when the work throws', async () => {
      const job = await enqueueAndClaim()
      const orderId = newId('ord')
      const failure = new Error('mail server refused the message')
      await expect(store.complete(job, async (tx) => {
        await sendEmail(orderId)(tx)
        throw failure
      })).rejects.toBe(failure)
      expect(await emailsFor(orderId)).toBe(0)
      expect(await find(job.id)).toMatchObject({ status: 'running', fence: job.fence, completedAt: null })

      expect(await store.complete(job, sendEmail(orderId))).toBe(true)
      expect(await emailsFor(orderId)).toBe(1)
    })

    it('fences out a stale claim: no work, no heartbeat, no failure, no put-back', async () => {
      const stale = await enqueueAndClaim()
      expect(await store.putBack(stale, 0)).toBe(true)
      const current = await claimOnly(stale.id, WORKER_B)
      expect(current.fence).toBeGreaterThan(stale.fence)
      const before = await find(stale.id)

      const orderId = newId('ord')
      const work = vi.fn(sendEmail(orderId))
      expect(await store.complete(stale, work)).toBe(false)
      expect(work).not.toHaveBeenCalled()
      expect(await emailsFor(orderId)).toBe(0)
      expect((await store.heartbeatAll([stale])).has(stale.fence)).toBe(false)
      expect(await store.fail(stale, { errorClass: 'retryable', message: 'stale worker failed', retryInMs: 0, permanent: false })).toBeUndefined()
      expect(await store.fail(stale, { errorClass: 'permanent', message: 'stale worker gave up', retryInMs: 0, permanent: true })).toBeUndefined()
      expect(await store.putBack(stale, 0, { clearFaults: true })).toBe(false)
      expect(await find(stale.id)).toEqual(before)

      expect(await store.complete(current, sendEmail(orderId))).toBe(true)
      expect(await emailsFor(orderId)).toBe(1)
      expect(await find(stale.id)).toMatchObject({ status: 'completed', lockedBy: WORKER_B, fence: current.fence })
    })
  })

  /** One mailbox row for `orderId` as a CTE reading `done`: written with the completion or not at all. A null tenant violates not null. */
  const mailEffect = (orderId: string, tenantId: string | null = 'ten_contract'): JobEffect => ({
    text: 'mail as (insert into mailbox (id, tenant_id, order_id, "to", subject, body) select $1::text, $2::text, $3::text, $4::text, $5::text, $6::text from done)',
    params: [newId('msg'), tenantId, orderId, 'shopper@example.com', 'Order confirmed', `Order ${orderId}`],
  })
  /** The same row with a subject that does not cast: 'x'::int fails. */
  const badCastEffect = (orderId: string): JobEffect => ({
    text: 'mail as (insert into mailbox (id, tenant_id, order_id, "to", subject, body) select $1::text, $2::text, $3::text, $4::text, ($5::int)::text, $6::text from done)',
    params: [newId('msg'), 'ten_contract', orderId, 'shopper@example.com', 'x', `Order ${orderId}`],
  })
  const failingEffects = [
    { name: 'a constraint violation', effect: (orderId: string) => mailEffect(orderId, null), error: 'database error 23502 not_null_violation' },
    { name: 'a bad cast', effect: badCastEffect, error: 'database error 22P02 invalid_text_representation' },
  ]

  /** How many distinct completed_at (as stored, in microseconds): 1 when one transaction completed them all. */
  async function distinctCompletionTimes(ids: string[]): Promise<number> {
    const [row] = await db.select({ times: sql<number>`count(distinct ${jobs.completedAt})::int`.mapWith(Number) }).from(jobs).where(inArray(jobs.id, ids))
    return row!.times
  }

  /** The database error a promise rejected with, as the job history would keep it. */
  async function rejectionOf(promise: Promise<unknown>): Promise<string | undefined> {
    const error = await promise.then(() => undefined, (caught: unknown) => caught ?? new Error('rejected without a reason'))
    expect(error, 'expected a rejection').toBeDefined()
    return describeDatabaseError(error)
  }

  describe('completeWith', () => {
    it('completes the claim and writes its effect in one statement; without an effect it only completes', async () => {
      const job = await enqueueAndClaim()
      const orderId = newId('ord')
      expect(await store.completeWith(job, mailEffect(orderId))).toBe(true)
      expect(await emailsFor(orderId)).toBe(1)
      const row = await find(job.id)
      expect(row).toMatchObject({ status: 'completed', lastError: null, fence: job.fence, attempt: 1, lockedBy: WORKER_A })
      expect(row.completedAt).toBeInstanceOf(Date)

      expect(await store.completeWith(job, mailEffect(orderId))).toBe(false)
      expect(await emailsFor(orderId)).toBe(1)
      expect(await find(job.id)).toEqual(row)

      const plain = await enqueueAndClaim()
      expect(await store.completeWith(plain)).toBe(true)
      expect(await find(plain.id)).toMatchObject({ status: 'completed', lastError: null, fence: plain.fence })
    })

    it('answers false and writes nothing for a claim that is no longer current: superseded or rescued', async () => {
      const stale = await enqueueAndClaim()
      expect(await store.putBack(stale, 0)).toBe(true)
      const current = await claimOnly(stale.id, WORKER_B)
      const supersededBefore = await find(stale.id)
      const orderId = newId('ord')
      expect(await store.completeWith(stale, mailEffect(orderId))).toBe(false)
      expect(await emailsFor(orderId)).toBe(0)
      expect(await find(stale.id)).toEqual(supersededBefore)

      const frozen = await enqueueAndClaim({}, WORKER_C)
      await ageHeartbeat(frozen.id, STALE_HEARTBEAT_SECONDS)
      expect(await store.rescueStale(HEARTBEAT_TIMEOUT_MS)).toEqual([{ id: frozen.id, kind: 'contract.noop', status: 'failed' }])
      const rescuedBefore = await find(frozen.id)
      const frozenOrderId = newId('ord')
      expect(await store.completeWith(frozen, mailEffect(frozenOrderId))).toBe(false)
      expect(await emailsFor(frozenOrderId)).toBe(0)
      expect(await find(frozen.id)).toEqual(rescuedBefore)

      expect(await store.completeWith(current, mailEffect(orderId))).toBe(true)
      expect(await emailsFor(orderId)).toBe(1)
      expect(await find(stale.id)).toMatchObject({ status: 'completed', lockedBy: WORKER_B, fence: current.fence })
    })

    for (const failing of failingEffects) {
      it(`throws on an effect that fails (${failing.name}), writes nothing and keeps the claim running`, async () => {
        const job = await enqueueAndClaim()
        const before = await find(job.id)
        const orderId = newId('ord')
        expect(await rejectionOf(store.completeWith(job, failing.effect(orderId)))).toBe(failing.error)
        expect(await emailsFor(orderId)).toBe(0)
        expect(await find(job.id)).toEqual(before)

        expect(await store.completeWith(job, mailEffect(orderId))).toBe(true)
        expect(await emailsFor(orderId)).toBe(1)
      })
    }
  })

  describe('completeAll', () => {
    it('completes several claims and their effects in one transaction; a claim no longer current writes nothing, the others commit', async () => {
      const first = await enqueueAndClaim()
      const stale = await enqueueAndClaim()
      expect(await store.putBack(stale, 0)).toBe(true)
      await claimOnly(stale.id, WORKER_B)
      const staleBefore = await find(stale.id)
      const third = await enqueueAndClaim()
      const plain = await enqueueAndClaim()
      const [firstOrder, staleOrder, thirdOrder] = [newId('ord'), newId('ord'), newId('ord')]

      expect(await store.completeAll([
        { job: first, effect: mailEffect(firstOrder) },
        { job: stale, effect: mailEffect(staleOrder) },
        { job: third, effect: mailEffect(thirdOrder) },
        { job: plain },
      ])).toEqual([true, false, true, true])
      expect([await emailsFor(firstOrder), await emailsFor(staleOrder), await emailsFor(thirdOrder)]).toEqual([1, 0, 1])
      expect(await find(stale.id)).toEqual(staleBefore)
      for (const job of [first, third, plain]) expect(await find(job.id)).toMatchObject({ status: 'completed', fence: job.fence, lastError: null })
      expect(await distinctCompletionTimes([first.id, third.id, plain.id])).toBe(1)
      expect(await store.completeAll([])).toEqual([])
    })

    for (const failing of failingEffects) {
      it(`fails the whole batch on one failing effect (${failing.name}): nothing written, every claim still running; one by one only that one fails`, async () => {
        const jobsInBatch = [await enqueueAndClaim(), await enqueueAndClaim(), await enqueueAndClaim()]
        const before = await Promise.all(jobsInBatch.map(job => find(job.id)))
        const orderIds = [newId('ord'), newId('ord'), newId('ord')]
        const effects = [mailEffect(orderIds[0]!), failing.effect(orderIds[1]!), mailEffect(orderIds[2]!)]

        expect(await rejectionOf(store.completeAll(jobsInBatch.map((job, i) => ({ job, effect: effects[i] }))))).toBe(failing.error)
        expect(await Promise.all(orderIds.map(emailsFor))).toEqual([0, 0, 0])
        expect(await Promise.all(jobsInBatch.map(job => find(job.id)))).toEqual(before)

        expect(await store.completeWith(jobsInBatch[0]!, effects[0])).toBe(true)
        expect(await rejectionOf(store.completeWith(jobsInBatch[1]!, effects[1]))).toBe(failing.error)
        expect(await store.completeWith(jobsInBatch[2]!, effects[2])).toBe(true)
        expect(await Promise.all(orderIds.map(emailsFor))).toEqual([1, 0, 1])
        expect((await Promise.all(jobsInBatch.map(job => find(job.id)))).map(row => row.status)).toEqual(['completed', 'running', 'completed'])
      })
    }
  })

  if (concurrentTransactions) {
    describe('heartbeatAll and completeAll together', () => {
      /** Held by the test: an effect that takes it shared waits, its completion's rows locked, until the test lets go. */
      const ADVISORY_GATE = 4_207_731_777

      /** A mailbox row whose statement first waits for the advisory gate. */
      const gatedEffect = (orderId: string): JobEffect => ({
        text: 'gated as (insert into mailbox (id, tenant_id, order_id, "to", subject, body) select $1::text, $2::text, $3::text, $4::text, $5::text, (select $6::text from pg_advisory_xact_lock_shared($7::bigint)) from done)',
        params: [newId('msg'), 'ten_contract', orderId, 'shopper@example.com', 'Order confirmed', `Order ${orderId}`, ADVISORY_GATE],
      })

      /** Two claims whose rows any plan of the heartbeat visits in one order: by id (an index) and by position (a scan). */
      async function twoClaimsInScanOrder(): Promise<[ClaimedJob, ClaimedJob]> {
        for (let tries = 0; tries < 20; tries++) {
          await db.delete(jobs)
          // Line pointers freed now, not whenever autovacuum comes by: the rows' places then follow
          // the writes, not whatever an earlier try left.
          await db.execute(sql`vacuum jobs`)
          await enqueueJobs(db, [jobInput(), jobInput()])
          const claimed = await store.claim(WORKER_A, 10)
          const rows = await db.select({ id: jobs.id, page: sql<number>`(ctid::text::point)[0]`.mapWith(Number), item: sql<number>`(ctid::text::point)[1]`.mapWith(Number) })
            .from(jobs).orderBy(asc(jobs.id))
          const [first, second] = rows as [typeof rows[0], typeof rows[0]]
          if (first.page < second.page || (first.page === second.page && first.item < second.item)) {
            return [claimed.find(job => job.id === first.id)!, claimed.find(job => job.id === second.id)!]
          }
        }
        throw new Error('no two claims in scan order after 20 tries')
      }

      const settled = (result: PromiseSettledResult<unknown>) => (result.status === 'fulfilled' ? result.value : describeDatabaseError(result.reason) ?? String(result.reason))

      it('a heartbeat of claims whose completion batch is in flight waits for it: neither deadlocks, whichever claim the batch takes first', async () => {
        const [earlier, later] = await twoClaimsInScanOrder()
        let releaseGate!: () => void
        const gateMayOpen = new Promise<void>((resolve) => { releaseGate = resolve })
        let reportGateHeld!: () => void
        const gateHeld = new Promise<void>((resolve) => { reportGateHeld = resolve })
        const gate = db.transaction(async (tx) => {
          await tx.execute(sql`select pg_advisory_xact_lock(${ADVISORY_GATE}::bigint)`)
          reportGateHeld()
          await gateMayOpen
        })
        await gateHeld
        const [earlierOrder, laterOrder] = [newId('ord'), newId('ord')]
        let completing: Promise<boolean[]>
        let beating: Promise<Set<number>>
        try {
          // The batch locks the later row and waits at the gate; the heartbeat takes the earlier row and waits on the later one.
          completing = store.completeAll([{ job: later, effect: gatedEffect(laterOrder) }, { job: earlier, effect: mailEffect(earlierOrder) }])
          await pollUntil('the batch waits at the gate', async () => (await transactionsWaitingOnLocks()) === 1)
          beating = store.heartbeatAll([earlier, later])
          await pollUntil('the heartbeat waits as well', async () => (await transactionsWaitingOnLocks()) === 2)
        }
        finally {
          releaseGate()
          await gate
        }
        const [completed, beaten] = await Promise.allSettled([completing, beating])
        expect({ completed: settled(completed), beaten: settled(beaten) }).toEqual({ completed: [true, true], beaten: new Set() })
        expect([await emailsFor(earlierOrder), await emailsFor(laterOrder)]).toEqual([1, 1])
        expect(await jobStatusCountsOf([earlier.id, later.id])).toEqual({ completed: 2 })
      })
    })
  }

  describe('fail', () => {
    it('schedules a retryable failure with attempts left retryInMs later and records the error', async () => {
      const job = await enqueueAndClaim()
      expect(await store.fail(job, { errorClass: 'retryable', message: 'smtp timeout', retryInMs: RETRY_IN_MS, permanent: false })).toBe('failed')
      expect(await find(job.id)).toMatchObject({
        status: 'failed',
        attempt: 1,
        lastError: 'smtp timeout',
        errors: [{ attempt: 1, at: expect.any(String), startedAt: expect.any(String), retryAt: expect.any(String), errorClass: 'retryable', message: 'smtp timeout', worker: WORKER_A }],
      })
      const retryDelay = await millisBetween(job.id, jobs.runAt, jobs.updatedAt)
      expect(retryDelay).toBeGreaterThanOrEqual(RETRY_IN_MS - RETRY_TOLERANCE_MS)
      expect(retryDelay).toBeLessThanOrEqual(RETRY_IN_MS + RETRY_TOLERANCE_MS)
      // The history names the attempt's start and the exact retry time, on the database clock.
      const failed = await find(job.id)
      const [entry] = failed.errors
      expect(Date.parse(entry!.startedAt!)).toBe(failed.startedAt!.getTime())
      expect(Date.parse(entry!.retryAt!)).toBe(failed.runAt.getTime())
      expect(Date.parse(entry!.retryAt!) - Date.parse(entry!.at)).toBe(RETRY_IN_MS)
      expect(await store.claim(WORKER_B, 10)).toEqual([])
    })

    it('dead-letters the attempt that reaches maxAttempts, keeping one error per attempt', async () => {
      const maxAttempts = 3
      const id = await enqueue({ maxAttempts })
      for (let attempt = 1; attempt <= maxAttempts; attempt++) {
        const job = await claimOnly(id, `worker-${attempt}`)
        expect(job.attempt).toBe(attempt)
        const runAtBefore = (await find(id)).runAt
        const status = await store.fail(job, { errorClass: 'retryable', message: `attempt ${attempt} failed`, retryInMs: 0, permanent: false })
        expect(status).toBe(attempt < maxAttempts ? 'failed' : 'dead_letter')

        const row = await find(id)
        expect(row.status).toBe(status)
        expect(row.attempt).toBe(attempt)
        expect(row.errors).toHaveLength(row.attempt)
        expect(row.errors.map(entry => [entry.attempt, entry.message, entry.worker])).toEqual(
          Array.from({ length: attempt }, (_, i) => [i + 1, `attempt ${i + 1} failed`, `worker-${i + 1}`]))
        if (status === 'dead_letter') expect(row.runAt.getTime()).toBe(runAtBefore.getTime())
      }
      expect(await store.claim(WORKER_A, 10)).toEqual([])
      expect(await find(id)).toMatchObject({ status: 'dead_letter', attempt: maxAttempts, lastError: `attempt ${maxAttempts} failed` })
    })

    it('dead-letters a permanent failure at the first attempt', async () => {
      const job = await enqueueAndClaim()
      expect(job.maxAttempts).toBe(8)
      expect(await store.fail(job, { errorClass: 'permanent', message: 'payload has no orderId', retryInMs: RETRY_IN_MS, permanent: true })).toBe('dead_letter')
      expect(await find(job.id)).toMatchObject({
        status: 'dead_letter',
        attempt: 1,
        lastError: 'payload has no orderId',
        errors: [{ attempt: 1, at: expect.any(String), startedAt: expect.any(String), retryAt: null, errorClass: 'permanent', message: 'payload has no orderId', worker: WORKER_A }],
      })
      expect(await store.claim(WORKER_B, 10)).toEqual([])
    })
  })

  describe('delays past Postgres int', () => {
    it(`fail and putBack keep a delay of 2^40 ms within 2^31 − 1 ms, and a negative one at none`, async () => {
      const job = await enqueueAndClaim()
      expect(await store.fail(job, { errorClass: 'retryable', message: 'provider asked for ages', retryInMs: HUGE_DELAY_MS, permanent: false })).toBe('failed')
      expect(await millisBetween(job.id, jobs.runAt, jobs.updatedAt)).toBe(MAX_DELAY_MS)
      const [entry] = (await find(job.id)).errors
      expect(Date.parse(entry!.retryAt!) - Date.parse(entry!.at)).toBe(MAX_DELAY_MS)

      await db.update(jobs).set({ runAt: sql`now()` }).where(eq(jobs.id, job.id))
      const second = await claimOnly(job.id)
      expect(await store.putBack(second, HUGE_DELAY_MS, { snooze: true })).toBe(true)
      expect(await find(job.id)).toMatchObject({ status: 'queued', attempt: 1, snoozes: 1 })
      expect(await millisBetween(job.id, jobs.runAt, jobs.updatedAt)).toBe(MAX_DELAY_MS)

      await db.update(jobs).set({ runAt: sql`now()` }).where(eq(jobs.id, job.id))
      expect(await store.putBack(await claimOnly(job.id), -5_000)).toBe(true)
      expect(await millisBetween(job.id, jobs.runAt, jobs.updatedAt)).toBe(0)
    })
  })

  describe('putBack', () => {
    it('counts a snooze in jobs.snoozes without spending the attempt; other put-backs leave the count; redrive starts it at zero', async () => {
      const id = await enqueue()
      const first = await claimOnly(id)
      expect(first.snoozes).toBe(0)
      expect(await store.putBack(first, 0, { snooze: true })).toBe(true)
      expect(await find(id)).toMatchObject({ status: 'queued', attempt: 0, snoozes: 1 })
      const second = await claimOnly(id)
      expect(second).toMatchObject({ attempt: 1, snoozes: 1 })
      expect(await store.putBack(second, 0, { snooze: true })).toBe(true)
      expect(await store.putBack(await claimOnly(id), 0)).toBe(true)
      expect(await find(id)).toMatchObject({ status: 'queued', attempt: 0, snoozes: 2 })

      const last = await claimOnly(id)
      expect(last.snoozes).toBe(2)
      expect(await store.fail(last, { errorClass: 'permanent', message: 'gave up', retryInMs: 0, permanent: true })).toBe('dead_letter')
      expect(await store.redrive(id)).toMatchObject({ status: 'queued', attempt: 0, snoozes: 0 })
      expect((await claimOnly(id)).snoozes).toBe(0)
    })

    it('gives the attempt back and queues the job for delayMs later', async () => {
      const id = await enqueue()
      const firstAttempt = await claimOnly(id)
      expect(await store.fail(firstAttempt, { errorClass: 'retryable', message: 'busy', retryInMs: 0, permanent: false })).toBe('failed')
      const secondAttempt = await claimOnly(id)
      expect(secondAttempt.attempt).toBe(2)

      expect(await store.putBack(secondAttempt, 0)).toBe(true)
      expect(await find(id)).toMatchObject({ status: 'queued', attempt: 1, lockedBy: null, heartbeatAt: null, errors: [expect.objectContaining({ attempt: 1 })] })

      const retried = await claimOnly(id, WORKER_B)
      expect(retried.attempt).toBe(2)
      expect(retried.fence).toBeGreaterThan(secondAttempt.fence)
      expect(await store.putBack(retried, FAR_FUTURE_MS)).toBe(true)
      expect(await millisBetween(id, jobs.runAt, jobs.updatedAt)).toBe(FAR_FUTURE_MS)
      expect(await store.claim(WORKER_A, 10)).toEqual([])
    })

    it('keeps the faults unless asked to clear them', async () => {
      const id = await enqueue({ faults: { snoozeMs: 100 } })
      expect(await store.putBack(await claimOnly(id), 0)).toBe(true)
      expect((await find(id)).faults).toEqual({ snoozeMs: 100 })
      expect(await store.putBack(await claimOnly(id), 0, { clearFaults: true })).toBe(true)
      expect((await find(id)).faults).toBeNull()
    })
  })

  describe('rescueStale', () => {
    it('fails a job whose heartbeat is older than the timeout, spending its attempt; fresh ones stay', async () => {
      const stale = await enqueueAndClaim({}, WORKER_A)
      const fresh = await enqueueAndClaim({}, WORKER_B)
      await ageHeartbeat(stale.id, STALE_HEARTBEAT_SECONDS)

      expect(await store.rescueStale(HEARTBEAT_TIMEOUT_MS)).toEqual([{ id: stale.id, kind: 'contract.noop', status: 'failed' }])
      const message = `rescued: no heartbeat from ${WORKER_A} for ${HEARTBEAT_TIMEOUT_MS} ms`
      const rescued = await find(stale.id)
      expect(rescued).toMatchObject({
        status: 'failed',
        attempt: 1,
        fence: stale.fence,
        lastError: message,
        errors: [{ attempt: 1, at: expect.any(String), startedAt: expect.any(String), retryAt: expect.any(String), errorClass: 'rescued', message, worker: WORKER_A }],
      })
      expect(rescued.runAt.getTime()).toBe(rescued.updatedAt.getTime())
      expect(await find(fresh.id)).toMatchObject({ status: 'running', lockedBy: WORKER_B, fence: fresh.fence, errors: [] })

      // The frozen worker wakes up: its claim is gone.
      const orderId = newId('ord')
      expect(await store.complete(stale, sendEmail(orderId))).toBe(false)
      expect((await store.heartbeatAll([stale])).has(stale.fence)).toBe(false)
      expect(await emailsFor(orderId)).toBe(0)

      const retry = await claimOnly(stale.id, WORKER_C)
      expect(retry.attempt).toBe(2)
      expect(retry.fence).toBeGreaterThan(fresh.fence)
    })

    it('dead-letters a stale job that was on its last attempt', async () => {
      const job = await enqueueAndClaim({ maxAttempts: 1 })
      await ageHeartbeat(job.id, STALE_HEARTBEAT_SECONDS)
      expect(await store.rescueStale(HEARTBEAT_TIMEOUT_MS)).toEqual([{ id: job.id, kind: 'contract.noop', status: 'dead_letter' }])
      expect(await find(job.id)).toMatchObject({ status: 'dead_letter', attempt: 1, errors: [expect.objectContaining({ errorClass: 'rescued', attempt: 1 })] })
      expect(await store.claim(WORKER_B, 10)).toEqual([])
    })

    it('leaves running jobs with a recent heartbeat alone, and jobs that are no longer running', async () => {
      const finished = await completedJob()
      await ageHeartbeat(finished, STALE_HEARTBEAT_SECONDS)
      const job = await enqueueAndClaim()
      await ageHeartbeat(job.id, RECENT_HEARTBEAT_SECONDS)
      const before = [await find(finished), await find(job.id)]
      expect(await store.rescueStale(HEARTBEAT_TIMEOUT_MS)).toEqual([])
      expect([await find(finished), await find(job.id)]).toEqual(before)
    })
  })

  describe('redrive', () => {
    it('queues a dead letter again with fresh attempts and its error history', async () => {
      const job = await enqueueAndClaim({ maxAttempts: 1 })
      await store.fail(job, { errorClass: 'retryable', message: 'provider down', retryInMs: 0, permanent: false })
      expect((await find(job.id)).status).toBe('dead_letter')

      const redriven = await store.redrive(job.id)
      expect(redriven).toMatchObject({
        id: job.id, status: 'queued', attempt: 0, lockedBy: null, lastError: 'provider down',
        errors: [expect.objectContaining({ attempt: 1, message: 'provider down' })],
      })
      expect(redriven!.runAt.getTime()).toBe(redriven!.updatedAt.getTime())
      expect(await find(job.id)).toEqual(redriven)

      const again = await claimOnly(job.id, WORKER_B)
      expect(again.attempt).toBe(1)
      expect(again.fence).toBeGreaterThan(job.fence)
    })

    it('refuses every other status and leaves the job unchanged', async () => {
      const completed = await completedJob()
      const failedJob = await enqueueAndClaim()
      await store.fail(failedJob, { errorClass: 'retryable', message: 'later', retryInMs: FAR_FUTURE_MS, permanent: false })
      const running = (await enqueueAndClaim()).id
      const queued = await enqueue({ delayMs: FAR_FUTURE_MS })

      for (const [id, status] of [[completed, 'completed'], [failedJob.id, 'failed'], [running, 'running'], [queued, 'queued']] as const) {
        const before = await find(id)
        expect(before.status).toBe(status)
        expect(await store.redrive(id)).toBeUndefined()
        expect(await find(id)).toEqual(before)
      }
      expect(await store.redrive('job_unknown')).toBeUndefined()
    })
  })

  describe('dismiss', () => {
    async function deadLetter(): Promise<string> {
      const job = await enqueueAndClaim({ maxAttempts: 1 })
      await store.fail(job, { errorClass: 'permanent', message: 'payload invalid', retryInMs: 0, permanent: true })
      expect((await find(job.id)).status).toBe('dead_letter')
      return job.id
    }

    it('ends a dead letter for good with its reason: never claimed, rescued or redriven again', async () => {
      const id = await deadLetter()
      const dismissed = await store.dismiss(id, 'the order was deleted by the shop')
      expect(dismissed).toMatchObject({
        id, status: 'dismissed', dismissedReason: 'the order was deleted by the shop', lockedBy: null, lastError: 'payload invalid',
        errors: [expect.objectContaining({ attempt: 1, message: 'payload invalid' })],
      })
      expect(dismissed!.dismissedAt).toBeInstanceOf(Date)
      expect(await find(id)).toEqual(dismissed)

      expect(await store.claim(WORKER_B, 100)).toEqual([])
      expect(await store.rescueStale(0)).toEqual([])
      expect(await store.redrive(id)).toBeUndefined()
      expect(await store.dismiss(id, 'again')).toBeUndefined()
      expect(await find(id)).toEqual(dismissed)
    })

    it('refuses every status but dead_letter and leaves the job unchanged', async () => {
      const completed = await completedJob()
      const running = (await enqueueAndClaim()).id
      const queued = await enqueue({ delayMs: FAR_FUTURE_MS })
      for (const [id, status] of [[completed, 'completed'], [running, 'running'], [queued, 'queued']] as const) {
        const before = await find(id)
        expect(before.status).toBe(status)
        expect(await store.dismiss(id, 'not a dead letter')).toBeUndefined()
        expect(await find(id)).toEqual(before)
      }
      expect(await store.dismiss('job_unknown', 'no such job')).toBeUndefined()
    })
  })

  describe('list', () => {
    it('filters by status, kind and resource, newest first, up to the limit', async () => {
      // Separate statements a few milliseconds apart, so created_at orders them (PGlite's clock can
      // give two quick statements the same time); only listA2 is due, so it alone gets claimed.
      const enqueueLater = async (overrides: Partial<EnqueueInput>) => {
        await delay(3)
        return enqueue(overrides)
      }
      const listA1 = await enqueueLater({ kind: 'contract.list-a', resourceId: 'order:ord_list_1', delayMs: FAR_FUTURE_MS })
      const listA2 = await enqueueLater({ kind: 'contract.list-a', resourceId: 'order:ord_list_2' })
      const listA3 = await enqueueLater({ kind: 'contract.list-a', resourceId: 'order:ord_list_1', delayMs: FAR_FUTURE_MS })
      const listB1 = await enqueueLater({ kind: 'contract.list-b', resourceId: 'order:ord_list_1', delayMs: FAR_FUTURE_MS })
      const listB2 = await enqueueLater({ kind: 'contract.list-b', delayMs: FAR_FUTURE_MS })
      await claimOnly(listA2)

      const idsOf = (rows: JobRow[]) => rows.map(row => row.id)
      expect(idsOf(await store.list())).toEqual([listB2, listB1, listA3, listA2, listA1])
      expect(idsOf(await store.list({ kind: 'contract.list-a' }))).toEqual([listA3, listA2, listA1])
      expect(idsOf(await store.list({ status: 'running' }))).toEqual([listA2])
      expect(idsOf(await store.list({ status: 'queued', kind: 'contract.list-a' }))).toEqual([listA3, listA1])
      expect(idsOf(await store.list({ resourceId: 'order:ord_list_1' }))).toEqual([listB1, listA3, listA1])
      expect(idsOf(await store.list({ resourceId: 'order:ord_list_1', kind: 'contract.list-b' }))).toEqual([listB1])
      expect(idsOf(await store.list({ kind: 'contract.list-a', limit: 2 }))).toEqual([listA3, listA2])
      expect(await store.list({ kind: 'contract.unknown' })).toEqual([])
      expect(await store.list({ status: 'dead_letter' })).toEqual([])
    })
  })

  describe('deleteCompleted', () => {
    it('deletes only completed jobs older than the cutoff, at most `batch` per call', async () => {
      const old = [await completedJob(), await completedJob(), await completedJob()]
      for (const id of old) await ageCompletion(id, RETENTION_DAYS + 10)
      const recent = await completedJob()
      await ageCompletion(recent, RETENTION_DAYS - 10)
      // A dead letter stays for an operator however old it is: the status protects it, not a null timestamp.
      const deadLetter = await enqueueAndClaim()
      await store.fail(deadLetter, { errorClass: 'permanent', message: 'bad payload', retryInMs: 0, permanent: true })
      await ageCompletion(deadLetter.id, RETENTION_DAYS + 10)
      const waiting = await enqueue({ delayMs: FAR_FUTURE_MS })

      expect(await store.deleteCompleted(RETENTION_DAYS, 2)).toBe(2)
      expect(await store.deleteCompleted(RETENTION_DAYS, 2)).toBe(1)
      expect(await store.deleteCompleted(RETENTION_DAYS, 2)).toBe(0)
      expect(await remainingJobIds()).toEqual([recent, deadLetter.id, waiting].sort())
    })
  })

  describe('maintenance tasks', () => {
    let locks: Locks

    beforeEach(() => {
      locks = createMemoryLocks()
    })

    afterEach(async () => {
      await locks.close()
    })

    async function idempotencyRecord(expired: boolean, lease: 'none' | 'ran-out' | 'live'): Promise<string> {
      const [row] = await db.insert(idempotencyRecords).values({
        scope: 'tenant:ten_retention',
        key: randomUUID(),
        route: 'POST /api/orders',
        fingerprint: 'fingerprint-retention',
        status: lease === 'none' ? 'succeeded' : 'processing',
        requestId: 'req_retention',
        leaseToken: lease === 'none' ? null : randomUUID(),
        leaseExpiresAt: lease === 'none' ? null : lease === 'live' ? sql`now() + interval '1 minute'` : sql`now() - interval '1 minute'`,
        expiresAt: expired ? sql`now() - interval '1 hour'` : sql`now() + interval '1 hour'`,
      }).returning({ id: idempotencyRecords.id })
      return row!.id
    }

    const remainingRecordIds = async () =>
      (await db.select({ id: idempotencyRecords.id }).from(idempotencyRecords)).map(row => row.id).sort()

    it('retention deletes expired idempotency records without a live lease and old completed jobs', async () => {
      // Three deletable: two finished and expired, one expired whose owner's lease ran out.
      await idempotencyRecord(true, 'none')
      await idempotencyRecord(true, 'none')
      await idempotencyRecord(true, 'ran-out')
      const expiredButOwned = await idempotencyRecord(true, 'live')
      const unexpired = await idempotencyRecord(false, 'none')
      const oldJobs = [await completedJob(), await completedJob()]
      for (const id of oldJobs) await ageCompletion(id, RETENTION_DAYS + 1)
      const recentJob = await completedJob()

      expect(await deleteExpiredIdempotencyRecords(db, locks)).toMatchObject({ skipped: false, deleted: 3 })
      expect(await deleteCompletedJobs(db, locks, RETENTION_DAYS)).toMatchObject({ skipped: false, deleted: 2 })
      expect(await remainingRecordIds()).toEqual([expiredButOwned, unexpired].sort())
      expect(await remainingJobIds()).toEqual([recentJob])

      expect(await deleteExpiredIdempotencyRecords(db, locks)).toMatchObject({ skipped: false, deleted: 0 })
      expect(await deleteCompletedJobs(db, locks, RETENTION_DAYS)).toMatchObject({ skipped: false, deleted: 0 })
    })

    it('each retention service skips while another instance holds its own task lock, and only then', async () => {
      const expired = await idempotencyRecord(true, 'none')
      const oldJob = await completedJob()
      await ageCompletion(oldJob, RETENTION_DAYS + 1)
      const token = await locks.acquire('lock:task:retention-records', 60_000)
      expect(token).not.toBeNull()

      expect(await deleteExpiredIdempotencyRecords(db, locks)).toEqual({ skipped: true })
      expect(await remainingRecordIds()).toEqual([expired])
      // The jobs' retention has a lock of its own.
      expect(await deleteCompletedJobs(db, locks, RETENTION_DAYS)).toMatchObject({ skipped: false, deleted: 1 })

      expect(await locks.release('lock:task:retention-records', token!)).toBe(true)
      expect(await deleteExpiredIdempotencyRecords(db, locks)).toMatchObject({ skipped: false, deleted: 1 })
      expect(await remainingRecordIds()).toEqual([])
    })

    /** `count` records expired an hour ago with no lease, inserted in bulk. */
    async function expiredRecords(count: number): Promise<void> {
      for (let from = 0; from < count; from += 500) {
        await db.insert(idempotencyRecords).values(Array.from({ length: Math.min(500, count - from) }, () => ({
          scope: 'tenant:ten_retention', key: randomUUID(), route: 'POST /api/orders', fingerprint: 'fingerprint-retention',
          status: 'succeeded' as const, requestId: 'req_retention', expiresAt: sql`now() - interval '1 hour'`,
        })))
      }
    }

    /** `count` jobs completed `days` ago, inserted in bulk. */
    async function jobsCompletedDaysAgo(count: number, days: number): Promise<void> {
      for (let from = 0; from < count; from += 500) {
        await db.insert(jobs).values(Array.from({ length: Math.min(500, count - from) }, () => {
          const id = newId('job')
          return { id, kind: 'contract.noop', dedupeKey: id, payload: {}, status: 'completed' as const, attempt: 1, maxAttempts: 1, completedAt: sql`now() - (${days}::int * interval '1 day')` }
        }))
      }
    }

    it('one retention run deletes a backlog of many batches, pausing after each but the last, and keeps what is not due', async () => {
      await expiredRecords(1_050)
      const kept = [await idempotencyRecord(true, 'live'), await idempotencyRecord(false, 'none')]
      await jobsCompletedDaysAgo(1_020, RETENTION_DAYS + 1)
      const recentJob = await completedJob()
      const pauses: number[] = []
      const pace = { batchSize: 100, sleep: async (ms: number) => void pauses.push(ms) }

      // 11 batches of records (the last of 50), then 11 of jobs (the last of 20).
      expect(await deleteExpiredIdempotencyRecords(db, locks, pace))
        .toMatchObject({ skipped: false, deleted: 1_050, run: { batches: 11, drained: true } })
      expect(pauses).toHaveLength(10)
      expect(await deleteCompletedJobs(db, locks, RETENTION_DAYS, pace))
        .toMatchObject({ skipped: false, deleted: 1_020, run: { batches: 11, drained: true } })
      expect(pauses).toHaveLength(20)
      expect(await remainingRecordIds()).toEqual(kept.sort())
      expect(await remainingJobIds()).toEqual([recentJob])
    })

    it('a retention run stops at its time budget; the next one continues', async () => {
      await expiredRecords(1_050)
      // Every reading of the clock is a second later: each batch takes a second and, at half duty, rests another.
      let readings = 0
      const now = () => 1000 * readings++
      const pace = { batchSize: 100, dutyCycle: 0.5, budgetMs: 10_000, now, sleep: async () => {} }

      // Batch, pause, batch, …: the fifth pause would end past the budget, so the run stops after five batches.
      expect(await deleteExpiredIdempotencyRecords(db, locks, pace))
        .toMatchObject({ skipped: false, deleted: 500, run: { batches: 5, pausedMs: 4_000, drained: false } })
      readings = 0
      expect(await deleteExpiredIdempotencyRecords(db, locks, { ...pace, budgetMs: 600_000 }))
        .toMatchObject({ skipped: false, deleted: 550, run: { drained: true } })
      expect(await remainingRecordIds()).toEqual([])
    })

    it('rescue runs under its task lock and skips while another instance holds it', async () => {
      const job = await enqueueAndClaim()
      await ageHeartbeat(job.id, STALE_HEARTBEAT_SECONDS)
      const token = await locks.acquire('lock:task:jobs-rescue', 60_000)
      expect(token).not.toBeNull()

      expect(await rescueStaleJobs(db, locks, HEARTBEAT_TIMEOUT_MS)).toEqual({ skipped: true })
      expect(await find(job.id)).toMatchObject({ status: 'running', fence: job.fence })

      expect(await locks.release('lock:task:jobs-rescue', token!)).toBe(true)
      expect(await rescueStaleJobs(db, locks, HEARTBEAT_TIMEOUT_MS)).toEqual({ skipped: false, counts: { rescued: 1, deadLettered: 0 } })
      expect((await find(job.id)).status).toBe('failed')
      // The task released its lock: the next run is not skipped.
      expect(await rescueStaleJobs(db, locks, HEARTBEAT_TIMEOUT_MS)).toEqual({ skipped: false, counts: { rescued: 0, deadLettered: 0 } })
    })
  })

  describe('applyPaymentStatus', () => {
    const apply = (orderId: string, status: PaymentStatus, requestId?: string) =>
      transaction(db, tx => applyPaymentStatus(tx, orderId, status, { requestId }))

    async function orderStatus(orderId: string): Promise<string> {
      const [row] = await db.select({ status: orders.status }).from(orders).where(eq(orders.id, orderId))
      return row!.status
    }

    const effectJobs = (orderId: string) =>
      db.select({ kind: jobs.kind, resourceId: jobs.resourceId, payload: jobs.payload, requestId: jobs.requestId, status: jobs.status })
        .from(jobs).where(eq(jobs.resourceId, `order:${orderId}`)).orderBy(asc(jobs.kind))

    /**
     * The effect jobs of an order that reached `status`, each enqueued by the event that crossed into
     * it; a refund's notice names the refund the total recorded.
     */
    const expectedEffectJobs = (orderId: string, requestIds: { paid: string | null, refunded?: string | null }) => [
      ...EFFECT_KINDS.map(kind => ({ kind, requestId: requestIds.paid })),
      ...(requestIds.refunded !== undefined ? [{ kind: 'order.send_refund_notice', requestId: requestIds.refunded }] : []),
    ].sort((a, b) => a.kind.localeCompare(b.kind)).map(({ kind, requestId }) => ({
      kind, resourceId: `order:${orderId}`, requestId, status: 'queued',
      payload: kind === 'order.send_refund_notice' ? { orderId, refundId: expect.stringMatching(/^re_/) } : { orderId },
    }))

    async function newOrder(): Promise<string> {
      const { orderIds: [orderId] } = await seedOrders(db, 1)
      return orderId!
    }

    it('enqueues the confirmation and the invoice exactly once when the order becomes paid', async () => {
      const orderId = await newOrder()
      expect(await apply(orderId, 'paid', 'req_paid')).toEqual({ from: 'pending_payment', to: 'paid', changed: true })
      expect(await orderStatus(orderId)).toBe('paid')
      expect(await effectJobs(orderId)).toEqual(expectedEffectJobs(orderId, { paid: 'req_paid' }))

      // A duplicate and a late failure event change nothing.
      expect(await apply(orderId, 'paid', 'req_paid_again')).toEqual({ from: 'paid', to: 'paid', changed: false, reason: 'same_status' })
      expect(await apply(orderId, 'payment_failed')).toEqual({ from: 'paid', to: 'paid', changed: false, reason: 'lower_precedence' })
      expect(await orderStatus(orderId)).toBe('paid')
      expect(await effectJobs(orderId)).toEqual(expectedEffectJobs(orderId, { paid: 'req_paid' }))

      expect(await apply(orderId, 'refunded', 'req_refund')).toEqual({ from: 'paid', to: 'refunded', changed: true })
      expect(await orderStatus(orderId)).toBe('refunded')
      expect(await apply(orderId, 'paid')).toEqual({ from: 'refunded', to: 'refunded', changed: false, reason: 'lower_precedence' })
      expect(await effectJobs(orderId)).toEqual(expectedEffectJobs(orderId, { paid: 'req_paid', refunded: 'req_refund' }))
    })

    it('lets a failed payment be followed by a successful one', async () => {
      const orderId = await newOrder()
      expect(await apply(orderId, 'payment_failed')).toEqual({ from: 'pending_payment', to: 'payment_failed', changed: true })
      expect(await effectJobs(orderId)).toEqual([])
      expect(await apply(orderId, 'paid')).toEqual({ from: 'payment_failed', to: 'paid', changed: true })
      expect(await effectJobs(orderId)).toEqual(expectedEffectJobs(orderId, { paid: null }))
    })

    it('keeps a refund that arrives before its payment waiting: the payment takes the order to refunded, the effects are enqueued once, a late paid changes nothing', async () => {
      const orderId = await newOrder()
      expect(await apply(orderId, 'refunded', 'req_refund')).toEqual({ from: 'pending_payment', to: 'pending_payment', changed: false, reason: 'awaiting_payment' })
      expect(await effectJobs(orderId)).toEqual([])
      expect(await apply(orderId, 'paid', 'req_paid')).toEqual({ from: 'pending_payment', to: 'refunded', changed: true })
      const expected = expectedEffectJobs(orderId, { paid: 'req_paid', refunded: 'req_paid' })
      expect(await effectJobs(orderId)).toEqual(expected)
      expect(await apply(orderId, 'paid')).toEqual({ from: 'refunded', to: 'refunded', changed: false, reason: 'lower_precedence' })
      expect(await orderStatus(orderId)).toBe('refunded')
      expect(await effectJobs(orderId)).toEqual(expected)
    })

    it('returns undefined for an unknown order and writes nothing', async () => {
      expect(await apply('ord_unknown', 'paid')).toBeUndefined()
      expect(await effectJobs('ord_unknown')).toEqual([])
    })

    it('ends any sequence of events at the highest status a payment allows (a full refund waits for one), with the effects enqueued once iff it reached paid or above', async () => {
      const rank = (status: string) => paymentStatusPrecedence.indexOf(status as PaymentStatus)
      await fc.assert(fc.asyncProperty(
        fc.array(fc.constantFrom<PaymentStatus>('payment_failed', 'paid', 'refunded'), { maxLength: 8 }),
        async (events) => {
          const orderId = await newOrder()
          for (const event of events) await apply(orderId, event)

          const reachable = events.includes('paid') ? events : events.filter(event => event !== 'refunded')
          const highest = reachable.reduce<PaymentStatus>((top, event) => rank(event) > rank(top) ? event : top, 'pending_payment')
          expect(await orderStatus(orderId)).toBe(highest)
          // The effects depend only on the set of events, never on their order.
          expect(await effectJobs(orderId)).toEqual(rank(highest) < rank('paid')
            ? []
            : expectedEffectJobs(orderId, highest === 'refunded' ? { paid: null, refunded: null } : { paid: null }))
        },
      ), { numRuns: 30 })
    })
  })

  describe('markedEffect', () => {
    /** The confirmation email of server/jobs/kinds/order-effects.ts: one mailbox row, read from `marker`. A null tenant violates not null. */
    const emailWrite = (orderId: string, tenantId: string | null = 'ten_contract'): JobEffect => ({
      text: 'insert into mailbox (id, tenant_id, order_id, "to", subject, body) select $1::text, $2::text, order_id, $3::text, $4::text, $5::text from marker',
      params: [newId('msg'), tenantId, 'shopper@example.com', `Order ${orderId} confirmed`, `Order ${orderId}`],
    })
    const invoiceWrite = (): JobEffect => ({
      text: 'insert into invoices (id, tenant_id, order_id, amount, currency) select $1::text, $2::text, order_id, $3::bigint, $4::text from marker',
      params: [newId('inv'), 'ten_contract', 150000, 'IDR'],
    })
    const marked = (job: ClaimedJob, orderId: string, effect: SideEffect = 'confirmation_email', write = emailWrite(orderId)) =>
      markedEffect(orderId, effect, job.id, write)

    const markers = (orderId: string) =>
      db.select({ effect: sideEffects.effect, jobId: sideEffects.jobId }).from(sideEffects)
        .where(eq(sideEffects.orderId, orderId)).orderBy(asc(sideEffects.effect))

    async function invoicesFor(orderId: string): Promise<number> {
      const [row] = await db.select({ invoices: count() }).from(invoices).where(eq(invoices.orderId, orderId))
      return row!.invoices
    }

    it('the first completion of an (order, effect) writes its marker and its effect; a later job for it writes nothing and still completes', async () => {
      const orderId = newId('ord')
      const otherOrderId = newId('ord')
      const first = await enqueueAndClaim()
      expect(await store.completeWith(first, marked(first, orderId))).toBe(true)
      const second = await enqueueAndClaim()
      expect(await store.completeWith(second, marked(second, orderId))).toBe(true)
      const invoice = await enqueueAndClaim()
      expect(await store.completeWith(invoice, marked(invoice, orderId, 'invoice', invoiceWrite()))).toBe(true)
      const other = await enqueueAndClaim()
      expect(await store.completeWith(other, marked(other, otherOrderId))).toBe(true)

      expect(await markers(orderId)).toEqual([
        { effect: 'confirmation_email', jobId: first.id },
        { effect: 'invoice', jobId: invoice.id },
      ])
      expect(await markers(otherOrderId)).toEqual([{ effect: 'confirmation_email', jobId: other.id }])
      expect([await emailsFor(orderId), await invoicesFor(orderId), await emailsFor(otherOrderId)]).toEqual([1, 1, 1])
      for (const job of [first, second, invoice, other]) expect(await find(job.id)).toMatchObject({ status: 'completed', fence: job.fence })
    })

    it('a statement that fails leaves no marker, nor does a claim that is no longer current: the next current completion writes it', async () => {
      const orderId = newId('ord')
      const job = await enqueueAndClaim()
      expect(await rejectionOf(store.completeWith(job, marked(job, orderId, 'confirmation_email', emailWrite(orderId, null))))).toBe('database error 23502 not_null_violation')
      expect(await markers(orderId)).toEqual([])
      expect((await find(job.id)).status).toBe('running')

      expect(await store.putBack(job, 0)).toBe(true)
      const current = await claimOnly(job.id, WORKER_B)
      expect(await store.completeWith(job, marked(job, orderId))).toBe(false)
      expect(await markers(orderId)).toEqual([])
      expect(await emailsFor(orderId)).toBe(0)

      expect(await store.completeWith(current, marked(current, orderId))).toBe(true)
      expect(await markers(orderId)).toEqual([{ effect: 'confirmation_email', jobId: job.id }])
      expect(await emailsFor(orderId)).toBe(1)
    })

    it('in one completeAll the first entry for an (order, effect) writes it and a later one writes nothing; a failing batch leaves no marker', async () => {
      const orderId = newId('ord')
      const first = await enqueueAndClaim()
      const second = await enqueueAndClaim()
      expect(await store.completeAll([{ job: first, effect: marked(first, orderId) }, { job: second, effect: marked(second, orderId) }])).toEqual([true, true])
      expect(await markers(orderId)).toEqual([{ effect: 'confirmation_email', jobId: first.id }])
      expect(await emailsFor(orderId)).toBe(1)

      const batchOrderId = newId('ord')
      const kept = await enqueueAndClaim()
      const failing = await enqueueAndClaim()
      expect(await rejectionOf(store.completeAll([
        { job: kept, effect: marked(kept, batchOrderId) },
        { job: failing, effect: badCastEffect(newId('ord')) },
      ]))).toBe('database error 22P02 invalid_text_representation')
      expect(await markers(batchOrderId)).toEqual([])
      expect(await emailsFor(batchOrderId)).toBe(0)
      expect(await store.completeWith(kept, marked(kept, batchOrderId))).toBe(true)
      expect(await markers(batchOrderId)).toEqual([{ effect: 'confirmation_email', jobId: kept.id }])
    })

    if (concurrentTransactions) {
      /**
       * An open transaction inserts the (order, confirmation_email) marker and stays open until the
       * job's completion is blocked on the unique index behind it; then it commits or rolls back.
       */
      async function completionBehindOpenMarker(orderId: string, firstEnds: 'commit' | 'rollback') {
        const job = await enqueueAndClaim()
        let letFirstFinish!: () => void
        const firstMayFinish = new Promise<void>((resolve) => { letFirstFinish = resolve })
        let reportInserted!: () => void
        const inserted = new Promise<void>((resolve) => { reportInserted = resolve })
        const rollback = new Error('first transaction rolls back')
        const first = db.transaction(async (tx) => {
          await tx.insert(sideEffects).values({ orderId, effect: 'confirmation_email', jobId: 'job_first' })
          reportInserted()
          await firstMayFinish
          if (firstEnds === 'rollback') throw rollback
        })
        await inserted
        const completing = store.completeWith(job, marked(job, orderId))
        try {
          await pollUntil('the completion waits for the first transaction', async () => (await transactionsWaitingOnLocks()) === 1)
        }
        finally {
          letFirstFinish()
        }
        if (firstEnds === 'rollback') await expect(first).rejects.toBe(rollback)
        else await first
        return { job, completed: await completing }
      }

      it('a completion waits for a concurrent transaction holding the marker, then writes nothing when it commits and still completes', async () => {
        const orderId = newId('ord')
        const { job, completed } = await completionBehindOpenMarker(orderId, 'commit')
        expect(completed).toBe(true)
        expect(await markers(orderId)).toEqual([{ effect: 'confirmation_email', jobId: 'job_first' }])
        expect(await emailsFor(orderId)).toBe(0)
        expect(await find(job.id)).toMatchObject({ status: 'completed', fence: job.fence })
      })

      it('a completion waits for a concurrent transaction holding the marker, then writes the marker and the effect when it rolls back', async () => {
        const orderId = newId('ord')
        const { job, completed } = await completionBehindOpenMarker(orderId, 'rollback')
        expect(completed).toBe(true)
        expect(await markers(orderId)).toEqual([{ effect: 'confirmation_email', jobId: job.id }])
        expect(await emailsFor(orderId)).toBe(1)
        expect(await find(job.id)).toMatchObject({ status: 'completed', fence: job.fence })
      })

      it(`lets exactly one of ${CONCURRENT_CLAIMERS} concurrent completions for one (order, effect) write it; every job completes`, async () => {
        const orderId = newId('ord')
        await enqueueJobs(db, Array.from({ length: CONCURRENT_CLAIMERS }, () => jobInput()))
        const claimed = await store.claim(WORKER_A, 100)
        expect(claimed).toHaveLength(CONCURRENT_CLAIMERS)
        const results = await Promise.all(claimed.map(job => store.completeWith(job, marked(job, orderId))))
        expect(results).toEqual(Array(CONCURRENT_CLAIMERS).fill(true))
        const written = await markers(orderId)
        expect(written).toHaveLength(1)
        expect(claimed.map(job => job.id)).toContain(written[0]!.jobId)
        expect(await emailsFor(orderId)).toBe(1)
        expect(await db.select({ markers: count() }).from(sideEffects).where(and(eq(sideEffects.orderId, orderId), eq(sideEffects.effect, 'confirmation_email'))))
          .toEqual([{ markers: 1 }])
        expect(await jobStatusCountsOf(claimed.map(job => job.id))).toEqual({ completed: CONCURRENT_CLAIMERS })
      })
    }
  })
}

describeWithServices('job store contract on Postgres', ['postgres'], () => {
  jobStoreContract('postgres', true)
})

describe('job store contract on PGlite', () => {
  jobStoreContract('pglite', false)
})
