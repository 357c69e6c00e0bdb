import { randomUUID } from 'node:crypto'
import { and, asc, count, eq, notInArray } from 'drizzle-orm'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Database, DatabaseHandle } from '@idempotent-checkout/db-kit'
import { newId } from '../../server/db/ids'
import { invoices, jobs, mailbox, orders, orderStatusHistory, refunds, sideEffects, webhookEvents } from '../../server/db/schema'
import { transaction, violatedUniqueConstraint } from '@idempotent-checkout/db-kit'
import { createJobKinds } from '../../server/composition/job-kinds'
import { createWorker, type Worker } from '../../server/jobs/worker'
import { createMockpayProvider } from '../../server/payments/mockpay/provider'
import { setLogLevel } from '../../server/observability/logger'
import { applyPaymentStatus, type PaymentStatus, paymentStatusPrecedence } from '../../server/orders/payment-state'
import { planWebhookIngest } from '../../server/webhooks/ingest'
import type { VerifiedDelivery } from '../../server/webhooks/receive'
import { signStandardWebhook } from 'nuxt-idempotency/core'
import { type PaymentEvent, requestedStatusOf } from '../../server/webhooks/types'
import { type DatabaseDriver, openSuiteDatabase, type SuiteDatabase } from '../support/databases'
import { seedOrders, seedOrderWithId } from '../support/jobs'
import { describeOnBothBackends, type LockBackend } from '../support/lock-backends'
import { pollUntil } from '../support/poll'

// Payment events from ingestion to effects, on both pairs the app runs on: Postgres with Redis
// locks, and PGlite with in-process locks. Events are stored the way the webhook route stores them
// (planWebhookIngest's statements in one transaction, its answer when the event was stored before)
// and applied by the real worker; every
// expectation is about rows.

const POLL_INTERVAL_MS = 50
const LOCK_BUSY_DELAY_MS = 50
const BACKOFF = { baseMs: 100, capMs: 2_000 }
/** Generous: lock expiry and rescue are the worker suite's subject, not this one's. */
const LOCK_TTL_MS = 2_000
const HEARTBEAT_TIMEOUT_MS = 5_000
const WORKERS = 2
/** Several applies of one order are claimed at once and race for its lock and its row. */
const WORKER_CONCURRENCY = 3
const DRAIN_TIMEOUT_MS = 20_000
const WEBHOOK_SECRET = `whsec_${Buffer.from('payment events contract secret').toString('base64')}`
/** What seedOrders / seedOrderWithId give every order: events must match it or a success is ignored. */
const ORDER_AMOUNT = 150000
const ORDER_CURRENCY = 'IDR'

// The runner logs every attempt; LOG_LEVEL=info brings the lines back when a test needs explaining.
if (!process.env.LOG_LEVEL) setLogLevel('error')

type StandardType = 'payment.succeeded' | 'payment.failed' | 'payment.refunded'
const STANDARD_TYPES: StandardType[] = ['payment.succeeded', 'payment.failed', 'payment.refunded']

const rank = (status: string) => paymentStatusPrecedence.indexOf(status as PaymentStatus)
const statusOf = (type: StandardType) => requestedStatusOf[type]!

/** What a provider may say about an order, measured against the order's amount and currency. */
const EVENT_KINDS = {
  payment: { type: 'payment.succeeded', amount: ORDER_AMOUNT, currency: ORDER_CURRENCY },
  underpayment: { type: 'payment.succeeded', amount: ORDER_AMOUNT - 50_000, currency: ORDER_CURRENCY },
  failure: { type: 'payment.failed', amount: ORDER_AMOUNT, currency: ORDER_CURRENCY },
  full_refund: { type: 'payment.refunded', amount: ORDER_AMOUNT, currency: ORDER_CURRENCY },
  partial_refund: { type: 'payment.refunded', amount: ORDER_AMOUNT - 100_000, currency: ORDER_CURRENCY },
  refund_in_another_currency: { type: 'payment.refunded', amount: ORDER_AMOUNT, currency: 'USD' },
} as const satisfies Record<string, { type: StandardType, amount: number, currency: string }>
type EventKind = keyof typeof EVENT_KINDS
const EVENT_KIND_NAMES = Object.keys(EVENT_KINDS) as EventKind[]

const isPaid = (status: PaymentStatus) => rank(status) >= rank('paid')
/** Above paid the status follows what was refunded. */
const statusAfterRefunds = (refunded: number): PaymentStatus => refunded >= ORDER_AMOUNT ? 'refunded' : refunded > 0 ? 'partially_refunded' : 'paid'
/** A refund event's amount is the total refunded so far; one in another currency, or above the order, counts for nothing. */
const refundTotalOf = (kind: EventKind) => {
  const { type, amount, currency } = EVENT_KINDS[kind]
  return type === 'payment.refunded' && currency === ORDER_CURRENCY && amount <= ORDER_AMOUNT ? amount : 0
}

/**
 * The model of an order's final status: only a matching payment pays it; above paid the largest
 * refund total says how much was refunded — whichever arrived first.
 */
