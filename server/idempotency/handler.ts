import { getHeader, type H3Event, setResponseHeader, setResponseHeaders, setResponseStatus } from 'h3'
import type { Storage } from 'unstorage'
import { useConfig } from '../config'
import { useDatabaseHandle } from '../db'
import type { Database } from '../db/client'
import { readCommitFaults } from '../faults'
import { useLocks } from '../locks'
import { log } from '../observability/logger'
import { metrics } from '../observability/metrics'
import { problem } from '../problems'
import { useRedis } from '../redis'
import { type AtomicPlan, type IdempotencyDeps, type IdempotentOutcome, type IdempotentResult, runIdempotent as runCore } from './core'
import { fingerprint } from './fingerprint'
import { parseIdempotencyKeyHeader } from './key'
import { createReplayCache, type ReplayCache } from './replay-cache'

/**
 * The h3 side of the one idempotency layer (SPEC §3), shared by every idempotent route: reads the
 * request (key, `Prefer: wait`, test faults), runs the transport-free core (./core.ts) and turns its
 * outcome into the response, headers, metrics and the request's log fields.
 */

/** signature_invalid: a webhook delivery rejected before the layer ran, logged under the event id it claimed. */
export type IdempotencyOutcome = 'miss' | 'replay' | 'conflict' | 'in_progress' | 'missing_key' | 'invalid' | 'signature_invalid' | 'error'

interface RouteOperation {
  /** Whose keys these are: `tenant:<id>`, `provider:<name>`. */
  scope: string
  /** `POST /api/orders`: part of the fingerprint, so a key reused on another route is a conflict. */
  route: string
  key: string
  /** The validated payload; it alone (with method, route and scope) makes the fingerprint. */
  payload: unknown
  ttlSeconds: number
  /**
   * How long a duplicate waits for the in-flight original's result when the client sent no
   * `Prefer: wait` (webhooks: providers do not send it, and a 409 only makes them redeliver).
   */
  defaultWaitMs?: number
}

/** Every effect in the one transaction (atomic mode): the plan's statements and the response they make. */
export interface AtomicRoute extends RouteOperation {
  plan: (db: Database, now: Date) => AtomicPlan
}

/** The business work calls out before it commits (leased mode): a claimed record with a fenced lease. */
export interface LeasedRoute extends RouteOperation {
  /**
   * Inside the transaction that stores its response. Throw a 4xx `problem()` for a deterministic
   * failure: its writes roll back and the problem is stored and replayed.
   */
  execute: (tx: Database) => Promise<IdempotentResult>
}

/** What the route answers, and what the layer made of the request (for the route's own counting). */
export interface IdempotentReply {
  outcome: 'miss' | 'replay'
  body: Record<string, unknown>
}

const MAX_PREFER_WAIT_SECONDS = 10
const FINGERPRINT_PREFIX_LENGTH = 12
/**
 * Retry-After of a 409 request-in-progress: a short hint, never the lease or lock TTL — an atomic
 * request finishes in milliseconds, and a client that honours the header should not wait for seconds.
 */
export const IN_PROGRESS_RETRY_AFTER_SECONDS = 1
const REPLAY_MOUNT = 'idempotency-replays'

/** The validated Idempotency-Key header, or a 400 problem. */
export function requireIdempotencyKey(event: H3Event): string {
  const checked = parseIdempotencyKeyHeader(getHeader(event, 'idempotency-key'))
  if (checked.ok) return checked.key
  noteOutcome(event, checked.reason === 'missing' ? 'missing_key' : 'invalid', `${event.method} ${event.context.matchedRoute?.path ?? 'unmatched'}`)
  throw checked.reason === 'missing'
    ? problem('idempotency-key-missing', 'Send an Idempotency-Key header (for example a UUID v4) and reuse it when you retry this request.')
    : problem('idempotency-key-invalid', 'The Idempotency-Key must be 1–255 visible ASCII characters (0x21–0x7E), sent once, either bare or as one RFC 8941 string ("…", with \\" and \\\\ escaped); generate a UUID v4 and use that.')
}

/**
 * Runs an atomic operation once per key and answers the request: the first execution's response,
 * or its replay. A key reused with another request (422), a duplicate of a request still in flight
 * (409) and failures are thrown as problems.
 */
