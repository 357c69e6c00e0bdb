import { deleteInPacedBatches, type BatchDelete, type PacedDeleteOptions, RETENTION_PACE } from '@idempotent-checkout/db-kit'
import type { Locks } from 'nuxt-idempotency/core'
import { log } from '../observability/logger'
import { type Skippable, withTaskLock } from './task-lock'

/** A retention run: the rows it deleted, and how it went (its duration includes the pauses). */
export type RetentionResult = Skippable<{
  deleted: number
  run: { ms: number, batches: number, pausedMs: number, drained: boolean }
}>

export interface RetentionOptions {
  locks: Locks
  /** The task's name, its lock's and its log line's. */
  name: string
  deleteBatch: BatchDelete
  /** Called per batch, so a metric moves during a long run and keeps what a failed one deleted. */
  onDeleted: (rows: number) => void
  pace?: Partial<PacedDeleteOptions>
}

/**
 * One table's retention: batch after batch until its backlog is gone or the run's time budget ends
 * (the next run continues), pausing between batches so that it takes a bounded share of the
 * database however large the backlog (deleteInPacedBatches, RETENTION_PACE).
 */
export function runRetention({ locks, name, deleteBatch, onDeleted, pace = {} }: RetentionOptions): Promise<RetentionResult> {
  return withTaskLock(locks, name, async () => {
    const run = await deleteInPacedBatches({ rows: deleteBatch }, { ...RETENTION_PACE, onBatch: (_, deleted) => onDeleted(deleted), ...pace })
    const report = { ms: Math.round(run.elapsedMs), batches: run.batches, pausedMs: Math.round(run.pausedMs), drained: run.drained }
    if (run.deleted.rows) log.info('retention deleted old rows', { task: name, deleted: run.deleted.rows, ...report })
    return { deleted: run.deleted.rows, run: report }
  })
}
