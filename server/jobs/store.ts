import { and, asc, desc, eq, getTableColumns, inArray, lt, lte, type SQL, sql } from 'drizzle-orm'
import { type Database, queryAllPrepared, queryPrepared, type BoundStatement, defineStatement, mapRow, shiftParams } from '@idempotent-checkout/db-kit'
import { type JobStatus, jobs } from '../db/schema'
import { afterCommit, transaction, deletePickedRows, pickedOnce } from '@idempotent-checkout/db-kit'
import { wakeWorkers } from './wake'

/**
 * Every state change of a job is one conditional UPDATE. A claim draws a new fence token from a
 * sequence; everything a worker does afterwards (heartbeat, completion with its business writes,
 * failure, release) is conditional on that token and on status running, so a worker whose claim
 * was rescued and taken by another changes nothing. Time is the database's clock.
 */

export type JobRow = typeof jobs.$inferSelect
export type ClaimedJob = JobRow & { fence: number, queueWaitMs: number }

export interface JobFilter {
  status?: JobStatus
  kind?: string
  resourceId?: string
  limit?: number
}

/**
 * The business writes a job commits with its completion, as data-modifying CTEs that read the
 * completing UPDATE's row from `done(id)`: with the fence lost, `done` is empty and they write
 * nothing. Numbered $1… on their own; several CTEs are separated by commas.
 */
export interface JobEffect {
  text: string
  params: unknown[]
}

/** Delays are whole milliseconds within Postgres' int (a snooze of 2³¹ ms would overflow the cast). */
const MAX_DELAY_MS = 2 ** 31 - 1
const inMs = (ms: number) => sql`now() + (${Math.min(MAX_DELAY_MS, Math.max(0, Math.round(ms)))}::int * interval '1 millisecond')`
/** A list parameter as one text value: the same statement text (one prepared statement) for any length, on both drivers. */
const listParam = (name: string) => sql`string_to_array(${sql.placeholder(name)}, ',')`

const claimedColumns = getTableColumns(jobs)

/*
 * The partial indexes' predicates, written into the statements' text: a status sent as a bound value
 * cannot prove a partial index's predicate in a generic (prepared) plan, and no partial index would
 * serve the statement (the claim's plan is the rest of that story: see claimPlan).
 */
const isDue = sql`${jobs.status} in ('queued', 'failed')`
const isRunning = sql`${jobs.status} = 'running'`
const isCompleted = sql`${jobs.status} = 'completed'`

const claimDue = defineStatement<{ workerId: string, limit: number, kinds: string | null }>((db) => {
  const due = db.select({ id: jobs.id }).from(jobs)
    .where(and(isDue, lte(jobs.runAt, sql`now()`), sql`(${sql.placeholder('kinds')}::text is null or ${jobs.kind} = any(${listParam('kinds')}))`))
    .orderBy(asc(jobs.runAt), asc(jobs.id))
    .limit(sql.placeholder('limit'))
    .for('update', { skipLocked: true })
  return db.update(jobs).set({
    status: 'running',
    attempt: sql`${jobs.attempt} + 1`,
    fence: sql`nextval('job_fence_seq')`,
    lockedBy: sql`${sql.placeholder('workerId')}`,
    startedAt: sql`now()`,
    heartbeatAt: sql`now()`,
    updatedAt: sql`now()`,
  }).where(pickedOnce(jobs.id, due)).returning({
    ...claimedColumns,
    queueWaitMs: sql<number>`greatest(0, extract(epoch from now() - ${jobs.runAt}) * 1000)::int`.as('queue_wait_ms'),
  })
})

/**
 * The claim's plan, for its transaction only: the ready index read in run_at order, stopping once
 * the limit is locked. Left to statistics (taken while the queue was idle, as they often are),
 * Postgres chose a bitmap scan and a sort of every due job, and so a claim read and sorted the
 * whole backlog, 5 ms behind 3,000 due jobs instead of 0.1 ms: the busier the queue, the dearer
 * each claim.
 */
