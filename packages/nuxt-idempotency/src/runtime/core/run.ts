import { createHash } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import type { BoundStatement, Database, DatabaseHandle } from '@idempotent-checkout/db-kit'
import { describeDatabaseError, isLockTimeout, violatedConstraint, violatedUniqueConstraint } from '@idempotent-checkout/db-kit'
import { LockBackendError, type Locks } from '../locks/types'
import { openResponse, type ResponseCipher, sealResponse } from './encryption'
import { CACHE_EXPIRY_MARGIN_MS, type FinishedRecord, finishedFromView, type ReplayCache } from './replay-cache'
import {
  canTakeOver, type Claim, type ClaimInput, type CommitOutcome, createIdempotencyStore, finishedRecordExpiry, finishedRecordInsert, type IdempotencyStore,
  RECORD_KEY_CONSTRAINT, type RecordView, type StoredResponse,
} from './store'

/**
 * The idempotency lifecycle (README.md#the-key-contract, README.md#modes), free of any transport:
 * it takes the store, the locks and the operation, and returns what happened. `./handler.ts` adapts
 * it to h3.
 *
 * atomic (every effect lives in the transaction): a processing lock on (scope, key), tagged with the
 * fingerprint, keeps duplicates in flight off Postgres; the owner sends its record (already final,
 * with the response), the business writes and COMMIT together — one commit, one round trip on
 * postgres.js. The unique (scope, key) decides whenever the lock could not (Redis lost or flushed,
 * the lock expired): a second execution waits on the first's uncommitted record and replays it.
 *
 * atomic with `execute(tx)` (the handler reads before it writes, in the record's transaction): a
 * claimed record with a fenced lease token; the business writes and the stored response commit
 * together, fenced by the token.
 *
 * leased (the handler calls out: an API, a file, a mail): the claim commits with its lease, the
 * handler runs with no transaction open, and its response is stored afterwards, fenced by the token.
 * An owner that dies mid-call leaves the lease to run out; the next retry then runs the call again,
 * which is why the handler passes the key on to whatever it calls.
 */

export type IdempotentResult = Omit<StoredResponse, 'error'>

/** What an atomic operation will do, known before anything is sent. */
export interface AtomicPlan {
  /** The business writes, sent in the record's transaction. */
  statements: BoundStatement[]
  /** The response those writes produce. */
  result: IdempotentResult
  /**
   * One of the plan's own unique or check constraints was violated (the cart was ordered under
   * another key; stock would be oversold): the deterministic answer, read after the rollback and
   * stored for the key. Throw a 4xx `problem()` to store a failure; answer undefined for a
   * constraint the plan does not know (the request fails).
   */
  onConstraintViolation?: (constraint: string, db: Database) => Promise<IdempotentResult | undefined>
}

export interface AtomicOperation {
  mode: 'atomic'
  /**
   * `now` is the transaction's time: the record's and, written by the plan, the business rows'
   * (chosen here, not by the database, because the response that carries it is built first).
   */
  plan: (db: Database, now: Date) => AtomicPlan
  /** Runs in the transaction just before COMMIT (test faults); throwing rolls everything back. */
  beforeCommit?: () => Promise<void>
}

/** Atomic, for work that reads before it writes: the writes and the stored response in one transaction. */
export interface TransactionalOperation {
  mode: 'atomic'
  /**
   * The business work, inside the transaction that stores its response. Throw a 4xx error for a
   * deterministic failure: its writes roll back and the failure is stored and replayed.
   */
  execute: (tx: Database) => Promise<IdempotentResult>
  beforeCommit?: () => Promise<void>
}

export interface LeasedOperation {
  mode: 'leased'
  /**
   * The business work, with no transaction open. A thrown 4xx error is stored and replayed; any
   * other failure ends the lease, so that a retry runs the work again.
   */
  execute: () => Promise<IdempotentResult>
}

export type IdempotentOperation = AtomicOperation | TransactionalOperation | LeasedOperation

/** A deterministic failure found in a thrown error (a 4xx), as it is stored and replayed. */
export interface StoredFailure {
  status: number
  body: Record<string, unknown>
  headers?: Record<string, string>
  /** A short name of the failure, kept in the record's `error` column. */
  name: string
}

