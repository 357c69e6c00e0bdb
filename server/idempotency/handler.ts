import { getHeader, type H3Event, setResponseHeader, setResponseHeaders, setResponseStatus } from 'h3'
import { useConfig } from '../config'
import { useDatabaseHandle } from '../db'
import type { Database } from '../db/client'
import { readCommitFaults } from '../faults'
import { log } from '../observability/logger'
import { metrics } from '../observability/metrics'
import { ExpiringMap } from '../cache/expiring-map'
import { problem, problemOf } from '../problems'
import { fingerprint } from './fingerprint'
import { checkIdempotencyKey } from './key'
import { canTakeOver, type Claim, finishedRecord, type ClaimInput, createIdempotencyStore, type IdempotencyStore, type RecordView, type StoredResponse } from './store'

/**
 * The one idempotency layer (SPEC §3), shared by every idempotent route. Hot path for a new key:
 * one read, one INSERT that claims the key (the unique index arbitrates, so no lock is needed in
 * front of it), then the business writes and the stored response in one fenced transaction.
 * A replay costs one read.
 */

/** signature_invalid: a webhook delivery rejected before the layer ran, logged under the event id it claimed. */
export type IdempotencyOutcome = 'miss' | 'replay' | 'conflict' | 'in_progress' | 'missing_key' | 'invalid' | 'signature_invalid' | 'error'

/** What a business handler answers: status, body, headers that must replay (e.g. Location), resource. */
export type IdempotentResult = Omit<StoredResponse, 'error'>

export interface IdempotentOperation {
  /** Whose keys these are: `tenant:<id>`, `provider:<name>`. */
  scope: string
  /** `POST /api/orders`: part of the fingerprint, so a key reused on another route is a conflict. */
  route: string
  key: string
  /** The validated payload; it alone (with method, route and scope) makes the fingerprint. */
  payload: unknown
  ttlSeconds: number
  /**
   * The business work, inside the transaction that stores its response. Throw a 4xx `problem()`
   * for a deterministic failure: its writes roll back and the problem is stored and replayed.
   */
  execute: (tx: Database) => Promise<IdempotentResult>
  /**
   * How long a duplicate waits for the in-flight original's result when the client sent no
   * `Prefer: wait` (webhooks: providers do not send it, and a 409 only makes them redeliver).
   */
  defaultWaitMs?: number
  /** Runs once the execution committed (never on a replay): e.g. wake the workers for its jobs. */
  afterCommit?: () => void
}

const MAX_PREFER_WAIT_SECONDS = 10
const FINGERPRINT_PREFIX_LENGTH = 12

/** The validated Idempotency-Key header, or a 400 problem. */
export function requireIdempotencyKey(event: H3Event): string {
  const checked = checkIdempotencyKey(getHeader(event, 'idempotency-key'))
  if (checked.ok) return checked.key
  noteOutcome(event, checked.reason === 'missing' ? 'missing_key' : 'invalid', `${event.method} ${event.context.matchedRoute?.path ?? 'unmatched'}`)
  throw checked.reason === 'missing'
    ? problem('idempotency-key-missing', 'Send an Idempotency-Key header (for example a UUID v4) and reuse it when you retry this request.')
    : problem('idempotency-key-invalid', 'The Idempotency-Key must be 1–255 visible ASCII characters (0x21–0x7E); generate a UUID v4 and use that.')
}

let cachedStore: { db: Database, store: IdempotencyStore } | undefined
function useStore(db: Database): IdempotencyStore {
  if (cachedStore?.db !== db) cachedStore = { db, store: createIdempotencyStore(db) }
  return cachedStore.store
}

type Decision =
  | { kind: 'replay', record: RecordView }
  | { kind: 'conflict', record: RecordView }
  | { kind: 'in_progress', record?: RecordView }
  | { kind: 'owner', claim: Claim, takeover: boolean }

