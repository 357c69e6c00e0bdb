import { sql } from 'drizzle-orm'
import type { Database } from '../db/client'
import { newId } from '../db/ids'
import { jobs } from '../db/schema'
import { type BoundStatement, defineStatement } from '../db/statements'

export const DEFAULT_MAX_ATTEMPTS = 8

export interface EnqueueInput {
  kind: string
  /** Unique per kind: enqueueing the same (kind, dedupeKey) again is a no-op. */
  dedupeKey: string
  payload: Record<string, unknown>
  /** `order:ord_…`: the resource the job will lock. */
  resourceId?: string
  idempotencyKey?: string
  requestId?: string
  maxAttempts?: number
  delayMs?: number
  /** Test-only faults (see server/jobs/faults.ts), honoured only with FAULTS_ENABLED=true. */
  faults?: Record<string, unknown>
}

const runAfter = (delayMs: unknown) => sql`now() + (${delayMs}::int * interval '1 millisecond')`

function jobValues(input: EnqueueInput) {
  return {
    id: newId('job'),
    kind: input.kind,
    dedupeKey: input.dedupeKey,
    payload: input.payload,
    maxAttempts: input.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
    resourceId: input.resourceId ?? null,
    idempotencyKey: input.idempotencyKey ?? null,
    requestId: input.requestId ?? null,
    faults: input.faults ?? null,
  }
}

/**
 * Enqueues inside the caller's transaction (the outbox): the job exists if and only if the business
 * write commits. Resolves to the new job's id, or undefined when (kind, dedupeKey) already exists.
 * Wake workers after the commit (wakeWorkers), not here.
 */
export async function enqueueJob(tx: Database, input: EnqueueInput): Promise<string | undefined> {
  const [row] = await tx.insert(jobs).values({ ...jobValues(input), runAt: runAfter(input.delayMs ?? 0) })
    .onConflictDoNothing({ target: [jobs.kind, jobs.dedupeKey] }).returning({ id: jobs.id })
  return row?.id
}

const insertJob = defineStatement(db => db.insert(jobs).values({
  ...Object.fromEntries(Object.keys(jobValues({ kind: '', dedupeKey: '', payload: {} })).map(name => [name, sql.placeholder(name)])) as Record<keyof ReturnType<typeof jobValues>, ReturnType<typeof sql.placeholder>>,
  runAt: runAfter(sql.placeholder('delayMs')),
}).onConflictDoNothing({ target: [jobs.kind, jobs.dedupeKey] }))

/** enqueueJob as a statement for an atomic transaction (see DatabaseHandle.transact). */
export function jobInsert(db: Database, input: EnqueueInput): BoundStatement {
  return insertJob(db, { ...jobValues(input), delayMs: input.delayMs ?? 0 })
}