export interface IdempotentRequest {
  /** Whose keys these are: `tenant:<id>`, `provider:<name>`. */
  scope: string
  /** `POST /api/orders`: part of the fingerprint, so a key reused on another route is a conflict. */
  route: string
  key: string
  fingerprint: string
  requestId: string
  ttlSeconds: number
  /** How long a duplicate of a request still in flight waits for its result before `in_progress`. */
  waitMs: number
  /** Adds `idempotency: { key, replayed }` to each stored body (an object): a replay marker in the body as well as the header. */
  annotateBody?: boolean
  /** This request's processing lock (atomic) or lease (leased), in ms; default the deps' `lockTtlMs` / `leaseMs`. */
  leaseMs?: number
  /** false: the response is answered but not stored, and the key is free again (a retry runs again). */
  storeIf?: (response: { status: number, body: unknown }) => boolean
  /** A response whose stored form (JSON) is larger is answered but not stored; default the deps' (0: no limit). */
  maxResponseBytes?: number
}

export interface IdempotencyDeps {
  database: DatabaseHandle
  locks: Locks
  replays: ReplayCache
  /** Processing lock (atomic): renewed every third of it while the owner runs. */
  lockTtlMs: number
  /** Lease of a claimed record (leased): renewed likewise. */
  leaseMs: number
  /** The deterministic failure a thrown error stands for; undefined: not one (nothing is stored). Default: an HTTP error of status 400–499. */
  failureOf?: (error: unknown) => StoredFailure | undefined
  /** Encrypts stored responses (body and headers) at rest; absent: stored as they are. */
  cipher?: ResponseCipher
  /** Default of IdempotentRequest.maxResponseBytes; 0 or absent: no limit. */
  maxResponseBytes?: number
}

/** Why an executed response was answered but not stored (the key is free again). */
export type NotStoredReason = 'store_if' | 'response_too_large'

interface Notes {
  /** The processing lock could not be used (Redis unreachable): the unique index alone decided. */
  degraded?: boolean
  /** A leased record abandoned by its owner was taken over. */
  takeover?: boolean
}

export type IdempotentOutcome = Notes & (
  | { kind: 'executed', response: StoredResponse, notStored?: NotStoredReason }
  | { kind: 'replayed', response: FinishedRecord['response'] }
  /** Same key, another request; `firstRoute` when known. */
  | { kind: 'conflict', firstRoute?: string }
  /** lease_lost: a leased owner ran past its lease and another took over; nothing was stored. */
  | { kind: 'in_progress', reason: 'running' | 'lease_lost' }
)

/** Atomic keys longer than this are hashed in the lock's name, to keep Redis keys short. */
const MAX_LOCK_KEY_LENGTH = 200
/** Raw and hashed names apart: a key that spells a hashed name (`sha256:…`) must not share that key's lock. */
const RAW_LOCK_PREFIX = 'key:'
const HASHED_LOCK_PREFIX = 'sha256:'
/** Each pass either decides or sees someone else's progress (a record deleted or reused meanwhile). */
const MAX_PASSES = 3

export function processingLockKey(scope: string, key: string): string {
  const name = key.length > MAX_LOCK_KEY_LENGTH ? `${HASHED_LOCK_PREFIX}${createHash('sha256').update(key).digest('hex')}` : `${RAW_LOCK_PREFIX}${key}`
  return `idempotency:${scope}:${name}`
}

export async function runIdempotent(deps: IdempotencyDeps, request: IdempotentRequest, operation: IdempotentOperation): Promise<IdempotentOutcome> {
  const waitUntil = Date.now() + request.waitMs
  let degraded = false
  for (let poll = 0; ; poll++) {
    const outcome = 'plan' in operation
      ? await attemptAtomic(deps, request, operation)
      : await attemptClaimed(deps, request, operation)
    degraded ||= outcome.degraded === true
    const remaining = waitUntil - Date.now()
    if (outcome.kind !== 'in_progress' || outcome.reason !== 'running' || remaining <= 0) return { ...outcome, ...(degraded && { degraded }) }
    // Prefer: wait — look again with a growing interval (25 ms … 200 ms) until the first one finished.
    await sleep(Math.min(remaining, 25 * 2 ** Math.min(poll, 3)))
  }
}

function answerFinished(record: FinishedRecord, fingerprint: string): IdempotentOutcome {
  if (record.fingerprint !== fingerprint) return { kind: 'conflict', firstRoute: record.route }
  return { kind: 'replayed', response: record.response }
}

// ---------------------------------------------------------------------------------------------
// atomic
// ---------------------------------------------------------------------------------------------