export async function runIdempotent(event: H3Event, operation: IdempotentOperation): Promise<Record<string, unknown>> {
  const { db } = useDatabaseHandle()
  const config = useConfig()
  const store = useStore(db)
  const input: ClaimInput = {
    scope: operation.scope,
    key: operation.key,
    route: operation.route,
    fingerprint: fingerprint({ method: event.method, route: operation.route, scope: operation.scope, payload: operation.payload }),
    requestId: event.context.requestId,
    leaseMs: config.IDEMPOTENCY_LEASE_MS,
    ttlSeconds: operation.ttlSeconds,
  }
  // For the request's log line: enough of the fingerprint to tell two bodies apart, not the payload.
  event.context.idempotency = { scope: operation.scope, key: operation.key, route: operation.route, fingerprintPrefix: input.fingerprint.slice(0, FINGERPRINT_PREFIX_LENGTH) }
  const waitUntil = Date.now() + (preferredWaitMs(event) ?? operation.defaultWaitMs ?? 0)

  try {
    for (let poll = 0; ; poll++) {
      const decision = await decide(store, input)
      if (decision.kind === 'owner') return await executeAsOwner(event, store, operation, decision.claim, decision.takeover)
      if (decision.kind === 'replay') return replay(event, decision.record)
      if (decision.kind === 'conflict') {
        noteOutcome(event, 'conflict')
        metrics.fingerprintConflicts.inc({ route: operation.route })
        throw problem('idempotency-key-reused', `Idempotency-Key "${operation.key}" was first used for a different request (${decision.record.route}, other body). Send a new key for a new operation; retries must repeat the original request exactly.`)
      }
      const remaining = waitUntil - Date.now()
      if (remaining <= 0) {
        noteOutcome(event, 'in_progress')
        const retryAfter = Math.max(1, Math.ceil((decision.record?.leaseRemainingMs ?? 0) / 1000))
        throw problem('request-in-progress', `A request with Idempotency-Key "${operation.key}" is still being processed. Retry with the same key after ${retryAfter} s, or send "Prefer: wait=10" to wait for its result.`, { headers: { 'Retry-After': String(retryAfter) } })
      }
      // Prefer: wait — poll the record with a growing interval (25 ms … 200 ms) until it is final.
      await new Promise(resolve => setTimeout(resolve, Math.min(remaining, 25 * 2 ** Math.min(poll, 3))))
    }
  }
  catch (error) {
    // Problems thrown above already named their outcome; anything else (the database gone, a bug)
    // is rendered by the error handler as 503 or 500.
    if (!event.context.idempotencyOutcome) noteOutcome(event, 'error')
    throw error
  }
}

async function decide(store: IdempotencyStore, input: ClaimInput): Promise<Decision> {
  const remembered = finalRecords.get(rememberedKey(input))
  if (remembered) return remembered.fingerprint === input.fingerprint ? { kind: 'replay', record: remembered } : { kind: 'conflict', record: remembered }
  // Claim first: a new key costs one statement. The INSERT only waits on a row whose owner is
  // between storing its result and COMMIT (store.commit writes the record last), so a duplicate of
  // a request in flight is answered at once.
  let existing: RecordView | undefined
  // Bounded: each pass either decides or observes someone else's progress.
  for (let pass = 0; pass < 3; pass++) {
    if (!existing) {
      const claim = await store.insert(input)
      if (claim) return { kind: 'owner', claim, takeover: false }
    }
    else if (canTakeOver(existing, input.fingerprint)) {
      const claim = await store.takeOver(existing, input)
      if (claim) return { kind: 'owner', claim, takeover: true }
    }
    else if (existing.fingerprint !== input.fingerprint) {
      return { kind: 'conflict', record: existing }
    }
    else if (existing.status === 'processing') {
      return { kind: 'in_progress', record: existing }
    }
    else {
      remember(existing)
      return { kind: 'replay', record: existing }
    }
    existing = await store.find(input.scope, input.key)
  }
  return { kind: 'in_progress', record: existing }
}

/**
 * Finished records, remembered per instance so that a replay costs no database round trip. A
 * finished record never changes until it expires (only then may a claim reuse its key), so an
 * entry is dropped a safety margin before its expiry, against clock skew with the database.
 */
const finalRecords = new ExpiringMap<RecordView>(10_000)
const EXPIRY_MARGIN_MS = 60_000
const rememberedKey = (record: { scope: string, key: string }) => `${record.scope}\n${record.key}`

function remember(record: RecordView): void {
  finalRecords.set(rememberedKey(record), record, record.expiresAt.getTime() - EXPIRY_MARGIN_MS)
}

