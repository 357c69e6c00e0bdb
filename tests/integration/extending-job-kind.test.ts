import { and, asc, eq, inArray, sql } from 'drizzle-orm'
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest'
import { createReplayCache, fingerprint, type IdempotencyDeps, type IdempotentOutcome, runIdempotent } from 'nuxt-idempotency/core'
import { type Database, transaction } from '@idempotent-checkout/db-kit'
import { jobs, mailbox, sideEffects } from '../../server/db/schema'
import { createWorker, type Worker } from '../../server/jobs/worker'
import { setLogLevel } from '../../server/observability/logger'
import { tenantScope } from '../../shared/resources'
import { loyaltyAwardPoints, loyaltyEffect } from '../fixtures/extending/job-kind'
import { type AwardPointsInput, awardLoyaltyPoints } from '../fixtures/extending/loyalty'
import { type DatabaseDriver, openSuiteDatabase, type SuiteDatabase } from '../support/databases'
import { seedOrders } from '../support/jobs'
import { describeOnBothBackends, type LockBackend } from '../support/lock-backends'
import { pollUntil } from '../support/poll'

// docs/extending.md's job kind and the work of its example route, on both pairs the app runs on:
// the route's work through the idempotency core (as the route's runCheckoutIdempotent calls it),
// the award's job run by real workers. Every expectation is about rows.

if (!process.env.LOG_LEVEL) setLogLevel('error')

const ROUTE = 'POST /api/orders/:id/loyalty-points'