async function attemptAtomic(deps: IdempotencyDeps, request: IdempotentRequest, operation: AtomicOperation): Promise<IdempotentOutcome> {
  const remembered = deps.replays.local(request.scope, request.key)
  if (remembered) return answerFinished(remembered, request.fingerprint)
  const lockTtlMs = request.leaseMs ?? deps.lockTtlMs
  const lockKey = processingLockKey(request.scope, request.key)
  // The shared cache and the lock are asked at once: on one Redis connection they travel together.
  const [cached, lock] = await Promise.all([
    deps.replays.shared(request.scope, request.key, request.fingerprint),
    deps.locks.acquireTagged(lockKey, lockTtlMs, request.fingerprint).catch((error: unknown) => {
      if (error instanceof LockBackendError) return undefined
      throw error
    }),
  ])
  if (cached) {
    if (lock?.acquired) void deps.locks.release(lockKey, lock.token).catch(() => {})
    return answerFinished(cached, request.fingerprint)
  }
  // Redis did not answer: the unique index alone decides.
  if (!lock) return { ...await executeAtomically(deps, request, operation), degraded: true }
  if (!lock.acquired) return await answerWhileHeld(deps, request, lock.holderTag)
  const { token } = lock
  const renewal = setInterval(() => void deps.locks.extend(lockKey, token, lockTtlMs).catch(() => {}), Math.max(50, Math.floor(lockTtlMs / 3)))
  renewal.unref()
  try {
    return await executeAtomically(deps, request, operation)
  }
  finally {
    clearInterval(renewal)
    // Off the response path (it travels with the cache write): a lock left behind only expires,
    // and the caches answer before it.
    void deps.locks.release(lockKey, token).catch(() => {})
  }
}

/**
 * Another request holds the key. A finished record answers (the holder may be a late duplicate
 * about to learn it lost); otherwise the holder runs first: another body is refused at once, even
 * while in flight, and the same one is in progress.
 */
async function answerWhileHeld(deps: IdempotencyDeps, request: IdempotentRequest, holderTag: string | undefined): Promise<IdempotentOutcome> {
  const existing = await storeOf(deps).find(request.scope, request.key)
  if (existing && !existing.expired && existing.status !== 'processing') return answerStored(deps, existing, request.fingerprint)
  if (holderTag !== undefined && holderTag !== request.fingerprint) return { kind: 'conflict', firstRoute: existing?.route }
  return { kind: 'in_progress', reason: 'running' }
}

async function executeAtomically(deps: IdempotencyDeps, request: IdempotentRequest, operation: AtomicOperation, pass = 0): Promise<IdempotentOutcome> {
  const { db } = deps.database
  const now = new Date()
  const plan = operation.plan(db, now)
  const response = storedResponse(plan.result, request)
  const notStored = notStoredBecause(deps, request, response)
  const record = { ...request, response: sealed(deps, request, response), now }
  try {
    // Not stored: the business writes commit alone, and the key stays free.
    const statements = notStored ? plan.statements : [finishedRecordInsert(db, record), ...plan.statements]
    if (statements.length) await deps.database.transact(statements, { beforeCommit: operation.beforeCommit })
  }
  catch (error) {
    const constraint = violatedConstraint(error)
    if (constraint === undefined) {
      if (isLockTimeout(error)) return { kind: 'in_progress', reason: 'running' }
      throw error
    }
    // A business constraint may fail before the record's does (a duplicate of a committed request
    // writes the same rows): the key's own record answers first, whichever constraint failed.
    const existing = await storeOf(deps).find(request.scope, request.key)
    if (constraint === RECORD_KEY_CONSTRAINT || existing) {
      return answerForTakenKey(deps, request, existing, pass, () => executeAtomically(deps, request, operation, pass + 1))
    }
    const answer = plan.onConstraintViolation && await deterministicAnswer(deps, () => plan.onConstraintViolation!(constraint, db), request)
    if (!answer) throw error
    return storeAnswer(deps, request, answer, pass)
  }
  if (notStored) return { kind: 'executed', response, notStored }
  rememberExecuted(deps, request, response, finishedRecordExpiry(record))
  return { kind: 'executed', response }
}

