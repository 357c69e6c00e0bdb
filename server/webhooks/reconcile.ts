import { and, asc, eq, inArray, isNotNull, isNull, lt, sql } from 'drizzle-orm'
import type { DatabaseHandle } from '@idempotent-checkout/db-kit'
import { newId } from '../db/ids'
import { jobs, orders, refunds } from '../db/schema'
import { transaction } from '@idempotent-checkout/db-kit'
import { createJobStore } from '../jobs/store'
import { paymentCreateIntentJob, paymentRefundJob } from '../orders/job-types'
import { applyRefundOutcome } from '../orders/payment-state'
import { type IdempotencyDeps, runIdempotent } from 'nuxt-idempotency/core'
import { fingerprint } from 'nuxt-idempotency/core'
import { type MaintenanceResult, withTaskLock } from '../maintenance/task-lock'
import { log } from '../observability/logger'
import { metrics } from '../observability/metrics'
import { planWebhookIngest } from './ingest'
import { requestedStatusOf, type PaymentEvent } from './types'
import type { PaymentProvider } from '../payments/types'
import { providerScope } from '../../shared/resources'

/**
 * The webhook that never came: orders still awaiting payment a while after their last change are
 * looked up at the provider. A state that moves the order is stored as a provider event
 * (source `reconciliation`, the API's answer as its body) through the same idempotency layer and
 * `webhook.apply` job as a delivery, so it is applied once, by precedence, with the order's effects
 * once — however many instances reconcile, and whether the real webhook comes later or never.
 */

/** Orders asked about per run; the ones checked longest ago go first, so every pending order has its turn. */
const RECONCILE_BATCH = 50
export const RECONCILE_ROUTE = 'payments:reconcile'

export interface ReconcileOptions {
  handle: DatabaseHandle
  provider: PaymentProvider
  idempotency: IdempotencyDeps
  /** Only orders unchanged for this long are asked about: younger ones may still get their webhook. */
  afterSeconds: number
  ttlSeconds: number
  signal?: AbortSignal
}

export function reconcilePayments(options: ReconcileOptions): Promise<MaintenanceResult> {
  return withTaskLock(options.idempotency.locks, 'payments-reconcile', async () => ({
    counts: {
      ...await reconcileOnce(options),
      ...await askAgainForMissingPayments(options),
      ...await reconcilePendingRefunds(options),
    },
  }))
}

/**
 * Provider calls that ran out of attempts while the provider stayed down: an order's payment never
 * created (its payment.create_intent job a dead letter), and a refund never asked for (its
 * payment.refund job a dead letter, the refund still pending with no provider id). The jobs are
 * redriven, under the same keys, so they complete when the provider is back, without an operator.
 */
async function askAgainForMissingPayments({ handle, afterSeconds }: ReconcileOptions): Promise<Record<string, number>> {
  const { db } = handle
  const deadFor = and(eq(jobs.status, 'dead_letter'), lt(jobs.updatedAt, sql`now() - ${afterSeconds}::int * interval '1 second'`))
  const [payments, refundCalls] = await Promise.all([
    db.select({ id: jobs.id }).from(jobs)
      .innerJoin(orders, eq(orders.id, jobs.dedupeKey))
      .where(and(eq(jobs.kind, paymentCreateIntentJob.kind), deadFor, eq(orders.status, 'pending_payment'), isNull(orders.paymentIntentId), isNull(orders.paymentError)))
      .limit(RECONCILE_BATCH),
    db.select({ id: jobs.id }).from(jobs)
      .innerJoin(refunds, eq(refunds.id, jobs.dedupeKey))
      .where(and(eq(jobs.kind, paymentRefundJob.kind), deadFor, eq(refunds.status, 'pending'), isNull(refunds.providerRefundId)))
      .limit(RECONCILE_BATCH),
  ])
  const store = createJobStore(db)
  const redrive = async (rows: Array<{ id: string }>) => {
    let redriven = 0
    for (const { id } of rows) if (await store.redrive(id)) redriven++
    return redriven
  }
  const counts = { paymentsAskedAgain: await redrive(payments), refundsAskedAgain: await redrive(refundCalls) }
  if (counts.paymentsAskedAgain || counts.refundsAskedAgain) log.info('reconciliation asked the provider again for calls that ran out of attempts', counts)
  return counts
}

/**
 * Refunds the provider took but left pending (Stripe's can be), whose settling webhook never came:
 * asked about by their provider id, and settled as the provider says, under the order's lock.
 */