function finalStatus(kinds: EventKind[]): PaymentStatus {
  if (kinds.includes('payment')) return statusAfterRefunds(Math.max(0, ...kinds.map(refundTotalOf)))
  return kinds.includes('failure') ? 'payment_failed' : 'pending_payment'
}

interface Step { to: PaymentStatus, outcome: 'applied' | 'ignored', reason: string | null }
/** What the events applied so far left: the status, and the refunds recorded from the providers' totals. */
interface ModelState { status: PaymentStatus, refunded: number, refunds: number[] }

/** The model of one application of an event to an order in `state` (which it advances). */
function expectedStep(kind: EventKind, state: ModelState): Step {
  const current = state.status
  const { type, amount, currency } = EVENT_KINDS[kind]
  const ignored = (reason: string): Step => ({ to: current, outcome: 'ignored', reason })
  if (type === 'payment.refunded') {
    if (currency !== ORDER_CURRENCY || amount > ORDER_AMOUNT) return ignored('amount_mismatch')
    const unknown = amount - state.refunded
    if (unknown <= 0) return ignored('no_refund')
    state.refunded += unknown
    state.refunds.push(unknown)
    if (!isPaid(current)) return ignored('awaiting_payment')
    return { to: state.status = statusAfterRefunds(state.refunded), outcome: 'applied', reason: 'refund_at_provider' }
  }
  const requested = statusOf(type)
  if (requested === current) return ignored('same_status')
  if (rank(requested) < rank(current)) return ignored('lower_precedence')
  if (kind === 'underpayment') return ignored('amount_mismatch')
  state.status = requested === 'paid' ? statusAfterRefunds(state.refunded) : requested
  return { to: state.status, outcome: 'applied', reason: null }
}

/** A distinct provider event (its own event id) and how many times the provider delivers it. */
interface EventSpec {
  kind: EventKind
  copies: number
}

const eventSpecs = (minLength: number) => fc.array(
  fc.record({ kind: fc.constantFrom(...EVENT_KIND_NAMES), copies: fc.integer({ min: 1, max: 3 }) }),
  { minLength, maxLength: 4 },
)

/** Every delivery of every event (by the event's index), shuffled into one arrival order. */
function arrivalOrder(specs: EventSpec[]): fc.Arbitrary<number[]> {
  const deliveries = specs.flatMap((spec, index) => Array.from({ length: spec.copies }, () => index))
  return fc.shuffledSubarray(deliveries, { minLength: deliveries.length, maxLength: deliveries.length })
}

/** A new provider event (its own event id) of the given kind about the order. */
function paymentEvent(orderId: string, kind: EventKind): PaymentEvent {
  return { eventId: `msg_${randomUUID().replaceAll('-', '')}`, orderId, paymentId: `pay_${orderId}`, ...EVENT_KINDS[kind] }
}

/** The kind an event was made as: the kinds differ in type, amount or currency. */
function kindOf(event: PaymentEvent): EventKind {
  return EVENT_KIND_NAMES.find((kind) => {
    const { type, amount, currency } = EVENT_KINDS[kind]
    return event.type === type && event.amount === amount && event.currency === currency
  })!
}

/** The verified delivery the standard route hands over: a redelivery is signed again at its own time. */
function standardDelivery(event: PaymentEvent): VerifiedDelivery {
  const rawBody = JSON.stringify({
    type: event.type,
    timestamp: '2026-11-29T10:00:00.000Z',
    data: { orderId: event.orderId, paymentId: event.paymentId, amount: event.amount, currency: event.currency },
  })
  const at = Math.floor(Date.now() / 1000)
  return {
    event,
    rawBody,
    signatureHeaders: {
      'webhook-id': event.eventId,
      'webhook-timestamp': String(at),
      'webhook-signature': signStandardWebhook(WEBHOOK_SECRET, event.eventId, at, rawBody),
    },
  }
}