function extendingContract(driver: DatabaseDriver, openLockBackend: () => Promise<LockBackend>) {
  let database: SuiteDatabase
  let db: Database
  let lockBackend: LockBackend
  let idempotency: IdempotencyDeps
  const workers = new Set<Worker>()

  beforeAll(async () => {
    database = await openSuiteDatabase(driver, 'extending_job_kind', { poolSize: 12 })
    db = database.handle.db
    lockBackend = await openLockBackend()
    idempotency = { database: database.handle, locks: lockBackend.locks, replays: createReplayCache({ maxBytes: 1_000_000 }), lockTtlMs: 5_000, leaseMs: 5_000 }
  }, 60_000)

  afterAll(async () => {
    await lockBackend?.close()
    await database?.close()
  })

  afterEach(async () => {
    await Promise.all([...workers].map(worker => worker.stop(100)))
    workers.clear()
  })

  async function startWorker(id: string): Promise<void> {
    const worker = createWorker({
      db,
      notifications: database.handle.notifications,
      locks: lockBackend.locks,
      kinds: [loyaltyAwardPoints],
      workerId: `${driver}-${id}`,
      concurrency: 2,
      prefetch: 2,
      pollIntervalMs: 50,
      claimCoalesceMs: 25,
      heartbeatTimeoutMs: 30_000,
      lockTtlMs: 5_000,
      lockBusyDelayMs: 20,
      backoff: { baseMs: 50, capMs: 500 },
      snooze: { max: 5, maxDelayMs: 1_000 },
      faultsEnabled: false,
    })
    workers.add(worker)
    await worker.start()
  }

  async function seedOrder(): Promise<{ tenantId: string, orderId: string }> {
    const { tenantId, orderIds } = await seedOrders(db, 1)
    return { tenantId, orderId: orderIds[0]! }
  }

  /** The route's call into the idempotency layer, as runCheckoutIdempotent makes it, without HTTP. */
  function award(tenantId: string, orderId: string, key: string, input: AwardPointsInput): Promise<IdempotentOutcome> {
    const scope = tenantScope(tenantId)
    const payload = { orderId, ...input }
    return runIdempotent(idempotency, {
      scope, route: ROUTE, key, fingerprint: fingerprint({ method: 'POST', route: ROUTE, scope, payload }), requestId: `req_${key}`, ttlSeconds: 3_600, waitMs: 0, annotateBody: true,
    }, { mode: 'atomic', execute: tx => awardLoyaltyPoints(tx, { tenantId, orderId, idempotencyKey: key, requestId: `req_${key}` }, input) })
  }

  const jobsOf = (orderId: string) => db.select().from(jobs)
    .where(and(eq(jobs.kind, 'loyalty.award_points'), sql`${jobs.payload}->>'orderId' = ${orderId}`)).orderBy(asc(jobs.createdAt))
  const mailOf = (orderId: string) => db.select().from(mailbox).where(eq(mailbox.orderId, orderId))
  const markersOf = (orderId: string) => db.select().from(sideEffects).where(eq(sideEffects.orderId, orderId))

  async function untilCompleted(ids: string[], attempt = 1): Promise<void> {
    await pollUntil(`jobs ${ids.join(', ')} completed at attempt ${attempt}`, async () => {
      const rows = await db.select({ status: jobs.status, attempt: jobs.attempt }).from(jobs).where(inArray(jobs.id, ids))
      return rows.length === ids.length && rows.every(row => row.status === 'completed' && row.attempt === attempt)
    })
  }

  it('enqueues the award\'s job in the route\'s transaction: rolled back, there is no job', async () => {
    const { tenantId, orderId } = await seedOrder()
    await expect(transaction(db, async (tx) => {
      await awardLoyaltyPoints(tx, { tenantId, orderId, idempotencyKey: 'k-rollback', requestId: 'req_rollback' }, { points: 10 })
      throw new Error('the business transaction fails after the enqueue')
    })).rejects.toThrow('fails after the enqueue')
    expect(await jobsOf(orderId)).toEqual([])
  })

  it('awards once per key: the replay enqueues nothing, and the worker mails the award once', async () => {
    const { tenantId, orderId } = await seedOrder()
    const first = await award(tenantId, orderId, 'k-once', { points: 120 })
    const again = await award(tenantId, orderId, 'k-once', { points: 120 })
    expect(first).toMatchObject({ kind: 'executed', response: { status: 202, body: { object: 'loyalty_award', orderId, points: 120 } } })
    const { id } = (first as Extract<IdempotentOutcome, { kind: 'executed' }>).response.body
    expect(again).toMatchObject({ kind: 'replayed', response: { status: 202, body: { id } } })
    const [job, ...others] = await jobsOf(orderId)
    expect(others).toEqual([])

    await startWorker('once')
    await untilCompleted([job!.id])
    const awardId = (job!.payload as { awardId: string }).awardId
    expect((await mailOf(orderId)).map(mail => mail.subject)).toEqual([`120 loyalty points for order ${orderId}`])
    expect((await markersOf(orderId)).map(marker => [marker.effect, marker.jobId])).toEqual([[loyaltyEffect(awardId), job!.id]])
  })

  it('writes the email once even when the completed job is put back and run again', async () => {
    const { tenantId, orderId } = await seedOrder()
    await award(tenantId, orderId, 'k-twice', { points: 7 })
    const [job] = await jobsOf(orderId)
    await startWorker('twice')
    await untilCompleted([job!.id])

    await db.update(jobs).set({ status: 'queued', runAt: sql`now()`, lockedBy: null, completedAt: null }).where(eq(jobs.id, job!.id))
    await untilCompleted([job!.id], 2)
    expect(await mailOf(orderId)).toHaveLength(1)
    expect(await markersOf(orderId)).toHaveLength(1)
  })

  it('two workers, several awards of one order: each job completes on its first attempt, each award mails once', async () => {
    const { tenantId, orderId } = await seedOrder()
    for (let n = 1; n <= 6; n++) expect(await award(tenantId, orderId, `k-many-${n}`, { points: n })).toMatchObject({ kind: 'executed' })
    const ids = (await jobsOf(orderId)).map(job => job.id)
    expect(ids).toHaveLength(6)

    await Promise.all([startWorker('a'), startWorker('b')])
    await untilCompleted(ids)
    expect((await mailOf(orderId)).map(mail => mail.subject).sort()).toEqual([1, 2, 3, 4, 5, 6].map(n => `${n} loyalty points for order ${orderId}`).sort())
    expect(await markersOf(orderId)).toHaveLength(6)
  })

  it('answers an order the tenant does not have with 404, stored and replayed under the key, and enqueues nothing', async () => {
    const { orderId } = await seedOrder()
    const { tenantId: otherTenant } = await seedOrder()
    const first = await award(otherTenant, orderId, 'k-other', { points: 5 })
    expect(first).toMatchObject({ kind: 'executed', response: { status: 404, body: { type: '/problems/not-found' } } })
    expect(await award(otherTenant, orderId, 'k-other', { points: 5 })).toMatchObject({ kind: 'replayed', response: { status: 404 } })
    expect(await jobsOf(orderId)).toEqual([])
  })
}

describeOnBothBackends('extending: the example job kind and its route\'s work', extendingContract)
