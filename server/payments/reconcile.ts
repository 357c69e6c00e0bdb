import { and, asc, eq, inArray, isNotNull, lt, sql } from 'drizzle-orm'
import type { DatabaseHandle } from '../db/client'
import { newId } from '../db/ids'
import { orders } from '../db/schema'
import { type IdempotencyDeps, runIdempotent } from '../idempotency/core'
import { fingerprint } from '../idempotency/fingerprint'
import { withTaskLock, type MaintenanceResult } from '../jobs/maintenance'
import { log } from '../observability/logger'
import { metrics } from '../observability/metrics'
import { planWebhookIngest } from '../webhooks/ingest'
import { requestedStatusOf, type PaymentEvent } from '../webhooks/types'
import type { PaymentProvider } from './types'
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
  return withTaskLock(options.idempotency.locks, 'payments-reconcile', () => reconcileOnce(options))
}

async function reconcileOnce({ handle, provider, idempotency, afterSeconds, ttlSeconds, signal = AbortSignal.timeout(60_000) }: ReconcileOptions): Promise<Record<string, number>> {
  const { db } = handle
  const due = await db.select({ id: orders.id, paymentIntentId: orders.paymentIntentId }).from(orders)
    .where(and(
      eq(orders.status, 'pending_payment'),
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
    const outcome = await runIdempotent(idempotency, {
      scope,
      route: RECONCILE_ROUTE,
      key: event.eventId,
      fingerprint: fingerprint({ method: 'TASK', route: RECONCILE_ROUTE, scope, payload: event }),
      requestId,
      ttlSeconds,
      waitMs: 0,
    }, {
      mode: 'atomic',
      plan: planWebhookIngest(provider.name, { event, rawBody: JSON.stringify(state.answer), signatureHeaders: {}, source: 'reconciliation' }, requestId),
    })
    if (outcome.kind === 'executed') {
      counts.recorded++
      metrics.paymentsReconciled.inc({ provider: provider.name })
      log.info('reconciliation found a payment no webhook reported', { orderId: order.id, provider: provider.name, eventId: event.eventId, type: event.type, requestId })
    }
    else {
      counts.alreadyRecorded++
    }
  }
  await db.update(orders).set({ paymentCheckedAt: sql`now()` }).where(inArray(orders.id, due.map(order => order.id)))
  return counts
}