const claimPlan: BoundStatement = { text: `select set_config('enable_bitmapscan', 'off', true), set_config('enable_sort', 'off', true)`, params: [] }

/** A claim as sent: its plan's settings and the claim, one transaction. */
export const claimStatements = (db: Database, values: { workerId: string, limit: number, kinds: string | null }): BoundStatement[] =>
  [claimPlan, claimDue(db, values)]

// Rows are locked in fence order, as completeAll takes them: a heartbeat and a batch of completions
// over the same claims wait for each other instead of deadlocking.
const heartbeatClaims = defineStatement<{ ids: string, fences: string }>((db) => {
  const current = db.select({ id: jobs.id }).from(jobs)
    .where(and(sql`${jobs.id} = any(${listParam('ids')})`, sql`${jobs.fence} = any(${listParam('fences')}::bigint[])`, eq(jobs.status, 'running')))
    .orderBy(asc(jobs.fence))
    .for('update')
  return db.update(jobs).set({ heartbeatAt: sql`now()` })
    .where(and(inArray(jobs.id, current), eq(jobs.status, 'running')))
    .returning({ fence: jobs.fence })
})

const completeClaim = defineStatement<{ id: string, fence: number }>(db => db.update(jobs)
  .set({ status: 'completed', completedAt: sql`now()`, lastError: null, updatedAt: sql`now()` })
  .where(and(eq(jobs.id, sql.placeholder('id')), eq(jobs.fence, sql.placeholder('fence')), eq(jobs.status, 'running')))
  .returning({ id: jobs.id }))

const MAX_COMPLETION_TEXTS = 100
const completionTexts = new Map<string, string>()

/** The completing UPDATE as `done`, then the effect's CTEs (parameters renumbered after its own). */
function completionStatement(db: Database, job: ClaimedJob, effect: JobEffect | undefined): BoundStatement {
  const complete = completeClaim(db, { id: job.id, fence: job.fence })
  const key = effect?.text ?? ''
  let text = completionTexts.get(key)
  if (!text) {
    const shift = complete.params.length
    const effectCtes = effect ? `, ${shiftParams(effect.text, shift)}` : ''
    text = `with done as (${complete.text})${effectCtes} select count(*)::int as completed from done`
    if (completionTexts.size < MAX_COMPLETION_TEXTS) completionTexts.set(key, text)
  }
  return { text, params: [...complete.params, ...(effect?.params ?? [])] }
}

