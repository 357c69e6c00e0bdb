import { randomUUID } from 'node:crypto'
import { fingerprint } from '../core/fingerprint'
import { checkIdempotencyKey } from '../core/key'
import { runIdempotent } from '../core/run'
import { idempotencyReady, useIdempotencyOptions } from './services'

/**
 * Work that must happen once per id outside a request: a queue consumer's message, a scheduled
 * task's run. The same records, locks and lease as the idempotent routes, under scope `run-once`.
 */

export interface RunOnceOptions {
  /** Whose ids these are; ids of two scopes never meet. Default `run-once`. */
  scope?: string
  /** Seconds the result is remembered; default the module's `ttl`. */
  ttl?: number
  /**
   * The run's lease in ms, renewed while `work` runs (a crashed run's id is free again once it ran
   * out), and how long a second call waits for a running one's result. Default the module's `leaseMs`.
   */
  lease?: number
}

/** Another call with this id was still running after `lease` ms: its result is not known yet. Call again later. */
export class IdempotencyInProgressError extends Error {
  constructor(readonly id: string, readonly scope: string) {
    super(`runOnce: "${id}" (scope ${scope}) is still running elsewhere; call again later for its result.`)
    this.name = 'IdempotencyInProgressError'
  }
}

const ROUTE = 'runOnce'

/**
 * Runs `work` once per `id`: the first call runs it and stores its result as JSON (every call, the
 * first too, gets that JSON form back: Dates as strings, undefined as null); later calls return it
 * without running `work`.
 * A call while another runs waits up to `lease` for its result, then throws
 * IdempotencyInProgressError. A throw from `work` stores nothing: the next call runs it again.
 */
export async function runOnce<Work extends () => unknown>(id: string, work: Work, options: RunOnceOptions = {}): Promise<Awaited<ReturnType<Work>>> {
  if (!checkIdempotencyKey(id).ok) {
    throw new TypeError(`runOnce: the id must be 1–255 visible ASCII characters (0x21–0x7E), got ${JSON.stringify(id.slice(0, 40))}: use the message's or the run's own id (a UUID).`)
  }
  const settings = useIdempotencyOptions()
  const scope = `${settings.keyPrefix}run-once:${options.scope ?? 'run-once'}`
  const leaseMs = options.lease ?? settings.leaseMs
  const deps = await idempotencyReady()
  const outcome = await runIdempotent(
    // Whatever `work` throws is a failure to retry, never an answer to keep.
    { ...deps, failureOf: () => undefined },
    {
      scope,
      route: ROUTE,
      key: id,
      fingerprint: fingerprint({ method: 'RUN', route: ROUTE, scope, payload: null }),
      requestId: randomUUID(),
      ttlSeconds: options.ttl ?? settings.ttl,
      waitMs: leaseMs,
      leaseMs,
    },
    // The first caller gets the JSON form too, as every later one will.
    { mode: 'leased', execute: async () => ({ status: 200, body: { result: jsonForm(await work()) } }) },
  )
  if (outcome.kind === 'executed' || outcome.kind === 'replayed') return outcome.response.body.result as Awaited<ReturnType<Work>>
  throw new IdempotencyInProgressError(id, scope)
}

const jsonForm = (value: unknown): unknown => value === undefined ? null : JSON.parse(JSON.stringify(value)) as unknown
