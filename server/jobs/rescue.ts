import type { Database } from '@idempotent-checkout/db-kit'
import type { Locks } from 'nuxt-idempotency/core'
import { type MaintenanceResult, withTaskLock } from '../maintenance/task-lock'
import { log } from '../observability/logger'
import { metrics } from '../observability/metrics'
import { createJobStore } from './store'

/** Puts back (or dead-letters) running jobs whose heartbeat is older than the timeout. */
export function rescueStaleJobs(db: Database, locks: Locks, heartbeatTimeoutMs: number): Promise<MaintenanceResult> {
  return withTaskLock(locks, 'jobs-rescue', async () => {
    const rescued = await createJobStore(db).rescueStale(heartbeatTimeoutMs)
    for (const job of rescued) {
      metrics.jobsRescued.inc({ kind: job.kind, status: job.status })
      if (job.status === 'dead_letter') metrics.jobsDeadLettered.inc({ kind: job.kind })
      log.warn('job rescued: its worker stopped heart-beating', { jobId: job.id, kind: job.kind, transition: job.status })
    }
    return { counts: { rescued: rescued.length, deadLettered: rescued.filter(job => job.status === 'dead_letter').length } }
  })
}
