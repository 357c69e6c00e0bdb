import { createIdempotencyStore } from 'nuxt-idempotency/core'
import type { Database, PacedDeleteOptions } from '@idempotent-checkout/db-kit'
import type { Locks } from 'nuxt-idempotency/core'
import { metrics } from '../observability/metrics'
import { type RetentionResult, runRetention } from './retention'

/**
 * Deletes idempotency records past their expiry (IDEMPOTENCY_TTL_SECONDS and the webhook TTL); the
 * app's own retention of the module's table, paced and locked like the app's other retention.
 */
export function deleteExpiredIdempotencyRecords(db: Database, locks: Locks, pace?: Partial<PacedDeleteOptions>): Promise<RetentionResult> {
  const records = createIdempotencyStore(db)
  return runRetention({
    locks,
    name: 'retention-records',
    deleteBatch: batch => records.deleteExpired(batch),
    onDeleted: rows => metrics.idempotencyRecordsDeleted.inc({}, rows),
    pace,
  })
}