export async function runIdempotent(event: H3Event, operation: AtomicRoute | LeasedRoute): Promise<IdempotentReply> {
  const faults = readCommitFaults(event)
  const request = {
    scope: operation.scope,
    route: operation.route,
    key: operation.key,
    fingerprint: fingerprint({ method: event.method, route: operation.route, scope: operation.scope, payload: operation.payload }),
    requestId: event.context.requestId,
    ttlSeconds: operation.ttlSeconds,
    waitMs: preferredWaitMs(event) ?? operation.defaultWaitMs ?? 0,
  }
  // For the request's log line: enough of the fingerprint to tell two bodies apart, not the payload.
  event.context.idempotency = { scope: request.scope, key: request.key, route: request.route, fingerprintPrefix: request.fingerprint.slice(0, FINGERPRINT_PREFIX_LENGTH) }

  let outcome: IdempotentOutcome
  try {
    outcome = await runCore(useIdempotencyDeps(), request, 'plan' in operation
      ? { mode: 'atomic', plan: operation.plan, beforeCommit: faults.beforeCommit }
      : { mode: 'leased', execute: operation.execute, beforeCommit: faults.beforeCommit })
  }
  catch (error) {
    // The database gone, a bug: rendered by the error handler as 503 or 500; nothing was stored.
    noteOutcome(event, 'error')
    throw error
  }
  if (outcome.degraded) {
    metrics.idempotencyDegraded.inc({ route: request.route })
    log.warn('processing lock unavailable; the unique index decided', { requestId: request.requestId, idempotencyKey: request.key })
  }
  if (outcome.takeover) metrics.leaseTakeovers.inc({ scope: scopeKind(request.scope) })

  switch (outcome.kind) {
    case 'executed':
      noteOutcome(event, 'miss')
      if (faults.afterCommit && await faults.afterCommit(event)) return { outcome: 'miss', body: {} }
      return { outcome: 'miss', body: respond(event, outcome.response, false) }
    case 'replayed':
      noteOutcome(event, 'replay')
      metrics.replays.inc({ route: request.route })
      return { outcome: 'replay', body: respond(event, outcome.response, true) }
    case 'conflict':
      noteOutcome(event, 'conflict')
      metrics.fingerprintConflicts.inc({ route: request.route })
      throw problem('idempotency-key-reused', `Idempotency-Key "${request.key}" was first used for a different request (${outcome.firstRoute ? `${outcome.firstRoute}, ` : ''}other body). Send a new key for a new operation; retries must repeat the original request exactly.`)
    case 'in_progress':
      noteOutcome(event, 'in_progress')
      if (outcome.reason === 'lease_lost') metrics.leaseLost.inc({ scope: scopeKind(request.scope) })
      throw problem('request-in-progress', `A request with Idempotency-Key "${request.key}" is still being processed. Retry with the same key after ${IN_PROGRESS_RETRY_AFTER_SECONDS} s, or send "Prefer: wait=10" to wait for its result.`, { headers: { 'Retry-After': String(IN_PROGRESS_RETRY_AFTER_SECONDS) } })
  }
}

function respond(event: H3Event, response: { status: number, body: Record<string, unknown>, headers?: Record<string, string> }, replayed: boolean): Record<string, unknown> {
  setResponseStatus(event, response.status)
  if (response.headers) setResponseHeaders(event, response.headers)
  if (replayed) setResponseHeader(event, 'Idempotent-Replayed', 'true')
  const idempotency = response.body.idempotency as Record<string, unknown> | undefined
  return { ...response.body, idempotency: { ...idempotency, replayed } }
}

/** Records the request's outcome for its log line and counts it by route (a bounded label: the operation's route). */
function noteOutcome(event: H3Event, outcome: IdempotencyOutcome, route = event.context.idempotency?.route ?? 'unknown'): void {
  event.context.idempotencyOutcome = outcome
  metrics.idempotencyOutcomes.inc({ route, outcome })
}

function preferredWaitMs(event: H3Event): number | undefined {
  const match = /(?:^|[,;\s])wait=(\d{1,5})(?:$|[,;\s])/i.exec(getHeader(event, 'prefer') ?? '')
  if (!match) return undefined
  const seconds = Math.min(Number(match[1]), MAX_PREFER_WAIT_SECONDS)
  setResponseHeader(event, 'Preference-Applied', `wait=${seconds}`)
  return seconds * 1000
}

let replays: ReplayCache | undefined

/** Finished responses: this instance's bytes-bounded tier, and Nitro storage on Redis when REDIS_URL is set. */
function useReplayCache(): ReplayCache {
  if (replays) return replays
  const config = useConfig()
  const redis = useRedis()
  let shared: Storage | undefined
  if (redis) {
    useStorage().mount(REPLAY_MOUNT, redis.storageDriver)
    shared = useStorage(REPLAY_MOUNT)
  }
  replays = createReplayCache({
    maxBytes: config.IDEMPOTENCY_REPLAY_CACHE_BYTES,
    shared: shared && { storage: shared, signingKey: config.REPLAY_CACHE_SECRET },
    onSharedError: () => metrics.replayCacheErrors.inc(),
    onRejected: reason => metrics.replayCacheRejected.inc({ reason }),
  })
  return replays
}

export function useIdempotencyDeps(): IdempotencyDeps {
  const config = useConfig()
  return {
    database: useDatabaseHandle(),
    locks: useLocks(),
    replays: useReplayCache(),
    lockTtlMs: config.IDEMPOTENCY_LOCK_TTL_MS,
    leaseMs: config.IDEMPOTENCY_LEASE_MS,
  }
}

const scopeKind = (scope: string) => scope.split(':')[0] ?? scope
