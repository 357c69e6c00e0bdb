import { sql } from 'drizzle-orm'
import type { Database } from '../db/client'
import { newId } from '../db/ids'
import { jobs } from '../db/schema'

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

/**
 * Enqueues inside the caller's transaction (the outbox): the job exists if and only if the business
 * write commits. Resolves to the new job's id, or undefined when (kind, dedupeKey) already exists.
 * Wake workers after the commit (wakeWorkers), not here.
 */
export async function enqueueJob(tx: Database, input: EnqueueInput): Promise<string | undefined> {
  const [row] = await tx.insert(jobs).values({
    id: newId('job'),
    kind: input.kind,
    dedupeKey: input.dedupeKey,
    payload: input.payload,
    maxAttempts: input.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
    runAt: sql`now() + (${input.delayMs ?? 0}::int * interval '1 millisecond')`,
    resourceId: input.resourceId,
    idempotencyKey: input.idempotencyKey,
    requestId: input.requestId,
    faults: input.faults,
  }).onConflictDoNothing({ target: [jobs.kind, jobs.dedupeKey] }).returning({ id: jobs.id })
  return row?.id
}