function paymentEventsContract(driver: DatabaseDriver, openLockBackend: () => Promise<LockBackend>) {
  let database: SuiteDatabase
  let handle: DatabaseHandle
  let db: Database
  let lockBackend: LockBackend
  let requestCounter = 0

  beforeAll(async () => {
    // Both workers' jobs, heartbeats and the test's own reads and ingestions, without pool queueing.
    database = await openSuiteDatabase(driver, 'payment_events', { poolSize: 16 })
    handle = database.handle
    db = handle.db
    lockBackend = await openLockBackend()
  }, 60_000)

  afterAll(async () => {
    await lockBackend?.close()
    await database?.close()
  })

  const nextRequestId = () => `req_payment_${++requestCounter}`

  async function newOrder(): Promise<string> {
    const { orderIds: [orderId] } = await seedOrders(db, 1)
    return orderId!
  }

  async function orderStatus(orderId: string): Promise<string | undefined> {
    const [row] = await db.select({ status: orders.status }).from(orders).where(eq(orders.id, orderId))
    return row?.status
  }

  const historyOf = (orderId: string) =>
    db.select({
      fromStatus: orderStatusHistory.fromStatus,
      requestedStatus: orderStatusHistory.requestedStatus,
      toStatus: orderStatusHistory.toStatus,
      outcome: orderStatusHistory.outcome,
      reason: orderStatusHistory.reason,
      webhookEventId: orderStatusHistory.webhookEventId,
      jobId: orderStatusHistory.jobId,
      requestId: orderStatusHistory.requestId,
    }).from(orderStatusHistory).where(eq(orderStatusHistory.orderId, orderId)).orderBy(asc(orderStatusHistory.id))

  /** Every job that touches the order, by the resource it locks. */
  const jobsOf = (orderId: string) =>
    db.select().from(jobs).where(eq(jobs.resourceId, `order:${orderId}`)).orderBy(asc(jobs.kind), asc(jobs.createdAt))

  /** What the order's effects left behind, in counts that do not depend on the order's id. */
  async function effectsOf(orderId: string) {
    const mail = await db.select({ subject: mailbox.subject }).from(mailbox).where(eq(mailbox.orderId, orderId))
    const [invoiceCount] = await db.select({ count: count() }).from(invoices).where(eq(invoices.orderId, orderId))
    const markers = await db.select({ effect: sideEffects.effect }).from(sideEffects).where(eq(sideEffects.orderId, orderId)).orderBy(asc(sideEffects.effect))
    const subjects = [`Order ${orderId} confirmed`, `Order ${orderId} refunded`, `Part of order ${orderId} refunded`]
    return {
      confirmationEmails: mail.filter(row => row.subject === subjects[0]).length,
      refundNotices: mail.filter(row => row.subject === subjects[1]).length,
      partialRefundNotices: mail.filter(row => row.subject === subjects[2]).length,
      otherEmails: mail.filter(row => !subjects.includes(row.subject)).length,
      invoices: invoiceCount!.count,
      // A refund's marker names its refund: compared by kind.
      markers: markers.map(row => row.effect.replace(/^refund_notice:.*$/, 'refund_notice')).sort(),
    }
  }

  /**
   * The effects the model expects: the confirmation and the invoice once iff the order was paid, and
   * a notice per refund recorded once it was: "refunded" from the one that brings the refunds to the
   * order's amount (whichever settled last), "Part of" from every other.
   */
  function expectedEffects(final: PaymentStatus, refunds: number[] = []) {
    const paid = isPaid(final)
    const notices = paid ? refunds : []
    const whole = notices.reduce((sum, amount) => sum + amount, 0) >= ORDER_AMOUNT ? 1 : 0
    return {
      confirmationEmails: paid ? 1 : 0,
      refundNotices: whole,
      partialRefundNotices: notices.length - whole,
      otherEmails: 0,
      invoices: paid ? 1 : 0,
      markers: [...(paid ? ['confirmation_email', 'invoice'] : []), ...notices.map(() => 'refund_notice')].sort(),
    }
  }

  // Each call is its own transaction, so its writes may also leave with the COMMIT (as webhook.apply sends them): the same answers either way.
  describe.each([{ writesAtCommit: false }, { writesAtCommit: true }])('applyPaymentStatus (writesAtCommit: $writesAtCommit)', ({ writesAtCommit }) => {
    const apply = (orderId: string, status: PaymentStatus | null, context: Parameters<typeof applyPaymentStatus>[3] = {}) =>
      transaction(db, tx => applyPaymentStatus(tx, orderId, status, { ...context, writesAtCommit }))

    const effectJobs = (orderId: string) =>
      db.select({ kind: jobs.kind, dedupeKey: jobs.dedupeKey, resourceId: jobs.resourceId, payload: jobs.payload, requestId: jobs.requestId })
        .from(jobs).where(eq(jobs.resourceId, `order:${orderId}`)).orderBy(asc(jobs.kind), asc(jobs.createdAt))

    const effectJob = (orderId: string, kind: string, requestId: string | null) =>
      ({ kind, dedupeKey: orderId, resourceId: `order:${orderId}`, payload: { orderId }, requestId })

    /** A refund's notice: one job per refund, keyed by the refund's id. */
    const noticeJob = (orderId: string, requestId: string | null) => ({
      kind: 'order.send_refund_notice', dedupeKey: expect.stringMatching(/^re_/), resourceId: `order:${orderId}`,
      payload: { orderId, refundId: expect.stringMatching(/^re_/) }, requestId,
    })

    const historyRow = (row: Partial<Awaited<ReturnType<typeof historyOf>>[number]>) =>
      ({ requestedStatus: null, reason: null, webhookEventId: null, jobId: null, requestId: null, ...row })

    it('records an informational event (requested null) as ignored and leaves the order as it was', async () => {
      const orderId = await newOrder()
      expect(await apply(orderId, null, { requestId: 'req_info' }))
        .toEqual({ from: 'pending_payment', to: 'pending_payment', changed: false, reason: 'informational' })
      expect(await orderStatus(orderId)).toBe('pending_payment')
      expect(await historyOf(orderId)).toEqual([historyRow({
        fromStatus: 'pending_payment', toStatus: 'pending_payment', outcome: 'ignored', reason: 'informational', requestId: 'req_info',
      })])
      expect(await effectJobs(orderId)).toEqual([])
    })

    it('ignores a success for another amount or currency as amount_mismatch; the matching one pays', async () => {
      const orderId = await newOrder()
      const mismatch = { from: 'pending_payment', to: 'pending_payment', changed: false, reason: 'amount_mismatch' }
      expect(await apply(orderId, 'paid', { amount: ORDER_AMOUNT - 1, currency: ORDER_CURRENCY })).toEqual(mismatch)
      expect(await apply(orderId, 'paid', { amount: ORDER_AMOUNT, currency: 'USD' })).toEqual(mismatch)
      expect(await orderStatus(orderId)).toBe('pending_payment')
      expect(await effectJobs(orderId)).toEqual([])

      expect(await apply(orderId, 'paid', { amount: ORDER_AMOUNT, currency: ORDER_CURRENCY, requestId: 'req_match' }))
        .toEqual({ from: 'pending_payment', to: 'paid', changed: true })
      expect(await orderStatus(orderId)).toBe('paid')
      expect(await historyOf(orderId)).toEqual([
        historyRow({ fromStatus: 'pending_payment', requestedStatus: 'paid', toStatus: 'pending_payment', outcome: 'ignored', reason: 'amount_mismatch' }),
        historyRow({ fromStatus: 'pending_payment', requestedStatus: 'paid', toStatus: 'pending_payment', outcome: 'ignored', reason: 'amount_mismatch' }),
        historyRow({ fromStatus: 'pending_payment', requestedStatus: 'paid', toStatus: 'paid', outcome: 'applied', requestId: 'req_match' }),
      ])
      expect(await effectJobs(orderId)).toEqual([
        effectJob(orderId, 'order.issue_invoice', 'req_match'),
        effectJob(orderId, 'order.send_confirmation', 'req_match'),
      ])
    })

    it('a full refund before the matching payment waits as awaiting_payment; the payment then takes the order to refunded with all three effects', async () => {
      const orderId = await newOrder()
      const full = { amount: ORDER_AMOUNT, currency: ORDER_CURRENCY }
      expect(await apply(orderId, 'refunded', { ...full, requestId: 'req_refund', webhookEventId: 'whe_refund', jobId: 'job_refund' }))
        .toEqual({ from: 'pending_payment', to: 'pending_payment', changed: false, reason: 'awaiting_payment' })
      expect(await apply(orderId, 'payment_failed', { requestId: 'req_failed' })).toEqual({ from: 'pending_payment', to: 'payment_failed', changed: true })
      expect(await orderStatus(orderId)).toBe('payment_failed')
      expect(await effectJobs(orderId)).toEqual([])

      expect(await apply(orderId, 'paid', { ...full, requestId: 'req_paid', webhookEventId: 'whe_paid', jobId: 'job_paid' }))
        .toEqual({ from: 'payment_failed', to: 'refunded', changed: true })
      expect(await orderStatus(orderId)).toBe('refunded')
      expect(await effectJobs(orderId)).toEqual([
        effectJob(orderId, 'order.issue_invoice', 'req_paid'),
        effectJob(orderId, 'order.send_confirmation', 'req_paid'),
        noticeJob(orderId, 'req_paid'),
      ])
      expect(await historyOf(orderId)).toEqual([
        historyRow({ fromStatus: 'pending_payment', requestedStatus: 'refunded', toStatus: 'pending_payment', outcome: 'ignored', reason: 'awaiting_payment', webhookEventId: 'whe_refund', jobId: 'job_refund', requestId: 'req_refund' }),
        historyRow({ fromStatus: 'pending_payment', requestedStatus: 'payment_failed', toStatus: 'payment_failed', outcome: 'applied', requestId: 'req_failed' }),
        historyRow({ fromStatus: 'payment_failed', requestedStatus: 'paid', toStatus: 'refunded', outcome: 'applied', webhookEventId: 'whe_paid', jobId: 'job_paid', requestId: 'req_paid' }),
      ])
    })

    it('a partial refund after paid makes it partially_refunded with a notice for the part; the total that completes it refunds it, with a notice for the rest', async () => {
      const orderId = await newOrder()
      expect(await apply(orderId, 'paid', { amount: ORDER_AMOUNT, currency: ORDER_CURRENCY, requestId: 'req_paid' })).toEqual({ from: 'pending_payment', to: 'paid', changed: true })
      expect(await apply(orderId, 'refunded', { amount: ORDER_AMOUNT - 1, currency: ORDER_CURRENCY, requestId: 'req_partial' }))
        .toEqual({ from: 'paid', to: 'partially_refunded', changed: true })
      expect(await orderStatus(orderId)).toBe('partially_refunded')
      expect(await effectJobs(orderId)).toEqual([
        effectJob(orderId, 'order.issue_invoice', 'req_paid'),
        effectJob(orderId, 'order.send_confirmation', 'req_paid'),
        noticeJob(orderId, 'req_partial'),
      ])
      // The same total again tells nothing new.
      expect(await apply(orderId, 'refunded', { amount: ORDER_AMOUNT - 1, currency: ORDER_CURRENCY })).toEqual({ from: 'partially_refunded', to: 'partially_refunded', changed: false, reason: 'no_refund' })

      // Stripe's amount_refunded is cumulative: the refund that completes it says the whole amount.
      expect(await apply(orderId, 'refunded', { amount: ORDER_AMOUNT, currency: ORDER_CURRENCY, requestId: 'req_full' })).toEqual({ from: 'partially_refunded', to: 'refunded', changed: true })
      expect(await effectJobs(orderId)).toEqual([
        effectJob(orderId, 'order.issue_invoice', 'req_paid'),
        effectJob(orderId, 'order.send_confirmation', 'req_paid'),
        noticeJob(orderId, 'req_partial'),
        noticeJob(orderId, 'req_full'),
      ])
      expect(await db.select({ amount: refunds.amount, source: refunds.source, status: refunds.status }).from(refunds).where(eq(refunds.orderId, orderId)).orderBy(asc(refunds.createdAt)))
        .toEqual([{ amount: ORDER_AMOUNT - 1, source: 'provider', status: 'succeeded' }, { amount: 1, source: 'provider', status: 'succeeded' }])
      expect((await historyOf(orderId)).map(row => [row.fromStatus, row.toStatus, row.outcome, row.reason])).toEqual([
        ['pending_payment', 'paid', 'applied', null],
        ['paid', 'partially_refunded', 'applied', 'refund_at_provider'],
        ['partially_refunded', 'partially_refunded', 'ignored', 'no_refund'],
        ['partially_refunded', 'refunded', 'applied', 'refund_at_provider'],
      ])
    })

    it('ignores a refund of more than the order amount, or in another currency, as amount_mismatch', async () => {
      const orderId = await newOrder()
      await apply(orderId, 'paid', { amount: ORDER_AMOUNT, currency: ORDER_CURRENCY })
      const mismatch = { from: 'paid', to: 'paid', changed: false, reason: 'amount_mismatch' }
      expect(await apply(orderId, 'refunded', { amount: ORDER_AMOUNT + 1, currency: ORDER_CURRENCY })).toEqual(mismatch)
      expect(await apply(orderId, 'refunded', { amount: ORDER_AMOUNT, currency: 'USD' })).toEqual(mismatch)
      expect(await apply(orderId, 'refunded', { amount: ORDER_AMOUNT - 1, currency: 'USD' })).toEqual(mismatch)
      expect(await orderStatus(orderId)).toBe('paid')
      expect((await effectJobs(orderId)).map(job => job.kind)).toEqual(['order.issue_invoice', 'order.send_confirmation'])
      // A refund that names no amount is taken as full.
      expect(await apply(orderId, 'refunded', { currency: ORDER_CURRENCY })).toEqual({ from: 'paid', to: 'refunded', changed: true })
    })

    it('an underpaid order fully refunded, in either order, stays pending_payment: no confirmation, invoice or refund notice', async () => {
      const underpaid = { amount: ORDER_AMOUNT - 50_000, currency: ORDER_CURRENCY }
      const fullRefund = { amount: ORDER_AMOUNT, currency: ORDER_CURRENCY }
      const paidFirst = await newOrder()
      expect(await apply(paidFirst, 'paid', underpaid)).toEqual({ from: 'pending_payment', to: 'pending_payment', changed: false, reason: 'amount_mismatch' })
      expect(await apply(paidFirst, 'refunded', fullRefund)).toEqual({ from: 'pending_payment', to: 'pending_payment', changed: false, reason: 'awaiting_payment' })
      const refundFirst = await newOrder()
      expect(await apply(refundFirst, 'refunded', fullRefund)).toEqual({ from: 'pending_payment', to: 'pending_payment', changed: false, reason: 'awaiting_payment' })
      expect(await apply(refundFirst, 'paid', underpaid)).toEqual({ from: 'pending_payment', to: 'pending_payment', changed: false, reason: 'amount_mismatch' })
      for (const orderId of [paidFirst, refundFirst]) {
        expect(await orderStatus(orderId)).toBe('pending_payment')
        expect(await effectJobs(orderId)).toEqual([])
      }
    })

    it('applying paid twice: the second is ignored as same_status and enqueues nothing more', async () => {
      const orderId = await newOrder()
      expect(await apply(orderId, 'paid', { requestId: 'req_first' })).toEqual({ from: 'pending_payment', to: 'paid', changed: true })
      expect(await apply(orderId, 'paid', { requestId: 'req_second' })).toEqual({ from: 'paid', to: 'paid', changed: false, reason: 'same_status' })
      expect(await orderStatus(orderId)).toBe('paid')
      expect(await historyOf(orderId)).toEqual([
        historyRow({ fromStatus: 'pending_payment', requestedStatus: 'paid', toStatus: 'paid', outcome: 'applied', requestId: 'req_first' }),
        historyRow({ fromStatus: 'paid', requestedStatus: 'paid', toStatus: 'paid', outcome: 'ignored', reason: 'same_status', requestId: 'req_second' }),
      ])
      expect(await effectJobs(orderId)).toEqual([
        effectJob(orderId, 'order.issue_invoice', 'req_first'),
        effectJob(orderId, 'order.send_confirmation', 'req_first'),
      ])
    })

    it('returns undefined for an unknown order and writes nothing', async () => {
      const orderId = newId('ord')
      for (const status of [...STANDARD_TYPES.map(statusOf), null]) {
        expect(await apply(orderId, status, { requestId: 'req_unknown' })).toBeUndefined()
      }
      expect(await orderStatus(orderId)).toBeUndefined()
      expect(await historyOf(orderId)).toEqual([])
      expect(await effectJobs(orderId)).toEqual([])
    })
  })

  describe('ingested events applied by racing workers', () => {
    const workers: Worker[] = []

    beforeAll(async () => {
      // The effect jobs the direct tests above enqueued are not this block's business.
      await db.delete(jobs)
      for (let n = 1; n <= WORKERS; n++) {
        const worker = createWorker({
          db,
          notifications: handle.notifications,
          locks: lockBackend.locks,
          kinds: createJobKinds({ payments: createMockpayProvider(db), mockpay: { url: 'http://127.0.0.1:9/unused', secret: 'whsec_unused' } }),
          workerId: `${driver}-payments-${n}`,
          concurrency: WORKER_CONCURRENCY,
          prefetch: 8,
          pollIntervalMs: POLL_INTERVAL_MS,
          claimCoalesceMs: 25,
          heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS,
          lockTtlMs: LOCK_TTL_MS,
          lockBusyDelayMs: LOCK_BUSY_DELAY_MS,
          backoff: BACKOFF,
          snooze: { max: 20, maxDelayMs: 60 * 60 * 1000 },
          faultsEnabled: false,
        })
        workers.push(worker)
        await worker.start()
      }
    })

    afterAll(async () => {
      await Promise.all(workers.map(worker => worker.stop(100)))
    })

    interface StoredEvent {
      event: PaymentEvent
      storedId: string
      firstDelivery: VerifiedDelivery
      firstRequestId: string
    }

    /**
     * Ingests one delivery as the route does (its own transaction; its job insert wakes the workers after the commit)
     * and checks the answer: a new event is stored, a redelivery finds the stored one.
     */
    async function ingest(event: PaymentEvent, stored: Map<string, StoredEvent>): Promise<void> {
      const delivery = standardDelivery(event)
      const requestId = nextRequestId()
      const plan = planWebhookIngest('standard', delivery, requestId)(db, new Date())
      const result = await handle.transact(plan.statements).then(() => plan.result, async (error: unknown) => {
        const constraint = violatedUniqueConstraint(error)
        if (constraint === undefined) throw error
        return (await plan.onConstraintViolation!(constraint, db))!
      })
      const earlier = stored.get(event.eventId)
      if (earlier) {
        expect(result).toEqual({ status: 200, body: { received: true, eventId: event.eventId, alreadyStored: true }, resourceType: 'webhook_event', resourceId: earlier.storedId })
        return
      }
      expect(result).toEqual({ status: 200, body: { received: true, eventId: event.eventId }, resourceType: 'webhook_event', resourceId: expect.stringMatching(/^whe_/) })
      stored.set(event.eventId, { event, storedId: result.resourceId!, firstDelivery: delivery, firstRequestId: requestId })
    }

    /** Until none of the order's jobs is waiting, running or scheduled for a retry. */
    async function drain(orderIds: string[]): Promise<void> {
      for (const orderId of orderIds) {
        await pollUntil(`the jobs of ${orderId} are finished`, async () => {
          const [row] = await db.select({ count: count() }).from(jobs)
            .where(and(eq(jobs.resourceId, `order:${orderId}`), notInArray(jobs.status, ['completed', 'dead_letter'])))
          return row!.count === 0
        }, { timeoutMs: DRAIN_TIMEOUT_MS, intervalMs: 20 })
      }
    }

    /** Checks the order against the model of its distinct events, and returns what any arrival order must reproduce. */
    async function expectMatchesModel(orderId: string, stored: Map<string, StoredEvent>) {
      const events = [...stored.values()]
      const final = finalStatus(events.map(({ event }) => kindOf(event)))
      const byStoredId = new Map(events.map(entry => [entry.storedId, entry]))

      expect(await orderStatus(orderId)).toBe(final)

      // Each distinct event stored once, as first delivered, and settled by its apply job.
      const eventRows = await db.select().from(webhookEvents).where(eq(webhookEvents.orderId, orderId))
      expect(eventRows).toHaveLength(events.length)
      for (const row of eventRows) {
        const entry = byStoredId.get(row.id)
        expect(entry, `webhook event ${row.id}`).toBeDefined()
        const { event, firstDelivery, firstRequestId } = entry!
        expect(row).toMatchObject({
          provider: 'standard', eventId: event.eventId, type: event.type, orderId, paymentId: event.paymentId,
          amount: event.amount, currency: event.currency, rawBody: firstDelivery.rawBody,
          signatureHeaders: firstDelivery.signatureHeaders, requestId: firstRequestId,
        })
        expect(['applied', 'ignored']).toContain(row.status)
        expect(row.processedAt).toBeInstanceOf(Date)
      }

      // Every job ran to completion on its first attempt that held the lock: nothing failed or waits.
      const jobRows = await jobsOf(orderId)
      expect(jobRows.filter(job => job.status !== 'completed' || job.attempt !== 1 || job.errors.length > 0 || job.lastError !== null)).toEqual([])
      const applyJobs = jobRows.filter(job => job.kind === 'webhook.apply')
      expect(applyJobs.map(job => job.dedupeKey).sort()).toEqual(events.map(entry => entry.storedId).sort())
      for (const job of applyJobs) {
        const { event, storedId, firstRequestId } = byStoredId.get(job.dedupeKey)!
        expect(job).toMatchObject({ payload: { webhookEventId: storedId, orderId }, idempotencyKey: event.eventId, requestId: firstRequestId })
      }
      const applyJobOf = new Map(applyJobs.map(job => [job.dedupeKey, job.id]))

      // One history row per distinct event, written by its apply job. Rows are inserted under the
      // order's row lock, so their ids give the order in which the events were applied: a chain,
      // each step as the model of one application says.
      const history = await historyOf(orderId)
      expect(history.map(row => row.webhookEventId).sort()).toEqual(events.map(entry => entry.storedId).sort())
      const state: ModelState = { status: 'pending_payment', refunded: 0, refunds: [] }
      for (const row of history) {
        const { event, firstRequestId } = byStoredId.get(row.webhookEventId!)!
        const from = state.status
        const step = expectedStep(kindOf(event), state)
        expect(row).toMatchObject({
          fromStatus: from, requestedStatus: statusOf(event.type as StandardType), toStatus: step.to, outcome: step.outcome, reason: step.reason,
          jobId: applyJobOf.get(row.webhookEventId!), requestId: firstRequestId,
        })
        expect(eventRows.find(eventRow => eventRow.id === row.webhookEventId)!.status).toBe(row.outcome)
      }
      expect(state.status).toBe(final)
      // The refunds recorded from the totals, in the order they were applied.
      const refundRows = await db.select({ amount: refunds.amount, status: refunds.status, source: refunds.source }).from(refunds)
        .where(eq(refunds.orderId, orderId)).orderBy(asc(refunds.createdAt), asc(refunds.id))
      expect(refundRows).toEqual(state.refunds.map(amount => ({ amount, status: 'succeeded', source: 'provider' })))

      const effects = expectedEffects(final, state.refunds)
      expect(jobRows.filter(job => job.kind !== 'webhook.apply').map(job => job.kind).sort()).toEqual([
        ...(effects.confirmationEmails ? ['order.issue_invoice', 'order.send_confirmation'] : []),
        ...Array.from({ length: effects.refundNotices + effects.partialRefundNotices }, () => 'order.send_refund_notice'),
      ].sort())

      expect(await effectsOf(orderId)).toEqual(effects)
      return { status: final, effects, refunded: state.refunded, webhookEvents: eventRows.length, history: history.length, jobKinds: jobRows.map(job => job.kind).sort() }
    }

    /** Ingests `deliveries` of the order's events in the given arrival order (indices into `events`). */
    const deliveriesOf = (events: PaymentEvent[], arrival: number[]) => arrival.map(index => events[index]!)

    it('any multiset of events (payments matching or not, failures, full, partial and foreign refunds), in any arrival order, ends as the model says with each effect once iff its state was reached', async () => {
      await fc.assert(fc.asyncProperty(
        eventSpecs(1).chain(specs => fc.tuple(fc.constant(specs), arrivalOrder(specs))),
        async ([specs, arrival]) => {
          const orderId = await newOrder()
          const events = specs.map(spec => paymentEvent(orderId, spec.kind))
          const stored = new Map<string, StoredEvent>()
          for (const event of deliveriesOf(events, arrival)) await ingest(event, stored)
          expect(stored.size).toBe(specs.length)

          await drain([orderId])
          await expectMatchesModel(orderId, stored)
        },
      ), { numRuns: driver === 'postgres' ? 20 : 8 })
    }, 120_000)

    it('the same events in two arrival orders on two orders give the same final state, sum refunded and payment effects', async () => {
      await fc.assert(fc.asyncProperty(
        eventSpecs(2).chain(specs => fc.tuple(fc.constant(specs), arrivalOrder(specs), arrivalOrder(specs))),
        async ([specs, firstArrival, secondArrival]) => {
          fc.pre(firstArrival.join() !== secondArrival.join())
          const [orderA, orderB] = [await newOrder(), await newOrder()]
          const eventsA = specs.map(spec => paymentEvent(orderA, spec.kind))
          const eventsB = specs.map(spec => paymentEvent(orderB, spec.kind))
          const storedA = new Map<string, StoredEvent>()
          const storedB = new Map<string, StoredEvent>()
          // Interleaved, so the two orders' applies run side by side in the workers.
          const deliveriesA = deliveriesOf(eventsA, firstArrival)
          const deliveriesB = deliveriesOf(eventsB, secondArrival)
          for (let i = 0; i < deliveriesA.length; i++) {
            await ingest(deliveriesA[i]!, storedA)
            await ingest(deliveriesB[i]!, storedB)
          }

          await drain([orderA, orderB])
          const outcomeA = await expectMatchesModel(orderA, storedA)
          const outcomeB = await expectMatchesModel(orderB, storedB)
          // Totals that arrive out of order may record two provider refunds as one (a total says
          // how much, not in how many refunds): the state, the sum and the payment's effects agree.
          const arrivalFree = ({ status, refunded, effects }: typeof outcomeA) =>
            ({ status, refunded, confirmationEmails: effects.confirmationEmails, invoices: effects.invoices, otherEmails: effects.otherEmails })
          expect(arrivalFree(outcomeB)).toEqual(arrivalFree(outcomeA))
        },
      ), { numRuns: driver === 'postgres' ? 8 : 4 })
    }, 120_000)

    // Each event applied before the next is delivered, so the arrival order is exactly as listed.
    it.each<[string, EventKind[], PaymentStatus]>([
      ['a partial refund after the payment: partially refunded, one notice for the part', ['payment', 'partial_refund'], 'partially_refunded'],
      ['a partial, then the full refund total: refunded, a notice for each part, the last "refunded"', ['payment', 'partial_refund', 'full_refund'], 'refunded'],
      ['an underpayment, then a full refund: pending_payment, no effects', ['underpayment', 'full_refund'], 'pending_payment'],
      ['a full refund, then an underpayment: pending_payment, no effects', ['full_refund', 'underpayment'], 'pending_payment'],
      ['a full refund before the matching payment: refunded, all three effects', ['full_refund', 'payment'], 'refunded'],
      ['a refund in another currency after the payment: stays paid', ['payment', 'refund_in_another_currency'], 'paid'],
    ])('applied one by one, %s', async (_what, kinds, expected) => {
      const orderId = await newOrder()
      const stored = new Map<string, StoredEvent>()
      for (const kind of kinds) {
        await ingest(paymentEvent(orderId, kind), stored)
        await drain([orderId])
      }
      const outcome = await expectMatchesModel(orderId, stored)
      expect(outcome.status).toBe(expected)
      const refunds = kinds.reduce<number[]>((parts, kind) => {
        const unknown = refundTotalOf(kind) - parts.reduce((sum, part) => sum + part, 0)
        return unknown > 0 ? [...parts, unknown] : parts
      }, [])
      expect(outcome.effects).toEqual(expectedEffects(expected, refunds))
    })

    it('an event that overtakes its order fails retryably, and is applied by the first attempt after the order exists', async () => {
      const orderId = newId('ord')
      const event = paymentEvent(orderId, 'payment')
      const stored = new Map<string, StoredEvent>()
      await ingest(event, stored)
      const { storedId } = stored.get(event.eventId)!
      const readApplyJob = async () => {
        const [row] = await db.select().from(jobs).where(and(eq(jobs.kind, 'webhook.apply'), eq(jobs.dedupeKey, storedId)))
        expect(row, `webhook.apply job of ${storedId}`).toBeDefined()
        return row!
      }
      const notFound = `RetryableJobError: order ${orderId} not found (yet) for standard event ${event.eventId}`

      await pollUntil('the apply job has failed for want of its order', async () => (await readApplyJob()).status === 'failed', { intervalMs: 10 })
      const failed = await readApplyJob()
      expect(failed.attempt).toBeGreaterThanOrEqual(1)
      expect(failed).toMatchObject({ status: 'failed', lastError: notFound })
      expect(failed.errors.map(entry => [entry.errorClass, entry.message])).toEqual(Array.from({ length: failed.attempt }, () => ['retryable', notFound]))
      // Nothing was applied or marked: the event waits as received.
      const [waiting] = await db.select().from(webhookEvents).where(eq(webhookEvents.id, storedId))
      expect(waiting).toMatchObject({ status: 'received', processedAt: null })
      expect(await historyOf(orderId)).toEqual([])

      await seedOrderWithId(db, orderId, 'late@example.com', 'req_late_order')
      await pollUntil('the apply job has completed', async () => (await readApplyJob()).status === 'completed', { timeoutMs: DRAIN_TIMEOUT_MS, intervalMs: 20 })
      await drain([orderId])

      // Every failure was for the missing order, and the attempt after the last one succeeded.
      const completed = await readApplyJob()
      expect(completed).toMatchObject({ status: 'completed', lastError: null })
      expect(completed.errors.length).toBeGreaterThanOrEqual(failed.attempt)
      expect(completed.attempt).toBe(completed.errors.length + 1)
      expect(completed.errors.map(entry => [entry.errorClass, entry.message])).toEqual(Array.from({ length: completed.errors.length }, () => ['retryable', notFound]))
      expect(await orderStatus(orderId)).toBe('paid')
      const [applied] = await db.select().from(webhookEvents).where(eq(webhookEvents.id, storedId))
      expect(applied!.status).toBe('applied')
      expect(await historyOf(orderId)).toEqual([{
        fromStatus: 'pending_payment', requestedStatus: 'paid', toStatus: 'paid', outcome: 'applied', reason: null,
        webhookEventId: storedId, jobId: completed.id, requestId: stored.get(event.eventId)!.firstRequestId,
      }])
      expect((await jobsOf(orderId)).map(job => [job.kind, job.status])).toEqual([
        ['order.issue_invoice', 'completed'],
        ['order.send_confirmation', 'completed'],
        ['webhook.apply', 'completed'],
      ])
      expect(await effectsOf(orderId)).toEqual(expectedEffects('paid'))
    })
  })
}

describeOnBothBackends('payment events contract', paymentEventsContract)
