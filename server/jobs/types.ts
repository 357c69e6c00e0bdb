import type { ZodType } from 'zod'

/**
 * What a job of a kind carries and which resource it locks: the one definition that both the
 * enqueuers (typed payloads, resource derived here, never restated) and the kind that runs it (a
 * `JobKind` beside its domain, e.g. server/orders/jobs/) use. `Payload` defaults to `any`: one list
 * holds kinds of different payloads, and a function of one payload type is not assignable to another's.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export interface JobType<Payload = any> {
  kind: string
  /** A payload that does not parse is a permanent error: retrying cannot fix it. */
  payload: ZodType<Payload>
  /** The business resource to lock while the job runs (`order:<id>` → `lock:order:<id>`). */
  resource?: (payload: Payload) => string
  /** Attempts before the dead letters, when not DEFAULT_MAX_ATTEMPTS (server/jobs/enqueue.ts). */
  maxAttempts?: number
}

export type PayloadOf<Type extends JobType> = Type extends JobType<infer Payload> ? Payload : never

export const defineJobType = <Payload>(type: JobType<Payload>): JobType<Payload> => type
