import { type SQL, sql, type SQLWrapper } from 'drizzle-orm'
import type { PgColumn, PgTable } from 'drizzle-orm/pg-core'
import type { Database } from './types'

/**
 * Retention that keeps up at any write rate: a run deletes batch after batch until every table's
 * backlog is gone (a batch comes back short) or its time budget ends, and pauses after each batch in
 * proportion to that batch's own duration, so that however large the backlog, deleting takes at
 * most `dutyCycle` of the database's time; the next run continues where this one stopped. What one
 * run can delete is therefore measured, not capped: (rows a second while deleting) × budget × duty.
 */

/** Deletes up to `limit` rows of one table; answers how many it deleted. */
export type BatchDelete = (limit: number) => Promise<number>

export interface PacedDeleteOptions<Table extends string = string> {
  /** Rows per batch; a batch that deletes fewer means that table's backlog is gone. */
  batchSize: number
  /**
   * Share of the run's time spent deleting, in (0, 1]: after a batch of d ms the run pauses
   * d × (1 − dutyCycle) / dutyCycle ms (0.5: as long as the batch took).
   */
  dutyCycle: number
  /** No batch starts, and no pause runs past, this many ms after the run started. */
  budgetMs: number
  /** Called after each batch, e.g. to count the rows in a metric while a long run goes on. */
  onBatch?: (table: Table, deleted: number) => void
  /** Milliseconds from any fixed origin (performance.now by default); tests inject their own. */
  now?: () => number
  sleep?: (ms: number) => Promise<void>
}

export interface PacedDeleteRun<Table extends string> {
  deleted: Record<Table, number>
  batches: number
  /** Sum of the pauses between batches, in ms. */
  pausedMs: number
  /** The run's duration by its clock, pauses included. */
  elapsedMs: number
  /** Every table's backlog is gone; false when the budget ended the run first. */
  drained: boolean
}

/**
 * The pace both the module's retention and the app's run at, run once a minute under a task lock of
 * RETENTION_LOCK_TTL_MS that is not renewed: the budget leaves that lock room for the last batch.
 * A tenth of the time: on two shared cores a quarter cost the new-key rate 10 % against 5 % for a
 * tenth (bench, same backlog), and a tenth still deletes over 4× what that rate writes.
 */
export const RETENTION_PACE = { batchSize: 5000, dutyCycle: 0.1, budgetMs: 40_000 } as const satisfies Partial<PacedDeleteOptions>

/** How long a retention run's lock is held at most: past RETENTION_PACE.budgetMs and its last batch. */
export const RETENTION_LOCK_TTL_MS = 60_000

const sleepFor = (ms: number) => new Promise<void>(resolve => setTimeout(resolve, ms))

/**
 * Runs the tables' deletes in turn, one batch each per round (so one table's huge backlog does not
 * starve the others of the budget), pausing after each batch, until all are drained or the budget ends.
 */
export async function deleteInPacedBatches<Table extends string>(
  tables: Record<Table, BatchDelete>,
  options: PacedDeleteOptions<Table>,
): Promise<PacedDeleteRun<Table>> {
  const { batchSize, dutyCycle, budgetMs, onBatch, now = () => performance.now(), sleep = sleepFor } = options
  if (!(batchSize >= 1) || !(dutyCycle > 0 && dutyCycle <= 1) || !(budgetMs > 0)) {
    throw new RangeError(`deleteInPacedBatches: batchSize ≥ 1, 0 < dutyCycle ≤ 1 and budgetMs > 0 (got ${batchSize}, ${dutyCycle}, ${budgetMs})`)
  }
  const names = Object.keys(tables) as Table[]
  const deleted = Object.fromEntries(names.map(name => [name, 0])) as Record<Table, number>
  const pending = new Set(names)
  const started = now()
  let batches = 0
  let pausedMs = 0
  const result = (drained: boolean) => ({ deleted, batches, pausedMs, elapsedMs: now() - started, drained })

  while (pending.size) {
    for (const name of pending) {
      const batchStarted = now()
      if (batchStarted - started >= budgetMs) return result(false)
      const count = await tables[name](batchSize)
      const batchEnded = now()
      batches++
      deleted[name] += count
      onBatch?.(name, count)
      if (count < batchSize) pending.delete(name)
      if (!pending.size) break
      const pause = (batchEnded - batchStarted) * (1 - dutyCycle) / dutyCycle
      if (batchEnded + pause - started >= budgetMs) return result(false)
      if (pause > 0) {
        await sleep(pause)
        pausedMs += pause
      }
    }
  }
  return result(true)
}

/**
 * The rows whose ids a limited, locking pick selects, picked once per statement: `array(…)` is an
 * InitPlan, looked up through the primary key. Under `id in (…)` the planner may join the pick as a
 * hash join over the whole table, or run it again for each row it joins, each time past the rows it
 * already took (with bitmap scans off, one job claim of 5 took 40).
 */
export const pickedOnce = (id: PgColumn | SQL, picked: SQLWrapper) => sql`${id} = any(array(${picked}))`

/**
 * Deletes the rows whose ids `picked` selects (a limited, locked select: one batch; see pickedOnce)
 * and answers how many. Only the count comes back (a CTE), not one row per deleted id. A table
 * without an id column passes sql`ctid`, the row's address, for `id` and picks its rows by it.
 */
export async function deletePickedRows(db: Database, table: PgTable, id: PgColumn | SQL, picked: SQLWrapper): Promise<number> {
  const deleted = db.$with('deleted').as(db.delete(table).where(pickedOnce(id, picked)).returning({ id }))
  const [row] = await db.with(deleted).select({ count: sql<number>`count(*)::int`.mapWith(Number) }).from(deleted)
  return row?.count ?? 0
}
