import type { Database } from '../db/client'
import { createIdempotencyStore } from '../idempotency/store'
import { LockBackendError, type Locks } from '../locks/types'
import { log } from '../observability/logger'
import { metrics } from '../observability/metrics'
import { createJobStore } from './store'

/**
 * Rescue and retention, run by Nitro scheduled tasks in the app and by a timer in a standalone
 * worker. Every instance fires them, so each takes a lock and the others skip; the statements use
 * SKIP LOCKED, so even two runs at once (lock backend down) only share the work.
 */

const RETENTION_BATCH = 1000
/** One run stops after this many batches; the next run continues. */
const RETENTION_MAX_BATCHES = 50

/** skipped: another instance holds the task's lock and does the work. */
export type MaintenanceResult = { skipped: true } | { skipped: false, counts: Record<string, number> }

async function withTaskLock(locks: Locks, name: string, work: () => Promise<Record<string, number>>): Promise<MaintenanceResult> {
  const key = `lock:task:${name}`
  let token: string | null | undefined
  try {
    token = await locks.acquire(key, 60_000)
    if (!token) return { skipped: true }
  }
  catch (error) {
    if (!(error instanceof LockBackendError)) throw error
    log.warn('lock backend unavailable; running the task unlocked (its statements skip locked rows)', { task: name })
  }
  try {
    return { skipped: false, counts: await work() }
  }
  finally {
    if (token) await locks.release(key, token).catch(() => {})
  }
}

/** Puts back (or dead-letters) running jobs whose heartbeat is older than the timeout. */
export function rescueStaleJobs(db: Database, locks: Locks, heartbeatTimeoutMs: number): Promise<MaintenanceResult> {
  return withTaskLock(locks, 'jobs-rescue', async () => {
    const rescued = await createJobStore(db).rescueStale(heartbeatTimeoutMs)
    for (const job of rescued) {
      metrics.jobsRescued.inc({ kind: job.kind, status: job.status })
      if (job.status === 'dead_letter') metrics.jobsDeadLettered.inc({ kind: job.kind })
      log.warn('job rescued: its worker stopped heart-beating', { jobId: job.id, kind: job.kind, transition: job.status })
    }
    return { rescued: rescued.length, deadLettered: rescued.filter(job => job.status === 'dead_letter').length }
  })
}

/** Deletes expired idempotency records and completed jobs older than the retention, in batches. */
export function deleteExpiredRecords(db: Database, locks: Locks, jobRetentionDays: number): Promise<MaintenanceResult> {
  return withTaskLock(locks, 'retention', async () => {
    const idempotencyRecords = await inBatches(() => createIdempotencyStore(db).deleteExpired(RETENTION_BATCH))
    const jobs = await inBatches(() => createJobStore(db).deleteCompleted(jobRetentionDays, RETENTION_BATCH))
    metrics.idempotencyRecordsDeleted.inc({}, idempotencyRecords)
    metrics.jobsDeleted.inc({}, jobs)
    if (idempotencyRecords || jobs) log.info('retention deleted old rows', { idempotencyRecords, jobs })
    return { idempotencyRecords, jobs }
  })
}

async function inBatches(deleteBatch: () => Promise<number>): Promise<number> {
  let total = 0
  for (let batch = 0; batch < RETENTION_MAX_BATCHES; batch++) {
    const deleted = await deleteBatch()
    total += deleted
    if (deleted < RETENTION_BATCH) break
  }
  return total
}