/** Stores a deterministic answer found after the business writes were refused: the record alone. */
async function storeAnswer(deps: IdempotencyDeps, request: IdempotentRequest, response: StoredResponse, pass: number): Promise<IdempotentOutcome> {
  const notStored = notStoredBecause(deps, request, response)
  if (notStored) return { kind: 'executed', response, notStored }
  const record = { ...request, response: sealed(deps, request, response), now: new Date() }
  try {
    await deps.database.transact([finishedRecordInsert(deps.database.db, record)])
  }
  catch (error) {
    if (violatedUniqueConstraint(error) === RECORD_KEY_CONSTRAINT) {
      const existing = await storeOf(deps).find(request.scope, request.key)
      return answerForTakenKey(deps, request, existing, pass, () => storeAnswer(deps, request, response, pass + 1))
    }
    if (isLockTimeout(error)) return { kind: 'in_progress', reason: 'running' }
    throw error
  }
  rememberExecuted(deps, request, response, finishedRecordExpiry(record))
  return { kind: 'executed', response }
}

/**
 * The key's record exists (its transaction committed before ours; a duplicate waits on the unique
 * index for that, up to the database's lock_timeout, then answers in progress): replay it, refuse another
 * request, or — when it expired or was abandoned by a leased owner — delete it and execute anew.
 */
async function answerForTakenKey(
  deps: IdempotencyDeps,
  request: IdempotentRequest,
  existing: RecordView | undefined,
  pass: number,
  again: () => Promise<IdempotentOutcome>,
): Promise<IdempotentOutcome> {
  const retry = pass + 1 < MAX_PASSES
  if (!existing) return retry ? again() : { kind: 'in_progress', reason: 'running' }
  if (canTakeOver(existing, request.fingerprint)) {
    if (!retry) return { kind: 'in_progress', reason: 'running' }
    await storeOf(deps).deleteStale(existing, request.fingerprint)
    return { ...await again(), ...(!existing.expired && { takeover: true }) }
  }
  if (existing.fingerprint !== request.fingerprint) return { kind: 'conflict', firstRoute: existing.route }
  if (existing.status === 'processing') return { kind: 'in_progress', reason: 'running' }
  return answerStored(deps, existing, request.fingerprint)
}

// ---------------------------------------------------------------------------------------------
// claimed first: leased, and atomic with execute(tx)
// ---------------------------------------------------------------------------------------------

type LeasedDecision
  = | { kind: 'answered', outcome: IdempotentOutcome }
    | { kind: 'owner', claim: Claim, takeover: boolean }

async function attemptClaimed(deps: IdempotencyDeps, request: IdempotentRequest, operation: TransactionalOperation | LeasedOperation): Promise<IdempotentOutcome> {
  const cached = deps.replays.local(request.scope, request.key) ?? await deps.replays.shared(request.scope, request.key, request.fingerprint)
  if (cached) return answerFinished(cached, request.fingerprint)
  const input: ClaimInput = { ...request, leaseMs: request.leaseMs ?? deps.leaseMs }
  const decision = await claimLeased(deps, input)
  if (decision.kind === 'answered') return decision.outcome
  const outcome = await executeClaimed(deps, request, operation, decision.claim, input.leaseMs)
  return decision.takeover ? { ...outcome, takeover: true } : outcome
}

/**
 * Claim first: a new key costs one statement. The INSERT only waits on a row whose owner is between
 * storing its result and COMMIT (the result is written last), so a duplicate of a request in flight
 * is answered at once.
 */
async function claimLeased(deps: IdempotencyDeps, input: ClaimInput): Promise<LeasedDecision> {
  const store = storeOf(deps)
  let existing: RecordView | undefined
  for (let pass = 0; pass < MAX_PASSES; pass++) {
    if (!existing) {
      const claim = await store.insert(input)
      if (claim) return { kind: 'owner', claim, takeover: false }
    }
    else if (canTakeOver(existing, input.fingerprint)) {
      const claim = await store.takeOver(existing, input)
      if (claim) return { kind: 'owner', claim, takeover: !existing.expired }
    }
    else if (existing.fingerprint !== input.fingerprint) {
      return { kind: 'answered', outcome: { kind: 'conflict', firstRoute: existing.route } }
    }
    else if (existing.status === 'processing') {
      return { kind: 'answered', outcome: { kind: 'in_progress', reason: 'running' } }
    }
    else {
      return { kind: 'answered', outcome: answerStored(deps, existing, input.fingerprint) }
    }
    existing = await store.find(input.scope, input.key)
  }
  return { kind: 'answered', outcome: { kind: 'in_progress', reason: 'running' } }
}

