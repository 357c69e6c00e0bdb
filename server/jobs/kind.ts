import type { Database } from '@idempotent-checkout/db-kit'
import type { ClaimedJob, JobEffect } from './store'
import type { JobType } from './types'

export interface JobContext {
  job: ClaimedJob
  /** Aborted when the claim is lost (fence superseded, resource lock lost) or at shutdown. */
  signal: AbortSignal
  db: Database
  /**
   * The job's completion and its effect (CTEs reading `done`, see JobEffect) in one statement: one
   * round trip, one commit. Throws FencedOutError (nothing written) when another worker holds the job now.
   */
  complete(effect?: JobEffect): Promise<void>
  /**
   * For effects that need a conversation with the database: the business writes and the completion
   * in one interactive transaction fenced by the claim's token. Same FencedOutError.
   */
  commit(work: (tx: Database) => Promise<void>): Promise<void>
}

/** A job type (server/jobs/types.ts) with the code that runs it. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- as JobType: one list holds every kind
export interface JobKind<Payload = any, Loaded = any> extends JobType<Payload> {
  /**
   * Reads what the jobs of one claimed batch need, in one query for the batch instead of one per
   * job: an entry per payload, in order. Read before the job runs, as a read outside the commit would be.
   */
  load?: (db: Database, payloads: Payload[]) => Promise<Loaded[]>
  run(context: JobContext, payload: Payload, loaded: Loaded): Promise<void>
}

export const defineJobKind = <Payload, Loaded = undefined>(kind: JobKind<Payload, Loaded>): JobKind<Payload, Loaded> => kind
