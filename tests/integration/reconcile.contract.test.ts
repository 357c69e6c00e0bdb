import { eq, inArray, sql } from 'drizzle-orm'
import { afterAll, beforeAll, expect, it } from 'vitest'
import type { Database, DatabaseHandle } from '@idempotent-checkout/db-kit'
import { jobs, mailbox, orders, orderStatusHistory, paymentIntents, refunds, webhookEvents } from '../../server/db/schema'
import { paymentCreateIntentJob } from '../../server/orders/job-types'
import type { IdempotencyDeps } from 'nuxt-idempotency/core'
import { createReplayCache } from 'nuxt-idempotency/core'
import { createJobKinds } from '../../server/composition/job-kinds'
import { createWorker } from '../../server/jobs/worker'
import { createMockpayProvider } from '../../server/payments/mockpay/provider'
import { setLogLevel } from '../../server/observability/logger'
import { paymentIdempotencyKey } from '../../server/payments'
import { reconcilePayments } from '../../server/webhooks/reconcile'
import type { PaymentProvider } from '../../server/payments/types'
import { type DatabaseDriver, openSuiteDatabase, type SuiteDatabase } from '../support/databases'
import { seedOrders } from '../support/jobs'
import { describeOnBothBackends, type LockBackend } from '../support/lock-backends'
import { pollUntil } from '../support/poll'

/** The passes this suite does not exercise (payments never created, pending refunds): nothing found. */
const NOTHING_ELSE = { paymentsAskedAgain: 0, refundsAskedAgain: 0, refundsChecked: 0, refundsSettled: 0, refundsFailed: 0 }

// Reconciliation on both pairs the app runs on: what it finds at the provider (here mockpay's own
// ledger, a real implementation of the provider interface) becomes one stored event and one
// webhook.apply job per payment state, however often and however concurrently it runs.

if (!process.env.LOG_LEVEL) setLogLevel('error')

const AFTER_SECONDS = 60

