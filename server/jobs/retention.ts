import type { PacedDeleteOptions, Database } from '@idempotent-checkout/db-kit'
import type { Locks } from 'nuxt-idempotency/core'
import { type RetentionResult, runRetention } from '../maintenance/retention'
import { metrics } from '../observability/metrics'
import { createJobStore } from './store'

/** Deletes completed jobs older than `olderThanDays` (JOB_RETENTION_DAYS); dead letters stay for an operator. */
export function deleteCompletedJobs(db: Database, locks: Locks, olderThanDays: number, pace?: Partial<PacedDeleteOptions>): Promise<RetentionResult> {
  const store = createJobStore(db)
  return runRetention({
    locks,
    name: 'retention-jobs',
    deleteBatch: batch => store.deleteCompleted(olderThanDays, batch),
    onDeleted: rows => metrics.jobsDeleted.inc({}, rows),
    pace,
  })
}