async function executeClaimed(deps: IdempotencyDeps, request: IdempotentRequest, operation: TransactionalOperation | LeasedOperation, claim: Claim, leaseMs: number): Promise<IdempotentOutcome> {
  const store = storeOf(deps)
  const renewal = setInterval(() => void store.renew(claim, leaseMs).catch(() => {}), Math.max(50, Math.floor(leaseMs / 3)))
  renewal.unref()
  let notStored: NotStoredReason | undefined
  // What the record keeps of a response: sealed, or nothing (the record is deleted, the key free again).
  const persist = (response: StoredResponse): StoredResponse | undefined => {
    notStored = notStoredBecause(deps, request, response)
    return notStored ? undefined : sealed(deps, request, response)
  }
  // Without any of the options that need it, the atomic commit stays as it was: no extra work per request.
  const persistsAsIs = !deps.cipher && !request.storeIf && !(request.maxResponseBytes ?? deps.maxResponseBytes)
  const storeOrDiscard = async (response: StoredResponse) => {
    const kept = persist(response)
    return kept ? store.storeFenced(claim, kept) : store.discard(claim)
  }
  try {
    let committed: CommitOutcome
    try {
      if (operation.mode === 'atomic') {
        committed = await store.commit(claim, async tx => storedResponse(await operation.execute(tx), request), operation.beforeCommit, persistsAsIs ? undefined : persist)
      }
      else {
        // No transaction is open while the work runs: a slow outside call holds no connection.
        const response = storedResponse(await operation.execute(), request)
        committed = await storeOrDiscard(response) ? { kind: 'committed', response } : { kind: 'lease-lost' }
      }
    }
    catch (error) {
      const failure = storedFailure(deps, error, request)
      if (failure) {
        if (!await storeOrDiscard(failure)) return { kind: 'in_progress', reason: 'lease_lost' }
        if (notStored) return { kind: 'executed', response: failure, notStored }
        rememberExecuted(deps, request, failure, claim.record.expiresAt)
        return { kind: 'executed', response: failure }
      }
      // Rolled back: end the lease now so the client's retry re-executes at once.
      await store.release(claim, summarise(error)).catch(() => {})
      throw error
    }
    if (committed.kind === 'lease-lost') return { kind: 'in_progress', reason: 'lease_lost' }
    if (notStored) return { kind: 'executed', response: committed.response, notStored }
    rememberExecuted(deps, request, committed.response, claim.record.expiresAt)
    return { kind: 'executed', response: committed.response }
  }
  finally {
    clearInterval(renewal)
  }
}

// ---------------------------------------------------------------------------------------------
// shared by both modes
// ---------------------------------------------------------------------------------------------

/**
 * Runs `answer`: a result, or a thrown 4xx error, is a deterministic answer to store (undefined:
 * none); anything else (a 5xx, the database gone) is rethrown and nothing is stored.
 */
async function deterministicAnswer(deps: IdempotencyDeps, answer: () => Promise<IdempotentResult | undefined>, request: IdempotentRequest): Promise<StoredResponse | undefined> {
  try {
    const result = await answer()
    return result && storedResponse(result, request)
  }
  catch (error) {
    const failure = storedFailure(deps, error, request)
    if (!failure) throw error
    return failure
  }
}

/** A thrown 4xx error as the response to store and replay; undefined for anything else. */
function storedFailure(deps: IdempotencyDeps, error: unknown, request: IdempotentRequest): StoredResponse | undefined {
  const failure = (deps.failureOf ?? httpClientError)(error)
  if (!failure || failure.status < 400 || failure.status >= 500) return undefined
  return { status: failure.status, body: annotated(failure.body, request), headers: failure.headers, error: failure.name }
}

/**
 * An HTTP error thrown by the handler itself (h3's `createError`): its problem body when it carries
 * one (`data.problem`), else its `data` when that is an object, else `{ statusCode, statusMessage }`.
 */
