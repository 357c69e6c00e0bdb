import { and, asc, eq, gte, inArray, isNotNull, lt, notExists, or, sql } from 'drizzle-orm'
import type { DatabaseHandle } from '@idempotent-checkout/db-kit'
import { transaction } from '@idempotent-checkout/db-kit'
import type { Locks } from 'nuxt-idempotency/core'
import { newId } from '../db/ids'
import { ledgerChecks, orders, refunds } from '../db/schema'
import { type MaintenanceResult, withTaskLock } from '../maintenance/task-lock'
import { log } from '../observability/logger'
import { metrics } from '../observability/metrics'
import type { LedgerView } from '../../shared/ops-api'
import { compareLedgers, findingOfHeal, healedFindings, type LedgerHeal, type LedgerOrder, ourLedger } from './compare'
import { recordFindings, recordHeals, refreshOpenGauge } from './discrepancies'
import { failRefundFailedAtProvider, recordProviderRefund } from './heal'
import type { ProviderLedgerReader } from './types'

/**
 * The ledger check (task payments:ledger-check): the orders whose money moved in the last
 * LEDGER_CHECK_DAYS are compared with the provider's ledger, a batch per run, the longest unchecked
 * first. What is safe to heal is healed (compare.ts, heal.ts); the rest is a discrepancy for an
 * operator (discrepancies.ts). Under the task lock, so one instance checks at a time.
 */

/** Orders compared per run; a run also stops taking orders after RUN_BUDGET_MS (the task lock is held 60 s and not renewed). */
export const LEDGER_CHECK_BATCH = 100
const RUN_BUDGET_MS = 40_000

export interface LedgerCheckOptions {
  handle: DatabaseHandle
  locks: Locks
  reader: ProviderLedgerReader
  /** Orders whose money moved in this many days (LEDGER_CHECK_DAYS). */
  days: number
  /** An order or refund changed more recently may still get its webhook: it waits for a later run (LEDGER_CHECK_SETTLE_SECONDS). */
  settleSeconds: number
  signal?: AbortSignal
}

export async function runLedgerCheck(options: LedgerCheckOptions): Promise<MaintenanceResult> {
  const result = await withTaskLock(options.locks, 'ledger-check', async () => ({ counts: await checkOnce(options) }))
  // Every instance refreshes the gauge, the skipped ones too: a scrape of any instance tells the same.
  await refreshOpenGauge(options.handle.db)
  return result
}

type DueOrder = LedgerOrder & { tenantId: string, paymentId: string }

