import { and, eq, isNotNull, notInArray, type SQL, sql } from 'drizzle-orm'
import type { Database } from '@idempotent-checkout/db-kit'
import { newId } from '../db/ids'
import { ledgerDiscrepancies } from '../db/schema'
import { metrics } from '../observability/metrics'
import { newestFirst } from '../ops/list'
import { type OperatorOrigin, recordOperatorAction } from '../ops/operator-actions'
import type { LedgerView } from '../../shared/ops-api'
import { type LedgerDiscrepancyKind, ledgerDiscrepancyKinds, type LedgerDiscrepancyStatus } from '../../shared/statuses'
import type { LedgerFinding } from './compare'

/**
 * The discrepancies store: what the ledger check could not heal, one open row per (order, kind)
 * (the partial unique index ledger_discrepancies_open_unique decides, so two instances checking at
 * once, or a check run again, update the open row instead of adding one).
 */

export type LedgerDiscrepancyRow = typeof ledgerDiscrepancies.$inferSelect

export const AGREED_AT_LATER_CHECK = 'A later ledger check found both ledgers agreeing.'

interface CheckedOrder {
  id: string
  tenantId: string
  provider: string
}

/**
 * Records what one check of an order found: each finding opens its discrepancy, or refreshes the
 * open one (both ledgers as seen now, last_seen_at); an open discrepancy of the order the check
 * no longer finds is resolved. A finding an operator resolved while both ledgers stood exactly as
 * now is not opened again (it was acknowledged); any change to either ledger opens it anew. Counts
 * of opened and resolved rows.
 */
export async function recordFindings(db: Database, order: CheckedOrder, findings: LedgerFinding[], ours: LedgerView, theirs: LedgerView): Promise<{ opened: number, resolved: number }> {
  let opened = 0
  const acknowledged = findings.length
    ? await db.select({ kind: ledgerDiscrepancies.kind }).from(ledgerDiscrepancies).where(and(
        eq(ledgerDiscrepancies.orderId, order.id),
        eq(ledgerDiscrepancies.status, 'resolved'),
        isNotNull(ledgerDiscrepancies.resolvedBy),
        sql`${ledgerDiscrepancies.ours} = ${JSON.stringify(ours)}::jsonb`,
        sql`${ledgerDiscrepancies.theirs} = ${JSON.stringify(theirs)}::jsonb`,
      ))
    : []
  for (const finding of findings) {
    if (acknowledged.some(row => row.kind === finding.kind)) continue
    const [row] = await db.insert(ledgerDiscrepancies).values({
      id: newId('ldg'), kind: finding.kind, orderId: order.id, tenantId: order.tenantId, provider: order.provider, summary: finding.summary, ours, theirs,
    }).onConflictDoUpdate({
      target: [ledgerDiscrepancies.orderId, ledgerDiscrepancies.kind],
      targetWhere: sql`${ledgerDiscrepancies.status} = 'open'`,
      set: { summary: finding.summary, ours, theirs, lastSeenAt: sql`now()`, updatedAt: sql`now()` },
    }).returning({ inserted: sql<boolean>`xmax = 0` })
    if (row?.inserted) opened++
  }
  const gone = await db.update(ledgerDiscrepancies)
    .set({ status: 'resolved', resolution: AGREED_AT_LATER_CHECK, resolvedAt: sql`now()`, updatedAt: sql`now()` })
    .where(and(
      eq(ledgerDiscrepancies.orderId, order.id),
      eq(ledgerDiscrepancies.status, 'open'),
      findings.length ? notInArray(ledgerDiscrepancies.kind, findings.map(finding => finding.kind)) : undefined,
    ))
    .returning({ id: ledgerDiscrepancies.id })
  return { opened, resolved: gone.length }
}

/**
 * What the check healed by itself, kept as `healed` rows (ours as it was before the heal), so that a
 * difference planted behind the app's back stays visible in the console and the evidence.
 */
export async function recordHeals(db: Database, order: CheckedOrder, heals: Array<LedgerFinding & { resolution: string }>, ours: LedgerView, theirs: LedgerView): Promise<void> {
  if (!heals.length) return
  await db.insert(ledgerDiscrepancies).values(heals.map(heal => ({
    id: newId('ldg'), kind: heal.kind, orderId: order.id, tenantId: order.tenantId, provider: order.provider, status: 'healed' as const,
    summary: heal.summary, ours, theirs, resolution: heal.resolution, resolvedAt: sql`now()`,
  })))
}

/** Sets ledger_discrepancies_open, per kind (0 for a kind with none), from the table: every instance that refreshes it tells the same. */
export async function refreshOpenGauge(db: Database): Promise<Record<LedgerDiscrepancyKind, number>> {
  const rows = await db.select({ kind: ledgerDiscrepancies.kind, count: sql<number>`count(*)::int`.mapWith(Number) })
    .from(ledgerDiscrepancies).where(eq(ledgerDiscrepancies.status, 'open')).groupBy(ledgerDiscrepancies.kind)
  const counts = Object.fromEntries(ledgerDiscrepancyKinds.map(kind => [kind, 0])) as Record<LedgerDiscrepancyKind, number>
  for (const row of rows) counts[row.kind] = row.count
  for (const kind of ledgerDiscrepancyKinds) metrics.ledgerDiscrepanciesOpen.set({ kind }, counts[kind])
  return counts
}

export interface DiscrepancyFilter {
  status?: LedgerDiscrepancyStatus
  orderId?: string
  limit: number
}

export function listDiscrepancies(db: Database, filter: DiscrepancyFilter): Promise<LedgerDiscrepancyRow[]> {
  const conditions: SQL[] = []
  if (filter.status !== undefined) conditions.push(eq(ledgerDiscrepancies.status, filter.status))
  if (filter.orderId !== undefined) conditions.push(eq(ledgerDiscrepancies.orderId, filter.orderId))
  return db.select().from(ledgerDiscrepancies).where(and(...conditions))
    .orderBy(...newestFirst(ledgerDiscrepancies)).limit(filter.limit)
}

/** The resolved discrepancy, or why not: the row as it is (undefined when there is none). */
export type ResolutionOutcome = { resolved: LedgerDiscrepancyRow } | { refused: LedgerDiscrepancyRow | undefined }

/**
 * An operator closes an open discrepancy with a note of what was done (refunded by hand, the
 * provider's support asked…): the resolution and its `ledger_discrepancy.resolved` operator action
 * commit together. The ledgers are not touched: if they still differ, the next check opens it again.
 */
export async function resolveDiscrepancy(db: Database, origin: OperatorOrigin, id: string, resolution: { note: string, operator: string }): Promise<ResolutionOutcome> {
  const outcome = await db.transaction(async (tx): Promise<ResolutionOutcome> => {
    const [row] = await tx.update(ledgerDiscrepancies)
      .set({ status: 'resolved', resolution: resolution.note, resolvedBy: resolution.operator, resolvedAt: sql`now()`, updatedAt: sql`now()` })
      .where(and(eq(ledgerDiscrepancies.id, id), eq(ledgerDiscrepancies.status, 'open')))
      .returning()
    if (!row) {
      const [existing] = await tx.select().from(ledgerDiscrepancies).where(eq(ledgerDiscrepancies.id, id))
      return { refused: existing }
    }
    await recordOperatorAction(tx, origin, {
      action: 'ledger_discrepancy.resolved',
      tenantId: row.tenantId,
      subjectId: row.id,
      detail: { orderId: row.orderId, kind: row.kind, note: resolution.note, operator: resolution.operator },
    })
    return { resolved: row }
  })
  if ('resolved' in outcome) await refreshOpenGauge(db)
  return outcome
}
