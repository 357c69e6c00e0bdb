import { inArray, lt, sql } from 'drizzle-orm'
import type { Database } from 'nuxt-idempotency/db'
import { requestLog } from '../db/schema'
import { createIdempotencyStore } from 'nuxt-idempotency/core'
import { LockBackendError, type Locks } from 'nuxt-idempotency/locks'
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

export async function withTaskLock(locks: Locks, name: string, work: () => Promise<Record<string, number>>): Promise<MaintenanceResult> {
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

/**
 * Deletes expired idempotency records, completed jobs older than their retention and request-log
 * rows older than theirs, in batches.
 */
export function deleteExpiredRecords(db: Database, locks: Locks, jobRetentionDays: number, requestLogRetentionDays: number): Promise<MaintenanceResult> {
  return withTaskLock(locks, 'retention', async () => {
    const idempotencyRecords = await inBatches(() => createIdempotencyStore(db).deleteExpired(RETENTION_BATCH))
    const jobs = await inBatches(() => createJobStore(db).deleteCompleted(jobRetentionDays, RETENTION_BATCH))
    const requestLogRows = await inBatches(() => deleteOldRequestLogRows(db, requestLogRetentionDays, RETENTION_BATCH))
    metrics.idempotencyRecordsDeleted.inc({}, idempotencyRecords)
    metrics.jobsDeleted.inc({}, jobs)
    metrics.requestLogRowsDeleted.inc({}, requestLogRows)
    if (idempotencyRecords || jobs || requestLogRows) log.info('retention deleted old rows', { idempotencyRecords, jobs, requestLog: requestLogRows })
    return { idempotencyRecords, jobs, requestLog: requestLogRows }
  })
}

/** One batch of rows older than `olderThanDays`, through the created_at index; rows another run holds are skipped. */
async function deleteOldRequestLogRows(db: Database, olderThanDays: number, batch: number): Promise<number> {
  const old = db.select({ id: requestLog.id }).from(requestLog)
    .where(lt(requestLog.createdAt, sql`now() - (${olderThanDays}::int * interval '1 day')`))
    .limit(batch)
    .for('update', { skipLocked: true })
  const rows = await db.delete(requestLog).where(inArray(requestLog.id, old)).returning({ id: requestLog.id })
  return rows.length
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
