import { lt, sql } from 'drizzle-orm'
import type { Database } from 'nuxt-idempotency/db'
import { requestLog } from '../db/schema'
import { createIdempotencyStore, deleteInPacedBatches, deletePickedRows, RETENTION_LOCK_TTL_MS, RETENTION_PACE, type PacedDeleteOptions } from 'nuxt-idempotency/core'
import { LockBackendError, type Locks } from 'nuxt-idempotency/locks'
import { log } from '../observability/logger'
import { metrics } from '../observability/metrics'
import { createJobStore } from './store'

/**
 * Rescue and retention, run by Nitro scheduled tasks in the app and by a timer in a standalone
 * worker. Every instance fires them, so each takes a lock and the others skip; the statements use
 * SKIP LOCKED, so even two runs at once (lock backend down) only share the work.
 */

/**
 * How long a task's lock is held at most; it is not renewed, so a task's run must end first. The
 * longest task, retention, sets it (its budget, RETENTION_PACE.budgetMs, ends first).
 */
const TASK_LOCK_TTL_MS = RETENTION_LOCK_TTL_MS

/** skipped: another instance holds the task's lock and does the work. */
export type MaintenanceResult = { skipped: true } | { skipped: false, counts: Record<string, number> }

type RetentionTable = 'idempotencyRecords' | 'jobs' | 'requestLog'

/** A retention run: the rows deleted per table, and how the run went (its duration includes the pauses). */
export type RetentionResult = { skipped: true } | {
  skipped: false
  counts: Record<RetentionTable, number>
  run: { ms: number, batches: number, pausedMs: number, drained: boolean }
}

export async function withTaskLock(locks: Locks, name: string, work: () => Promise<Record<string, number>>): Promise<MaintenanceResult> {
  const outcome = await underTaskLock(locks, name, work)
  return outcome.skipped ? outcome : { skipped: false, counts: outcome.value }
}

async function underTaskLock<T>(locks: Locks, name: string, work: () => Promise<T>): Promise<{ skipped: true } | { skipped: false, value: T }> {
  const key = `lock:task:${name}`
  let token: string | null | undefined
  try {
    token = await locks.acquire(key, TASK_LOCK_TTL_MS)
    if (!token) return { skipped: true }
  }
  catch (error) {
    if (!(error instanceof LockBackendError)) throw error
    log.warn('lock backend unavailable; running the task unlocked (its statements skip locked rows)', { task: name })
  }
  try {
    return { skipped: false, value: await work() }
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
 * rows older than theirs: batch after batch until the backlog is gone or the run's time budget
 * ends (the next run, a minute later, continues), pausing between batches so that retention takes
 * a bounded share of the database however large the backlog (deleteInPacedBatches).
 */
export function deleteExpiredRecords(
  db: Database, locks: Locks, jobRetentionDays: number, requestLogRetentionDays: number,
  pace: Partial<PacedDeleteOptions<RetentionTable>> = {},
): Promise<RetentionResult> {
  return underTaskLock(locks, 'retention', async () => {
    const counters = { idempotencyRecords: metrics.idempotencyRecordsDeleted, jobs: metrics.jobsDeleted, requestLog: metrics.requestLogRowsDeleted }
    const records = createIdempotencyStore(db)
    const jobStore = createJobStore(db)
    const run = await deleteInPacedBatches({
      idempotencyRecords: batch => records.deleteExpired(batch),
      jobs: batch => jobStore.deleteCompleted(jobRetentionDays, batch),
      requestLog: batch => deleteOldRequestLogRows(db, requestLogRetentionDays, batch),
    }, {
      ...RETENTION_PACE,
      // Counted per batch, so that the counters move during a long run and keep what a failed one deleted.
      onBatch: (table, deleted) => counters[table].inc({}, deleted),
      ...pace,
    })
    const report = { ms: Math.round(run.elapsedMs), batches: run.batches, pausedMs: Math.round(run.pausedMs), drained: run.drained }
    const { idempotencyRecords, jobs, requestLog: requestLogRows } = run.deleted
    if (idempotencyRecords || jobs || requestLogRows) log.info('retention deleted old rows', { idempotencyRecords, jobs, requestLog: requestLogRows, ...report })
    return { counts: run.deleted, run: report }
  }).then(outcome => (outcome.skipped ? outcome : { skipped: false, ...outcome.value }))
}

/** One batch of rows older than `olderThanDays`, oldest first through the created_at index; rows another run holds are skipped. */
function deleteOldRequestLogRows(db: Database, olderThanDays: number, batch: number): Promise<number> {
  const old = db.select({ id: requestLog.id }).from(requestLog)
    .where(lt(requestLog.createdAt, sql`now() - (${olderThanDays}::int * interval '1 day')`))
    .orderBy(requestLog.createdAt)
    .limit(batch)
    .for('update', { skipLocked: true })
  return deletePickedRows(db, requestLog, requestLog.id, old)
}
