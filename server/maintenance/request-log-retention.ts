import { lt, sql } from 'drizzle-orm'
import { deletePickedRows } from '@idempotent-checkout/db-kit'
import type { Database, PacedDeleteOptions } from '@idempotent-checkout/db-kit'
import type { Locks } from 'nuxt-idempotency/core'
import { requestLog, requestLogReplays } from '../db/schema'
import { metrics } from '../observability/metrics'
import { type RetentionResult, runRetention } from './retention'

/** Deletes request-log rows and replay counts older than `olderThanDays` (REQUEST_LOG_RETENTION_DAYS). */
export function deleteOldRequestLogRows(db: Database, locks: Locks, olderThanDays: number, pace?: Partial<PacedDeleteOptions>): Promise<RetentionResult> {
  return runRetention({
    locks,
    name: 'retention-request-log',
    // The rows first, then the replay counts of the same age, each batch within the same budget.
    deleteBatch: async (batch) => {
      const rows = await deleteOldestBatch(db, olderThanDays, batch)
      return rows < batch ? rows + await deleteOldestReplayCounts(db, olderThanDays, batch - rows) : rows
    },
    onDeleted: rows => metrics.requestLogRowsDeleted.inc({}, rows),
    pace,
  })
}

/** One batch, oldest first through the created_at index; rows another run holds are skipped. */
function deleteOldestBatch(db: Database, olderThanDays: number, batch: number): Promise<number> {
  const old = db.select({ id: requestLog.id }).from(requestLog)
    .where(lt(requestLog.createdAt, sql`now() - (${olderThanDays}::int * interval '1 day')`))
    .orderBy(requestLog.createdAt)
    .limit(batch)
    .for('update', { skipLocked: true })
  return deletePickedRows(db, requestLog, requestLog.id, old)
}

/** The row's address: request_log_replays has no id column. */
const rowAddress = sql`ctid`

/** Replay counts of minutes past the retention, oldest first through the minute index, picked by their row address (the table has no id). */
function deleteOldestReplayCounts(db: Database, olderThanDays: number, batch: number): Promise<number> {
  const old = db.select({ address: rowAddress }).from(requestLogReplays)
    .where(lt(requestLogReplays.minute, sql`now() - (${olderThanDays}::int * interval '1 day')`))
    .orderBy(requestLogReplays.minute)
    .limit(batch)
    .for('update', { skipLocked: true })
  return deletePickedRows(db, requestLogReplays, rowAddress, old)
}