function reconcileContract(driver: DatabaseDriver, openLocks: () => Promise<LockBackend>) {
  let database: SuiteDatabase
  let handle: DatabaseHandle
  let db: Database
  let lockBackend: LockBackend
  let provider: PaymentProvider
  let idempotency: IdempotencyDeps

  beforeAll(async () => {
    database = await openSuiteDatabase(driver, 'reconcile', { poolSize: 8 })
    handle = database.handle
    db = handle.db
    lockBackend = await openLocks()
    provider = createMockpayProvider(db)
    idempotency = { database: handle, locks: lockBackend.locks, replays: createReplayCache({ maxBytes: 1_000_000 }), lockTtlMs: 5_000, leaseMs: 30_000 }
  }, 60_000)

  afterAll(async () => {
    await lockBackend?.close()
    await database?.close()
  })

  const reconcile = () => reconcilePayments({ handle, provider, idempotency, afterSeconds: AFTER_SECONDS, ttlSeconds: 3600 })

  /** An order with a mockpay intent in `intentStatus`, last changed `ageSeconds` ago, at `providerName`. */
  async function pendingOrderWithIntent(intentStatus: string, options: { ageSeconds?: number, providerName?: string } = {}) {
    const { orderIds: [orderId] } = await seedOrders(db, 1)
    const created = await provider.createPayment({
      orderId: orderId!, amount: 150000, currency: 'IDR', paymentMethod: 'card', customerEmail: 'a@example.com',
      idempotencyKey: paymentIdempotencyKey(orderId!), firstAskedAt: new Date(),
    }, AbortSignal.timeout(5_000))
    await db.update(paymentIntents).set({ status: intentStatus }).where(eq(paymentIntents.id, created.id))
    await db.update(orders).set({
      paymentIntentId: created.id,
      paymentProvider: options.providerName ?? 'mockpay',
      updatedAt: sql`now() - ${options.ageSeconds ?? AFTER_SECONDS * 2}::int * interval '1 second'`,
    }).where(eq(orders.id, orderId!))
    return { orderId: orderId!, intentId: created.id }
  }

  const eventsOf = (orderId: string) => db.select({ eventId: webhookEvents.eventId, source: webhookEvents.source, type: webhookEvents.type, amount: webhookEvents.amount, signatureHeaders: webhookEvents.signatureHeaders })
    .from(webhookEvents).where(eq(webhookEvents.orderId, orderId))
  const applyJobsOf = async (orderId: string) => (await db.select({ kind: jobs.kind, payload: jobs.payload }).from(jobs)
    .where(eq(jobs.resourceId, `order:${orderId}`))).filter(job => job.kind === 'webhook.apply')

  it('stores what the provider says about a payment no webhook reported as one reconciliation event with its webhook.apply job; later runs find it recorded', async () => {
    await db.delete(jobs)
    const { orderId, intentId } = await pendingOrderWithIntent('succeeded')
    const first = await reconcile()
    expect(first).toEqual({ skipped: false, counts: { checked: 1, recorded: 1, alreadyRecorded: 0, unchanged: 0, missing: 0, failed: 0, ...NOTHING_ELSE } })
    expect(await eventsOf(orderId)).toEqual([{ eventId: `reconcile:${intentId}:succeeded`, source: 'reconciliation', type: 'payment.succeeded', amount: 150000, signatureHeaders: {} }])
    expect(await applyJobsOf(orderId)).toHaveLength(1)

    // The order is still pending (no worker ran): the next runs ask again and find the event recorded.
    for (let run = 0; run < 2; run++) {
      expect(await reconcile()).toEqual({ skipped: false, counts: { checked: 1, recorded: 0, alreadyRecorded: 1, unchanged: 0, missing: 0, failed: 0, ...NOTHING_ELSE } })
    }
    expect(await eventsOf(orderId)).toHaveLength(1)
    expect(await applyJobsOf(orderId)).toHaveLength(1)
  })

  it('two runs at once: one does the work, the other is skipped by the task lock; one event either way', async () => {
    await db.delete(jobs)
    const { orderId } = await pendingOrderWithIntent('succeeded')
    const results = await Promise.all([reconcile(), reconcile()])
    expect(results.filter(result => result.skipped)).toHaveLength(1)
    expect(await eventsOf(orderId)).toHaveLength(1)
    expect(await applyJobsOf(orderId)).toHaveLength(1)
  })

  it('asks only about pending orders of its provider unchanged for long enough, and records nothing for a payment still pending or unknown', async () => {
    await db.update(orders).set({ status: 'paid' })
    const pending = await pendingOrderWithIntent('requires_payment')
    const young = await pendingOrderWithIntent('succeeded', { ageSeconds: 1 })
    const elsewhere = await pendingOrderWithIntent('succeeded', { providerName: 'stripe' })
    const unknown = await pendingOrderWithIntent('succeeded')
    await db.delete(paymentIntents).where(eq(paymentIntents.id, unknown.intentId))

    expect(await reconcile()).toEqual({ skipped: false, counts: { checked: 2, recorded: 0, alreadyRecorded: 0, unchanged: 1, missing: 1, failed: 0, ...NOTHING_ELSE } })
    for (const order of [pending, young, elsewhere, unknown]) expect(await eventsOf(order.orderId)).toEqual([])
    // Asked-about orders are marked, so the next run asks the longest unchecked first.
    const checked = await db.select({ id: orders.id, checkedAt: orders.paymentCheckedAt }).from(orders)
      .where(inArray(orders.id, [pending.orderId, young.orderId, elsewhere.orderId, unknown.orderId]))
    expect(Object.fromEntries(checked.map(row => [row.id, row.checkedAt !== null]))).toEqual({
      [pending.orderId]: true, [young.orderId]: false, [elsewhere.orderId]: false, [unknown.orderId]: true,
    })
  })

  it('the stored event is applied by the worker like a webhook: the order is paid once, with one confirmation, and later runs ask no more', async () => {
    await db.delete(jobs)
    await db.update(orders).set({ status: 'paid' })
    const { orderId } = await pendingOrderWithIntent('succeeded')
    expect((await reconcile() as { counts: Record<string, number> }).counts.recorded).toBe(1)
    const worker = createWorker({
      db,
      notifications: handle.notifications,
      locks: lockBackend.locks,
      kinds: createJobKinds({ payments: provider }),
      workerId: `${driver}-reconcile`,
      concurrency: 2,
      prefetch: 0,
      pollIntervalMs: 50,
      claimCoalesceMs: 25,
      heartbeatTimeoutMs: 5_000,
      lockTtlMs: 2_000,
      lockBusyDelayMs: 50,
      backoff: { baseMs: 100, capMs: 1_000 },
      snooze: { max: 20, maxDelayMs: 60_000 },
      faultsEnabled: false,
    })
    await worker.start()
    try {
      await pollUntil('the order paid and its confirmation sent', async () =>
        (await db.select({ id: mailbox.id }).from(mailbox).where(eq(mailbox.orderId, orderId))).length === 1, { timeoutMs: 15_000 })
    }
    finally {
      await worker.stop(1_000)
    }
    const [order] = await db.select({ status: orders.status }).from(orders).where(eq(orders.id, orderId))
    expect(order!.status).toBe('paid')
    const history = await db.select({ fromStatus: orderStatusHistory.fromStatus, toStatus: orderStatusHistory.toStatus, outcome: orderStatusHistory.outcome })
      .from(orderStatusHistory).where(eq(orderStatusHistory.orderId, orderId))
    expect(history).toEqual([{ fromStatus: 'pending_payment', toStatus: 'paid', outcome: 'applied' }])
    expect(await reconcile()).toEqual({ skipped: false, counts: { checked: 0, recorded: 0, alreadyRecorded: 0, unchanged: 0, missing: 0, failed: 0, ...NOTHING_ELSE } })
  }, 30_000)

  it('asks again for a payment and a refund never asked for (their jobs out of attempts), and settles a refund left pending at the provider', async () => {
    await db.delete(jobs)
    await db.update(orders).set({ status: 'paid' })
    const { orderIds: [neverPaid, recent] } = await seedOrders(db, 2)
    const deadLetter = (orderId: string, age: number) => db.insert(jobs).values({
      id: `job_dead_${orderId}`, kind: paymentCreateIntentJob.kind, dedupeKey: orderId, payload: { orderId }, resourceId: `order:${orderId}`,
      status: 'dead_letter', attempt: 20, maxAttempts: 20, lastError: 'ProviderUnavailable: down', updatedAt: sql`now() - ${age}::int * interval '1 second'`,
    })
    await deadLetter(neverPaid!, AFTER_SECONDS * 2)
    // Out of attempts only just now: younger than the wait, left for the next run.
    await deadLetter(recent!, 0)

    // A refund the provider made (its ledger has it) whose settling answer never reached us.
    const { orderId, intentId } = await pendingOrderWithIntent('succeeded')
    await db.update(orders).set({ status: 'paid' }).where(eq(orders.id, orderId))
    const made = await provider.refundPayment({ orderId, paymentId: intentId, refundId: 're_reconcile', amount: 50_000, currency: 'IDR', reason: null, idempotencyKey: 'refund:re_reconcile', firstAskedAt: new Date() }, AbortSignal.timeout(5_000))
    await db.insert(refunds).values({
      id: 're_reconcile', orderId, tenantId: 'ten_reconcile', amount: 50_000, currency: 'IDR', status: 'pending', source: 'api',
      providerRefundId: made.id, updatedAt: sql`now() - ${AFTER_SECONDS * 2}::int * interval '1 second'`,
    })
    await db.delete(jobs).where(eq(jobs.kind, 'mockpay.deliver'))
    // A refund never asked for: its payment.refund job ran out of attempts while the provider was down.
    await db.insert(refunds).values({ id: 're_never_asked', orderId, tenantId: 'ten_reconcile', amount: 10_000, currency: 'IDR', status: 'pending', source: 'api' })
    await db.insert(jobs).values({
      id: 'job_dead_refund', kind: 'payment.refund', dedupeKey: 're_never_asked', payload: { orderId, refundId: 're_never_asked' }, resourceId: `order:${orderId}`,
      status: 'dead_letter', attempt: 20, maxAttempts: 20, lastError: 'ProviderUnavailable: down', updatedAt: sql`now() - ${AFTER_SECONDS * 2}::int * interval '1 second'`,
    })

    const { counts } = await reconcile() as { counts: Record<string, number> }
    expect(counts).toMatchObject({ paymentsAskedAgain: 1, refundsAskedAgain: 1, refundsChecked: 1, refundsSettled: 1, refundsFailed: 0 })
    const [redrivenRefund] = await db.select({ status: jobs.status, attempt: jobs.attempt }).from(jobs).where(eq(jobs.id, 'job_dead_refund'))
    expect(redrivenRefund).toEqual({ status: 'queued', attempt: 0 })
    const intentJobs = await db.select({ dedupeKey: jobs.dedupeKey, status: jobs.status, attempt: jobs.attempt }).from(jobs).where(eq(jobs.kind, paymentCreateIntentJob.kind))
    expect(Object.fromEntries(intentJobs.map(({ dedupeKey, ...job }) => [dedupeKey, job])))
      .toEqual({ [neverPaid!]: { status: 'queued', attempt: 0 }, [recent!]: { status: 'dead_letter', attempt: 20 } })
    const [refund] = await db.select({ status: refunds.status }).from(refunds).where(eq(refunds.id, 're_reconcile'))
    expect(refund!.status).toBe('succeeded')
    const [order] = await db.select({ status: orders.status }).from(orders).where(eq(orders.id, orderId))
    expect(order!.status).toBe('partially_refunded')
    // Settled once: a second run finds nothing pending.
    expect(((await reconcile()) as { counts: Record<string, number> }).counts).toMatchObject({ refundsChecked: 0, refundsSettled: 0 })
  }, 30_000)
}

describeOnBothBackends('reconciliation contract', reconcileContract)