export function createJobStore(db: Database) {
  const owned = (job: ClaimedJob) => and(eq(jobs.id, job.id), eq(jobs.fence, job.fence), eq(jobs.status, 'running'))
  // Built in SQL so every history entry carries the database's clock, rescued ones included.
  // startedAt and retryAt make the backoff visible: the next attempt may not start before retryAt.
  const historyEntry = (errorClass: SQL | string, message: SQL | string, retryAt: SQL) =>
    sql`${jobs.errors} || jsonb_build_array(jsonb_build_object('attempt', ${jobs.attempt}, 'at', now(), 'startedAt', ${jobs.startedAt}, 'retryAt', ${retryAt}, 'errorClass', ${errorClass}::text, 'message', ${message}::text, 'worker', ${jobs.lockedBy}))`

  return {
    /**
     * Claims up to `limit` due jobs of the given kinds (all kinds when omitted); jobs another worker
     * is claiming right now are skipped, not waited on. Workers of one database may run different
     * kinds (one with the payment provider, one without): each claims only what it can run.
     */
    async claim(workerId: string, limit: number, kinds?: readonly string[]): Promise<ClaimedJob[]> {
      if (limit <= 0 || kinds?.length === 0) return []
      const [, rows] = await queryAllPrepared(db, claimStatements(db, { workerId, limit, kinds: kinds?.join(',') ?? null }))
      // Oldest first, as claimed: the runner starts them in this order.
      return rows!.map(row => ({ ...mapRow(claimedColumns, row), queueWaitMs: Number(row.queue_wait_ms) }) as ClaimedJob)
        .sort((a, b) => a.runAt.getTime() - b.runAt.getTime() || (a.id < b.id ? -1 : 1))
    },

    /**
     * Heart-beats every given claim in one statement; answers the fences still current. A claim
     * missing from the answer was rescued (and maybe claimed again): its holder must stop.
     */
    async heartbeatAll(claims: readonly ClaimedJob[]): Promise<Set<number>> {
      if (claims.length === 0) return new Set()
      const rows = await queryPrepared(db, heartbeatClaims(db, { ids: claims.map(job => job.id).join(','), fences: claims.map(job => job.fence).join(',') }))
      return new Set(rows.map(row => Number(row.fence)))
    },

    /**
     * Completion and the job's effect in one statement: one round trip, one commit. The effect reads
     * the completing UPDATE (fenced) and so writes nothing unless the claim is current; a failing
     * effect fails the whole, claim kept. False (nothing written) when the claim is not current.
     */
    async completeWith(job: ClaimedJob, effect?: JobEffect): Promise<boolean> {
      const [row] = await queryPrepared(db, completionStatement(db, job, effect))
      return Number(row?.completed) === 1
    },

    /**
     * The job's business writes and its completion in one transaction. The completing UPDATE goes
     * first: it checks the fence token and row-locks the job in one statement, and the work's
     * writes roll it back if they fail. False (and nothing written) when the claim is not current.
     */
    async complete(job: ClaimedJob, work: (tx: Database) => Promise<void>): Promise<boolean> {
      return transaction(db, async (tx) => {
        const completed = await queryPrepared(tx, completeClaim(tx, { id: job.id, fence: job.fence }))
        if (completed.length === 0) return false
        await work(tx)
        return true
      })
    },

    /**
     * completeWith for several jobs in one transaction (one commit, one round trip): each entry's
     * answer as completeWith's. A claim that is not current writes nothing and leaves the others
     * unaffected; a failing effect fails them all (complete them one by one to isolate it).
     */
    async completeAll(entries: ReadonlyArray<{ job: ClaimedJob, effect?: JobEffect }>): Promise<boolean[]> {
      // In fence order, as heartbeats lock the rows (see heartbeatClaims).
      const inFenceOrder = entries.map((entry, index) => ({ entry, index })).sort((a, b) => a.entry.job.fence - b.entry.job.fence)
      const results = await queryAllPrepared(db, inFenceOrder.map(({ entry }) => completionStatement(db, entry.job, entry.effect)))
      const completed: boolean[] = []
      inFenceOrder.forEach(({ index }, position) => { completed[index] = Number(results[position]![0]?.completed) === 1 })
      return completed
    },

    /** A failed attempt: retried after `retryInMs`, or dead-lettered when out of attempts or permanent. */
    async fail(job: ClaimedJob, failure: { errorClass: string, message: string, retryInMs: number, permanent: boolean }): Promise<JobStatus | undefined> {
      const deadLetter = failure.permanent ? sql`true` : sql`${jobs.attempt} >= ${jobs.maxAttempts}`
      const retryAt = sql`case when ${deadLetter} then null else ${inMs(failure.retryInMs)} end`
      const [row] = await db.update(jobs).set({
        status: sql`case when ${deadLetter} then 'dead_letter' else 'failed' end`,
        runAt: sql`coalesce(${retryAt}, ${jobs.runAt})`,
        lastError: failure.message,
        errors: historyEntry(failure.errorClass, failure.message, retryAt),
        updatedAt: sql`now()`,
      }).where(owned(job)).returning({ status: jobs.status })
      return row?.status
    },

    /**
     * Back to the queue without spending the attempt: the resource was busy, the job snoozed, or
     * the worker is shutting down. One-shot test faults are consumed here.
     */
    async putBack(job: ClaimedJob, delayMs: number, options: { clearFaults?: boolean, snooze?: boolean } = {}): Promise<boolean> {
      const rows = await db.update(jobs).set({
        status: 'queued',
        attempt: sql`${jobs.attempt} - 1`,
        runAt: inMs(delayMs),
        lockedBy: null,
        heartbeatAt: null,
        updatedAt: sql`now()`,
        ...(options.snooze ? { snoozes: sql`${jobs.snoozes} + 1` } : {}),
        ...(options.clearFaults ? { faults: null } : {}),
      }).where(owned(job)).returning({ id: jobs.id })
      return rows.length === 1
    },

    /**
     * Running jobs whose worker stopped heart-beating (crashed, frozen, partitioned) go back to the
     * queue with their attempt spent, or to dead_letter when it was the last.
     */
    async rescueStale(heartbeatTimeoutMs: number, limit = 500): Promise<Array<{ id: string, kind: string, status: JobStatus }>> {
      const stale = db.select({ id: jobs.id }).from(jobs)
        .where(and(isRunning, lt(jobs.heartbeatAt, sql`now() - (${heartbeatTimeoutMs}::int * interval '1 millisecond')`)))
        .limit(limit)
        .for('update', { skipLocked: true })
      const deadLetter = sql`${jobs.attempt} >= ${jobs.maxAttempts}`
      const message = sql`'rescued: no heartbeat from ' || coalesce(${jobs.lockedBy}, '?') || ' for ' || ${heartbeatTimeoutMs}::text || ' ms'`
      return db.update(jobs).set({
        status: sql`case when ${deadLetter} then 'dead_letter' else 'failed' end`,
        runAt: sql`now()`,
        lastError: message,
        errors: historyEntry('rescued', message, sql`case when ${deadLetter} then null else now() end`),
        updatedAt: sql`now()`,
      }).where(pickedOnce(jobs.id, stale)).returning({ id: jobs.id, kind: jobs.kind, status: jobs.status })
    },

    /** Redrives a dead letter: queued now with a fresh set of attempts; its error history stays. */
    async redrive(id: string): Promise<JobRow | undefined> {
      const [row] = await db.update(jobs).set({ status: 'queued', attempt: 0, snoozes: 0, runAt: sql`now()`, lockedBy: null, updatedAt: sql`now()` })
        .where(and(eq(jobs.id, id), eq(jobs.status, 'dead_letter'))).returning()
      if (row) afterCommit(db, wakeWorkers)
      return row
    },

    /**
     * Dismisses a dead letter that can never succeed: final, with the operator's reason. Claims
     * take only queued and failed jobs, rescues only running ones and redrives only dead letters,
     * so a dismissed job never runs again. Undefined unless the job is a dead letter.
     */
    async dismiss(id: string, reason: string): Promise<JobRow | undefined> {
      const [row] = await db.update(jobs).set({ status: 'dismissed', dismissedReason: reason, dismissedAt: sql`now()`, lockedBy: null, updatedAt: sql`now()` })
        .where(and(eq(jobs.id, id), eq(jobs.status, 'dead_letter'))).returning()
      return row
    },

    async find(id: string): Promise<JobRow | undefined> {
      const [row] = await db.select().from(jobs).where(eq(jobs.id, id))
      return row
    },

    async list(filter: JobFilter = {}): Promise<JobRow[]> {
      const conditions = [
        filter.status ? eq(jobs.status, filter.status) : undefined,
        filter.kind ? eq(jobs.kind, filter.kind) : undefined,
        filter.resourceId ? eq(jobs.resourceId, filter.resourceId) : undefined,
      ]
      return db.select().from(jobs).where(and(...conditions))
        .orderBy(desc(jobs.createdAt), desc(jobs.id)).limit(filter.limit ?? 100)
    },

    /**
     * Deletes up to `batch` completed jobs finished before the cutoff (rows another transaction holds
     * are skipped); returns how many, found through the partial index on completed_at.
     */
    deleteCompleted(olderThanDays: number, batch: number): Promise<number> {
      const old = db.select({ id: jobs.id }).from(jobs)
        .where(and(isCompleted, lt(jobs.completedAt, sql`now() - (${olderThanDays}::int * interval '1 day')`)))
        .limit(batch)
        .for('update', { skipLocked: true })
      return deletePickedRows(db, jobs, jobs.id, old)
    },
  }
}

export type JobStore = ReturnType<typeof createJobStore>