async function executeAsOwner(
  event: H3Event,
  store: IdempotencyStore,
  operation: IdempotentOperation,
  claim: Claim,
  takeover: boolean,
): Promise<Record<string, unknown>> {
  const leaseMs = useConfig().IDEMPOTENCY_LEASE_MS
  if (takeover) metrics.leaseTakeovers.inc({ scope: scopeKind(operation.scope) })
  const faults = readCommitFaults(event)
  const renewal = setInterval(() => void store.renew(claim, leaseMs).catch(() => {}), Math.max(50, Math.floor(leaseMs / 3)))
  renewal.unref()
  try {
    let outcome
    try {
      outcome = await store.commit(claim, async tx => toStoredResponse(await operation.execute(tx), operation.key), faults.beforeCommit)
    }
    catch (error) {
      const failure = problemOf(error)
      if (failure && failure.body.status < 500) {
        const response: StoredResponse = {
          status: failure.body.status,
          body: { ...failure.body, idempotency: { key: operation.key, replayed: false } },
          headers: { 'Content-Type': 'application/problem+json' },
          error: failure.body.type.replace('/problems/', ''),
        }
        if (await store.storeFailure(claim, response)) {
          remember(finishedRecord(claim, response))
          noteOutcome(event, 'miss')
          return respond(event, response, false)
        }
        return leaseLost(event, operation)
      }
      // Rolled back: end the lease now so the client's retry re-executes at once.
      await store.release(claim, summarise(error)).catch(() => {})
      throw error
    }
    if (outcome.kind === 'lease-lost') return leaseLost(event, operation)
    remember(finishedRecord(claim, outcome.response))
    operation.afterCommit?.()
    noteOutcome(event, 'miss')
    if (faults.afterCommit && await faults.afterCommit(event)) return {}
    return respond(event, outcome.response, false)
  }
  finally {
    clearInterval(renewal)
  }
}

function toStoredResponse(result: IdempotentResult, key: string): StoredResponse {
  return {
    status: result.status,
    body: { ...result.body, idempotency: { key, replayed: false } },
    headers: result.headers,
    resourceType: result.resourceType,
    resourceId: result.resourceId,
  }
}

function replay(event: H3Event, stored: RecordView): Record<string, unknown> {
  noteOutcome(event, 'replay')
  metrics.replays.inc({ route: routeOf(event) })
  return respond(event, {
    status: stored.responseStatus ?? 200,
    body: stored.responseBody ?? {},
    headers: stored.responseHeaders ?? undefined,
  }, true)
}

function respond(event: H3Event, response: StoredResponse, replayed: boolean): Record<string, unknown> {
  setResponseStatus(event, response.status)
  if (response.headers) setResponseHeaders(event, response.headers)
  if (replayed) setResponseHeader(event, 'Idempotent-Replayed', 'true')
  const idempotency = response.body.idempotency as Record<string, unknown> | undefined
  return { ...response.body, idempotency: { ...idempotency, replayed } }
}

function leaseLost(event: H3Event, operation: IdempotentOperation): never {
  metrics.leaseLost.inc({ scope: scopeKind(operation.scope) })
  noteOutcome(event, 'in_progress')
  log.warn('idempotency lease lost before commit; nothing stored', { requestId: event.context.requestId, idempotencyKey: operation.key })
  throw problem('request-in-progress', 'This attempt took too long and another attempt with the same Idempotency-Key took over. Retry with the same key to get its result.', { headers: { 'Retry-After': '1' } })
}

/** Records the request's outcome for its log line and counts it by route (a bounded label: the operation's route). */
function noteOutcome(event: H3Event, outcome: IdempotencyOutcome, route = routeOf(event)): void {
  event.context.idempotencyOutcome = outcome
  metrics.idempotencyOutcomes.inc({ route, outcome })
}

const routeOf = (event: H3Event) => event.context.idempotency?.route ?? 'unknown'

function preferredWaitMs(event: H3Event): number | undefined {
  const match = /(?:^|[,;\s])wait=(\d{1,5})(?:$|[,;\s])/i.exec(getHeader(event, 'prefer') ?? '')
  if (!match) return undefined
  const seconds = Math.min(Number(match[1]), MAX_PREFER_WAIT_SECONDS)
  setResponseHeader(event, 'Preference-Applied', `wait=${seconds}`)
  return seconds * 1000
}

const scopeKind = (scope: string) => scope.split(':')[0] ?? scope
const summarise = (error: unknown) => (error instanceof Error ? `${error.name}: ${error.message}` : String(error))
