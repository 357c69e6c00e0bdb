import type { ZodType } from 'zod'
import type { Database } from '../db/client'
import type { ClaimedJob } from './store'

export interface JobContext {
  job: ClaimedJob
  /** Aborted when the claim is lost (fence superseded, resource lock lost) or at shutdown. */
  signal: AbortSignal
  db: Database
  /**
   * The job's business writes and its completion, in one transaction fenced by the claim's token.
   * Throws FencedOutError (nothing written) when another worker holds the job now.
   */
  commit(work: (tx: Database) => Promise<void>): Promise<void>
}

export interface JobKind<Payload = any> {
  kind: string
  /** A payload that does not parse is a permanent error: retrying cannot fix it. */
  payload: ZodType<Payload>
  /** The business resource to lock while the job runs (`order:<id>` → `lock:order:<id>`). */
  resource?: (payload: Payload) => string
  run(context: JobContext, payload: Payload): Promise<void>
}

export const defineJobKind = <Payload>(kind: JobKind<Payload>): JobKind<Payload> => kind