async function checkOnce({ handle, reader, days, settleSeconds, signal = AbortSignal.timeout(RUN_BUDGET_MS + 15_000) }: LedgerCheckOptions): Promise<Record<string, number>> {
  const { db } = handle
  const since = sql`now() - make_interval(days => ${days}::int)`
  const settled = sql`now() - make_interval(secs => ${settleSeconds}::int)`
  const due: DueOrder[] = await db.select({ id: orders.id, tenantId: orders.tenantId, status: orders.status, amount: orders.amount, currency: orders.currency, paymentId: sql<string>`${orders.paymentIntentId}` })
    .from(orders)
    .leftJoin(ledgerChecks, eq(ledgerChecks.orderId, orders.id))
    .where(and(
      eq(orders.paymentProvider, reader.provider),
      isNotNull(orders.paymentIntentId),
      // Money moved lately: placed (and paid, canceled) in the window, or a refund changed in it.
      or(gte(orders.createdAt, since), inArray(orders.id, db.select({ id: refunds.orderId }).from(refunds).where(gte(refunds.updatedAt, since)))),
      lt(orders.updatedAt, settled),
      notExists(db.select({ id: refunds.id }).from(refunds).where(and(eq(refunds.orderId, orders.id), gte(refunds.updatedAt, settled)))),
    ))
    .orderBy(sql`${ledgerChecks.checkedAt} asc nulls first`, asc(orders.createdAt))
    .limit(LEDGER_CHECK_BATCH)
  const counts = { checked: 0, agreed: 0, refundsRecorded: 0, refundsFailed: 0, noticesWithheld: 0, discrepanciesOpened: 0, discrepanciesResolved: 0, notCompared: 0 }
  if (!due.length) return counts
  // A task run is no request: its id still ties the rows it writes together.
  const requestId = newId('task')
  const started = Date.now()
  for (const order of due) {
    if (Date.now() - started > RUN_BUDGET_MS) break
    counts.checked++
    try {
      const theirs = await reader.read({ orderId: order.id, paymentId: order.paymentId, currency: order.currency }, signal)
      let ours = await readOurLedger(handle, order)
      let comparison = compareLedgers(order, ours, theirs)
      if (comparison.heals.length) {
        const healed: Array<{ heal: LedgerHeal, noticeWithheld: boolean }> = []
        for (const heal of comparison.heals) {
          const done = await applyHeal(handle, order, heal, requestId)
          if (heal.kind === 'record_provider_refund' && done.healed) counts.refundsRecorded++
          if (heal.kind === 'fail_our_refund' && done.healed) counts.refundsFailed++
          if (done.noticeWithheld) counts.noticesWithheld++
          if (!done.healed) continue
          metrics.ledgerHeals.inc({ provider: reader.provider, heal: heal.kind })
          healed.push({ heal, noticeWithheld: done.noticeWithheld })
        }
        await recordHeals(db, { id: order.id, tenantId: order.tenantId, provider: reader.provider }, healedFindings(healed, order.currency), ours, theirs ?? missingPayment(order))
        // Compared again: what healing could not settle is left for an operator.
        ours = await readOurLedger(handle, { ...order, status: await statusOf(handle, order.id) })
        comparison = compareLedgers(order, ours, theirs)
      }
      const findings = [...comparison.findings, ...comparison.heals.map(heal => findingOfHeal(heal, order.currency))]
      if (!findings.length) counts.agreed++
      const recorded = await recordFindings(db, { id: order.id, tenantId: order.tenantId, provider: reader.provider }, findings, ours, theirs ?? missingPayment(order))
      counts.discrepanciesOpened += recorded.opened
      counts.discrepanciesResolved += recorded.resolved
      if (recorded.opened) log.warn('ledger check found a discrepancy', { orderId: order.id, provider: reader.provider, kinds: findings.map(finding => finding.kind), requestId })
    }
    catch (error) {
      // The provider is down or refuses (or a write failed): the order is compared again once the others had their turn.
      counts.notCompared++
      log.warn('ledger check could not compare an order', { orderId: order.id, provider: reader.provider, error: (error as Error).message })
    }
    await db.insert(ledgerChecks).values({ orderId: order.id }).onConflictDoUpdate({ target: ledgerChecks.orderId, set: { checkedAt: sql`now()` } })
  }
  return counts
}

/** The provider's side when it has no such payment. */
const missingPayment = (order: LedgerOrder): LedgerView => ({ status: 'missing', currency: order.currency, captured: 0, refunded: 0, refunds: [] })

async function statusOf(handle: DatabaseHandle, orderId: string): Promise<string> {
  const [row] = await handle.db.select({ status: orders.status }).from(orders).where(eq(orders.id, orderId))
  return row!.status
}

async function readOurLedger(handle: DatabaseHandle, order: LedgerOrder): Promise<LedgerView> {
  const rows = await handle.db.select({ id: refunds.id, providerRefundId: refunds.providerRefundId, amount: refunds.amount, status: refunds.status, source: refunds.source })
    .from(refunds).where(eq(refunds.orderId, order.id)).orderBy(asc(refunds.createdAt), asc(refunds.id))
  return ourLedger(order, rows)
}

async function applyHeal(handle: DatabaseHandle, order: DueOrder, heal: LedgerHeal, requestId: string): Promise<{ healed: boolean, noticeWithheld: boolean }> {
  if (heal.kind === 'record_provider_refund') {
    const healed = await transaction(handle.db, tx => recordProviderRefund(tx, order.id, heal.refund, order.currency, { requestId }))
    if (healed) log.info('ledger check recorded a refund made at the provider', { orderId: order.id, providerRefundId: heal.refund.providerRefundId, amount: heal.refund.amount, requestId })
    return { healed, noticeWithheld: false }
  }
  const outcome = await transaction(handle.db, tx => failRefundFailedAtProvider(tx, order.id, heal.refundId, heal.providerRefundId, { requestId }))
  if (outcome.failed) log.warn('ledger check failed a refund the provider failed', { orderId: order.id, refundId: heal.refundId, noticeWithheld: outcome.noticeWithheld, requestId })
  return { healed: outcome.failed, noticeWithheld: outcome.noticeWithheld }
}
