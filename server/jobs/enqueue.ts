import { sql } from 'drizzle-orm'
import type { Database, BoundStatement } from '@idempotent-checkout/db-kit'
import { newId } from '../db/ids'
import { jobs } from '../db/schema'
import { defineStatement, afterCommit, writeAtCommit } from '@idempotent-checkout/db-kit'
import type { JobType, PayloadOf } from './types'
import { wakeWorkers } from './wake'

export const DEFAULT_MAX_ATTEMPTS = 8

export interface EnqueueOptions {
  /** Unique per kind: enqueueing the same (kind, dedupeKey) again is a no-op. */
  dedupeKey: string
  idempotencyKey?: string
  requestId?: string
  maxAttempts?: number
  delayMs?: number
  /** Test-only faults (see server/jobs/faults.ts), honoured only with FAULTS_ENABLED=true. */
  faults?: Record<string, unknown>
}

const runAfter = (delayMs: unknown) => sql`now() + (${delayMs}::int * interval '1 millisecond')`

function jobValues<Type extends JobType>(type: Type, payload: PayloadOf<Type>, options: EnqueueOptions) {
  return {
    id: newId('job'),
    kind: type.kind,
    dedupeKey: options.dedupeKey,
    payload: payload as Record<string, unknown>,
    maxAttempts: options.maxAttempts ?? type.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
    resourceId: type.resource?.(payload) ?? null,
    idempotencyKey: options.idempotencyKey ?? null,
    requestId: options.requestId ?? null,
    faults: options.faults ?? null,
  }
}

/**
 * Enqueues inside the caller's transaction (the outbox): the job exists if and only if the business
 * write commits, and the workers are woken once it did (an after-commit hook of `tx`, see
 * transaction() of @idempotent-checkout/db-kit). Resolves to the new job's id, or undefined when (kind, dedupeKey)
 * already exists.
 */
export async function enqueueJob<Type extends JobType>(tx: Database, type: Type, payload: PayloadOf<Type>, options: EnqueueOptions): Promise<string | undefined> {
  const [row] = await jobInsertQuery(tx, type, payload, options).returning({ id: jobs.id })
  afterCommit(tx, wakeWorkers)
  return row?.id
}

/**
 * enqueueJob as one of the transaction's last writes: sent with its COMMIT (writeAtCommit of
 * @idempotent-checkout/db-kit), no round trip of its own, the new job's id not read back.
 */
export function enqueueJobAtCommit<Type extends JobType>(tx: Database, type: Type, payload: PayloadOf<Type>, options: EnqueueOptions): void {
  writeAtCommit(tx, boundJobInsert(tx, type, payload, options))
  afterCommit(tx, wakeWorkers)
}

const jobInsertQuery = <Type extends JobType>(tx: Database, type: Type, payload: PayloadOf<Type>, options: EnqueueOptions) =>
  tx.insert(jobs).values({ ...jobValues(type, payload, options), runAt: runAfter(options.delayMs ?? 0) })
    .onConflictDoNothing({ target: [jobs.kind, jobs.dedupeKey] })

const insertJob = defineStatement(db => db.insert(jobs).values({
  ...Object.fromEntries(Object.keys(jobValues({ kind: '', payload: undefined as never }, {}, { dedupeKey: '' })).map(name => [name, sql.placeholder(name)])) as Record<keyof ReturnType<typeof jobValues>, ReturnType<typeof sql.placeholder>>,
  runAt: runAfter(sql.placeholder('delayMs')),
}).onConflictDoNothing({ target: [jobs.kind, jobs.dedupeKey] }))

const boundJobInsert = <Type extends JobType>(db: Database, type: Type, payload: PayloadOf<Type>, options: EnqueueOptions): BoundStatement =>
  insertJob(db, { ...jobValues(type, payload, options), delayMs: options.delayMs ?? 0 })

/** enqueueJob as a statement for an atomic transaction (DatabaseHandle.transact wakes the workers after its commit). */
export function jobInsert<Type extends JobType>(db: Database, type: Type, payload: PayloadOf<Type>, options: EnqueueOptions): BoundStatement {
  return { ...boundJobInsert(db, type, payload, options), afterCommit: wakeWorkers }
}
