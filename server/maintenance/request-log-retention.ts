import { lt, sql } from 'drizzle-orm'
import { deletePickedRows } from '@idempotent-checkout/db-kit'
import type { Database, PacedDeleteOptions } from '@idempotent-checkout/db-kit'
import type { Locks } from 'nuxt-idempotency/core'
import { requestLog } from '../db/schema'
import { metrics } from '../observability/metrics'
import { type RetentionResult, runRetention } from './retention'

/** Deletes request-log rows older than `olderThanDays` (REQUEST_LOG_RETENTION_DAYS). */
export function deleteOldRequestLogRows(db: Database, locks: Locks, olderThanDays: number, pace?: Partial<PacedDeleteOptions>): Promise<RetentionResult> {
  return runRetention({
    locks,
    name: 'retention-request-log',
    deleteBatch: batch => deleteOldestBatch(db, olderThanDays, batch),
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