async function reconcilePendingRefunds({ handle, provider, afterSeconds, signal = AbortSignal.timeout(60_000) }: ReconcileOptions): Promise<Record<string, number>> {
  const { db } = handle
  const pending = await db.select({ id: refunds.id, orderId: refunds.orderId, providerRefundId: refunds.providerRefundId, paymentId: orders.paymentIntentId }).from(refunds)
    .innerJoin(orders, eq(orders.id, refunds.orderId))
    .where(and(
      eq(refunds.status, 'pending'),
      isNotNull(refunds.providerRefundId),
      eq(orders.paymentProvider, provider.name),
      lt(refunds.updatedAt, sql`now() - ${afterSeconds}::int * interval '1 second'`),
    ))
    .orderBy(asc(refunds.updatedAt))
    .limit(RECONCILE_BATCH)
  const counts = { refundsChecked: 0, refundsSettled: 0, refundsFailed: 0 }
  for (const refund of pending) {
    counts.refundsChecked++
    try {
      const state = await provider.readRefund({ orderId: refund.orderId, paymentId: refund.paymentId ?? refund.orderId, refundId: refund.id, providerRefundId: refund.providerRefundId! }, signal)
      if (!state || state.status === 'pending') {
        await db.update(refunds).set({ updatedAt: sql`now()` }).where(eq(refunds.id, refund.id))
        continue
      }
      await transaction(db, tx => applyRefundOutcome(tx, refund.orderId, refund.id, { status: state.status, providerRefundId: state.id }, {}))
      counts.refundsSettled++
    }
    catch (error) {
      counts.refundsFailed++
      log.warn('reconciliation could not read a refund', { refundId: refund.id, provider: provider.name, error: (error as Error).message })
    }
  }
  return counts
}

async function reconcileOnce({ handle, provider, idempotency, afterSeconds, ttlSeconds, signal = AbortSignal.timeout(60_000) }: ReconcileOptions): Promise<Record<string, number>> {
  const { db } = handle
  const due = await db.select({ id: orders.id, paymentIntentId: orders.paymentIntentId }).from(orders)
    .where(and(
      // Written into the text, not bound: a prepared statement's generic plan can then use the partial
      // index of orders awaiting payment (orders_awaiting_payment_idx) instead of scanning every order.
      sql`${orders.status} = 'pending_payment'`,
      isNotNull(orders.paymentIntentId),
      eq(orders.paymentProvider, provider.name),
      lt(orders.updatedAt, sql`now() - ${afterSeconds}::int * interval '1 second'`),
    ))
    .orderBy(asc(sql`coalesce(${orders.paymentCheckedAt}, ${orders.updatedAt})`))
    .limit(RECONCILE_BATCH)
  const counts = { checked: 0, recorded: 0, alreadyRecorded: 0, unchanged: 0, missing: 0, failed: 0 }
  if (!due.length) return counts
  // A task run is no request: its id still ties the stored events and their jobs together.
  const requestId = newId('task')
  const scope = providerScope(provider.name)
  for (const order of due) {
    counts.checked++
    let state
    try {
      state = await provider.readPayment({ orderId: order.id, paymentId: order.paymentIntentId! }, signal)
    }
    catch (error) {
      // The provider is down or refuses: the next run asks again.
      counts.failed++
      log.warn('reconciliation could not read a payment', { orderId: order.id, provider: provider.name, error: (error as Error).message })
      continue
    }
    if (!state) {
      counts.missing++
      continue
    }
    if (requestedStatusOf[state.type] === null) {
      counts.unchanged++
      continue
    }
    const event: PaymentEvent = {
      // One id per payment and state: a second run, or another instance, finds it recorded.
      eventId: `reconcile:${state.paymentId}:${state.providerStatus}`,
      type: state.type,
      orderId: order.id,
      paymentId: state.paymentId,
      amount: state.amount,
      currency: state.currency,
    }
    // A state past the payment (a refund) is recorded with the payment it proves, which no event
    // will report now: applied in either order, the payment takes the order past paid.
    const events: PaymentEvent[] = state.capturedAmount === undefined
      ? [event]
      : [{ ...event, eventId: `reconcile:${state.paymentId}:paid`, type: 'payment.succeeded', amount: state.capturedAmount }, event]
    for (const found of events) {
      const outcome = await runIdempotent(idempotency, {
        scope,
        route: RECONCILE_ROUTE,
        key: found.eventId,
        fingerprint: fingerprint({ method: 'TASK', route: RECONCILE_ROUTE, scope, payload: found }),
        requestId,
        ttlSeconds,
        waitMs: 0,
        // Stored as a webhook delivery's answer would be (the same record, replayed the same way).
        annotateBody: true,
      }, {
        mode: 'atomic',
        plan: planWebhookIngest(provider.name, { event: found, rawBody: JSON.stringify(state.answer), signatureHeaders: {}, source: 'reconciliation' }, requestId),
      })
      if (outcome.kind === 'executed') {
        counts.recorded++
        metrics.paymentsReconciled.inc({ provider: provider.name })
        log.info('reconciliation found a payment no webhook reported', { orderId: order.id, provider: provider.name, eventId: found.eventId, type: found.type, requestId })
      }
      else {
        counts.alreadyRecorded++
      }
    }
  }
  await db.update(orders).set({ paymentCheckedAt: sql`now()` }).where(inArray(orders.id, due.map(order => order.id)))
  return counts
}