export function httpClientError(error: unknown): StoredFailure | undefined {
  const thrown = error as { statusCode?: unknown, statusMessage?: unknown, data?: unknown } | null
  if (typeof thrown !== 'object' || thrown === null || typeof thrown.statusCode !== 'number') return undefined
  // Only the handler's own answer: an outside API's 4xx (ofetch's FetchError has a statusCode too)
  // says nothing final about this request, so nothing is stored and a retry runs again.
  if ((thrown.constructor as { __h3_error__?: unknown } | undefined)?.__h3_error__ !== true) return undefined
  // A problem (RFC 9457) carried as `data.problem`, as the layer's own and many apps' errors do.
  const problem = (thrown.data as { problem?: { type?: unknown, status?: unknown } } | undefined)?.problem
  if (typeof problem?.status === 'number' && typeof problem.type === 'string') {
    return { status: problem.status, body: problem as Record<string, unknown>, headers: { 'Content-Type': 'application/problem+json' }, name: problem.type.replace('/problems/', '') }
  }
  const status = thrown.statusCode
  const statusMessage = typeof thrown.statusMessage === 'string' ? thrown.statusMessage : undefined
  const body = typeof thrown.data === 'object' && thrown.data !== null && !Array.isArray(thrown.data)
    ? thrown.data as Record<string, unknown>
    : { statusCode: status, ...(statusMessage && { statusMessage }) }
  return { status, body, name: statusMessage ?? `http_${status}` }
}

/** What the record stores of an operation's result (annotated when the request asks for it). */
export function storedResponse(result: IdempotentResult, request: IdempotentRequest): StoredResponse {
  return {
    status: result.status,
    body: annotated(result.body, request),
    headers: result.headers,
    resourceType: result.resourceType,
    resourceId: result.resourceId,
  }
}

const annotated = (body: Record<string, unknown>, request: IdempotentRequest) =>
  request.annotateBody ? { ...body, idempotency: { key: request.key, replayed: false } } : body

/**
 * `expiresAt`: the record's expiry as stored — a leased claim returns its row, an atomic insert
 * wrote the value it was given — so the shared tier, which every instance trusts, carries it.
 */
function rememberExecuted(deps: IdempotencyDeps, request: IdempotentRequest, response: StoredResponse, expiresAt: Date): void {
  deps.replays.put({
    scope: request.scope,
    key: request.key,
    route: request.route,
    fingerprint: request.fingerprint,
    response: { status: response.status, body: response.body, headers: response.headers ?? {} },
    cacheUntil: expiresAt.getTime() - CACHE_EXPIRY_MARGIN_MS,
    expiresAt: expiresAt.getTime(),
  })
}

/**
 * A finished record read from the database, answered (and remembered by the caches, readable). A
 * response no configured key opens throws UnreadableStoredResponse, unless the request is another
 * one (a conflict needs only the fingerprint).
 */
function answerStored(deps: IdempotencyDeps, record: RecordView, fingerprint: string): IdempotentOutcome {
  let finished = finishedFromView(record)
  try {
    finished = { ...finished, response: openResponse(deps.cipher, finished.response, finished.scope, finished.key) }
  }
  catch (error) {
    if (finished.fingerprint !== fingerprint) return { kind: 'conflict', firstRoute: finished.route }
    throw error
  }
  deps.replays.put(finished)
  return answerFinished(finished, fingerprint)
}

/** Why `response` is not to be stored (the request's storeIf, the size limit); undefined: it is. */
function notStoredBecause(deps: IdempotencyDeps, request: IdempotentRequest, response: StoredResponse): NotStoredReason | undefined {
  if (request.storeIf && !request.storeIf({ status: response.status, body: response.body })) return 'store_if'
  const limit = request.maxResponseBytes ?? deps.maxResponseBytes ?? 0
  // Measured only when there is a limit: no extra serialisation otherwise.
  if (limit > 0 && storedBytes(response) > limit) return 'response_too_large'
  return undefined
}

/** The size of a response's stored form: its body and headers as JSON, in bytes. */
export const storedBytes = (response: Pick<StoredResponse, 'body' | 'headers'>): number =>
  Buffer.byteLength(JSON.stringify({ body: response.body, headers: response.headers ?? {} }) ?? '')

const sealed = (deps: IdempotencyDeps, request: IdempotentRequest, response: StoredResponse): StoredResponse =>
  sealResponse(deps.cipher, response, request.scope, request.key)

const stores = new WeakMap<Database, IdempotencyStore>()
function storeOf(deps: IdempotencyDeps): IdempotencyStore {
  const { db } = deps.database
  let store = stores.get(db)
  if (!store) stores.set(db, store = createIdempotencyStore(db))
  return store
}

/** The record's error summary: a database failure by its SQLSTATE, never the request's values. */
const summarise = (error: unknown) => describeDatabaseError(error) ?? (error instanceof Error ? `${error.name}: ${error.message}` : String(error))
