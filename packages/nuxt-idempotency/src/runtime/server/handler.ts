import {
  defineEventHandler, type EventHandler, type EventHandlerRequest, getHeader, getQuery, getRequestHeader, getResponseHeader, getResponseStatus,
  type H3Event, readRawBody, setResponseHeader, setResponseHeaders, setResponseStatus,
} from 'h3'
import { type AtomicPlan, type IdempotentOutcome, type IdempotentResult, runIdempotent as runCore } from '../core/run'
import { type Database, transaction } from '@idempotent-checkout/db-kit'
import { UnreadableStoredResponse } from '../core/encryption'
import { fingerprint, pickFields } from '../core/fingerprint'
import { parseIdempotencyKeyHeader } from '../core/key'
import { idempotencyProblem, sendFailure } from '../core/problems'
import { idempotencyReady, useIdempotencyOptions } from './services'
import { getRouteRules, useNitroApp } from '#imports'

/**
 * The h3 side of the layer: reads the request (key, `Prefer: wait`), runs the transport-free core
 * (../core/run.ts) and turns its outcome into the response. Every idempotent route of an app goes
 * through `runIdempotentRoute` here, directly or through defineIdempotentEventHandler.
 */

/** What the layer made of a request, for logs and metrics (the `idempotency:outcome` hook, `event.context.idempotencyOutcome`). */
export type IdempotencyOutcome = 'miss' | 'replay' | 'conflict' | 'in_progress' | 'missing_key' | 'invalid' | 'signature_invalid' | 'error'
  /** Executed and answered, but its stored form was larger than `maxResponseBytes`: not stored, the key is free again. */
  | 'response_too_large'

export interface IdempotencyOutcomeReport {
  event: H3Event
  /** `POST /api/orders`; `<METHOD> unmatched` when the request was refused before a route matched. */
  route: string
  scope?: string
  key?: string
  outcome: IdempotencyOutcome
  /** The processing lock could not be used (Redis away): the unique index decided alone. */
  degraded?: boolean
  /** An abandoned claim of the same request was taken over. */
  takeover?: boolean
  /** A leased owner ran past its lease and another took over: nothing was stored. */
  leaseLost?: boolean
  /** false: executed and answered, but not stored (`storeIf` declined it, or it was too large). */
  stored?: boolean
}

interface RouteOperation {
  /** Whose keys these are: a route, `tenant:<id>`, `provider:<name>`. */
  scope: string
  /** `POST /api/orders`: part of the fingerprint, so a key reused on another route is a conflict. */
  route: string
  key: string
  /** The validated payload; it alone (with method, route and scope) makes the fingerprint. */
  payload: unknown
  ttlSeconds?: number
  /** How long a duplicate waits for the in-flight original's result when the client sent no `Prefer: wait`. */
  defaultWaitMs?: number
  /** Adds `idempotency: { key, replayed }` to the body of every answer. */
  annotateBody?: boolean
  /** Runs in the transaction just before COMMIT (atomic modes); throwing rolls everything back. */
  beforeCommit?: () => Promise<void>
  /** This route's lease (leased) or processing lock (atomic), in ms; default the module's `leaseMs` / `lockTtlMs`. */
  leaseMs?: number
  /** false: the answer is sent but not stored, and the key is free again. */
  storeIf?: (response: { status: number, body: unknown }) => boolean
  /** A response whose stored form (JSON) is larger is answered but not stored; default the module's `maxResponseBytes`. */
  maxResponseBytes?: number
}

/** Every effect as statements sent with the record, one commit (atomic, the fastest). */
export interface AtomicPlanRoute extends RouteOperation {
  mode: 'atomic'
  plan: (db: Database, now: Date) => AtomicPlan
}

/** The work reads, then writes, in the record's own transaction (`tx`). */
export interface AtomicWorkRoute extends RouteOperation {
  mode: 'atomic'
  execute: (tx: Database) => Promise<IdempotentResult>
}

/** The work calls out (an API, a file, a mail) with no transaction open; its result is stored after, fenced. */
export interface LeasedRoute extends RouteOperation {
  mode: 'leased'
  execute: () => Promise<IdempotentResult>
}

export type IdempotentRoute = AtomicPlanRoute | AtomicWorkRoute | LeasedRoute

/** What the route answers, and what the layer made of the request. */
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

/** The validated Idempotency-Key header, or a 400 problem. */
export function requireIdempotencyKey(event: H3Event): string {
  const checked = parseIdempotencyKeyHeader(getHeader(event, 'idempotency-key'))
  if (checked.ok) return checked.key
  reportOutcome({ event, route: `${event.method} ${event.context.matchedRoute?.path ?? 'unmatched'}`, outcome: checked.reason === 'missing' ? 'missing_key' : 'invalid' })
  throw checked.reason === 'missing'
    ? idempotencyProblem('idempotency-key-missing', 'Send an Idempotency-Key header (for example a UUID v4) and reuse it when you retry this request.')
    : idempotencyProblem('idempotency-key-invalid', 'The Idempotency-Key must be 1–255 visible ASCII characters (0x21–0x7E), sent once, either bare or as one RFC 8941 string ("…", with \\" and \\\\ escaped); generate a UUID v4 and use that.')
}

/**
 * Runs the operation once per key and answers the request: the first execution's response, or its
 * replay. A key reused with another request (422), a duplicate of a request still in flight (409)
 * and failures are thrown as problems.
 */
export async function runIdempotentRoute(event: H3Event, operation: IdempotentRoute): Promise<IdempotentReply> {
  const options = useIdempotencyOptions()
  const scope = `${options.keyPrefix}${operation.scope}`
  const request = {
    scope,
    route: operation.route,
    key: operation.key,
    fingerprint: fingerprint({ method: event.method, route: operation.route, scope, payload: operation.payload }),
    requestId: (event.context.requestId as string | undefined) ?? getRequestHeader(event, 'x-request-id') ?? crypto.randomUUID(),
    ttlSeconds: operation.ttlSeconds ?? options.ttl,
    waitMs: preferredWaitMs(event) ?? operation.defaultWaitMs ?? options.waitMs,
    annotateBody: operation.annotateBody,
    leaseMs: operation.leaseMs,
    storeIf: operation.storeIf,
    maxResponseBytes: operation.maxResponseBytes,
  }
  // For the request's log line: enough of the fingerprint to tell two bodies apart, not the payload.
  event.context.idempotency = { scope, key: request.key, route: request.route, fingerprintPrefix: request.fingerprint.slice(0, FINGERPRINT_PREFIX_LENGTH) }
  const report = (outcome: IdempotencyOutcome, notes: Partial<IdempotencyOutcomeReport> = {}) =>
    reportOutcome({ event, route: request.route, scope, key: request.key, outcome, ...notes })

  let outcome: IdempotentOutcome
  try {
    const deps = await idempotencyReady()
    outcome = await runCore(deps, request, 'plan' in operation
      ? { mode: 'atomic', plan: operation.plan, beforeCommit: operation.beforeCommit }
      : operation.mode === 'atomic'
        ? { mode: 'atomic', execute: operation.execute, beforeCommit: operation.beforeCommit }
        : { mode: 'leased', execute: operation.execute })
  }
  catch (error) {
    // The database gone, a bug: nothing was stored.
    report('error')
    if (error instanceof UnreadableStoredResponse) {
      throw idempotencyProblem('stored-response-unreadable', `The response stored for Idempotency-Key "${request.key}" is encrypted under key ${error.kid}, which this server no longer has; nothing ran again. Add that key back to NUXT_IDEMPOTENCY_ENCRYPTION_KEYS (after the current one) and retry with the same key.`)
    }
    throw error
  }
  const notes = { degraded: outcome.degraded, takeover: outcome.takeover }

  switch (outcome.kind) {
    case 'executed':
      if (outcome.notStored === 'response_too_large') {
        const limit = request.maxResponseBytes ?? options.maxResponseBytes
        console.warn(`[nuxt-idempotency] ${request.route}: the response is larger than maxResponseBytes (${limit} bytes): answered but not stored, so a retry with Idempotency-Key "${request.key}" runs again. Raise the route's maxResponseBytes or answer with less.`)
      }
      report(outcome.notStored === 'response_too_large' ? 'response_too_large' : 'miss', { ...notes, ...(outcome.notStored && { stored: false }) })
      return { outcome: 'miss', body: respond(event, outcome.response, false) }
    case 'replayed':
      report('replay', notes)
      return { outcome: 'replay', body: respond(event, outcome.response, true) }
    case 'conflict':
      report('conflict', notes)
      throw idempotencyProblem('idempotency-key-reused', `Idempotency-Key "${request.key}" was first used for a different request (${outcome.firstRoute ? `${outcome.firstRoute}, ` : ''}other body). Send a new key for a new operation; retries must repeat the original request exactly.`)
    case 'in_progress':
      report('in_progress', { ...notes, leaseLost: outcome.reason === 'lease_lost' })
      throw idempotencyProblem('request-in-progress', `A request with Idempotency-Key "${request.key}" is still being processed. Retry with the same key after ${IN_PROGRESS_RETRY_AFTER_SECONDS} s, or send "Prefer: wait=10" to wait for its result.`, { 'Retry-After': String(IN_PROGRESS_RETRY_AFTER_SECONDS) })
  }
}

export interface IdempotentHandlerContext {
  /** The request's key: pass it on to whatever the handler calls (a provider's API, a queue), so a retry after a crash is recognised there too. */
  idempotencyKey: string
  scope: string
}

/** The context of a `mode: 'atomic'` handler. */
export interface AtomicIdempotentHandlerContext extends IdempotentHandlerContext {
  /** The record's own transaction: the handler's writes commit with its stored response, or not at all. */
  tx: Database
}

/** What a retry must repeat to be the same request: body fields by dot path, or a function's value. */
export type IdempotencyFingerprint = readonly string[] | ((body: unknown, event: H3Event) => unknown)

/** The options of defineIdempotentEventHandler besides `mode` and `handler`. */
export interface IdempotentHandlerSettings {
  /** Whose keys these are (a tenant, a user); default: the route. Keys of two scopes never meet. */
  scope?: (event: H3Event) => string | Promise<string>
  /** Seconds the key is remembered; default: the module's `ttl` (routeRules `idempotency.ttl` wins). */
  ttl?: number
  /**
   * This route's in-progress lease (leased) or processing lock (atomic), in ms, renewed while the
   * handler runs; after a crash a retry takes over once it ran out. Default: the module's `leaseMs` /
   * `lockTtlMs` (routeRules `idempotency.lease` wins).
   */
  lease?: number
  /** How long a duplicate of a request in flight waits for its result (ms) before a 409. */
  waitMs?: number
  /** false: a request without a key runs unprotected (routeRules `idempotency.required` wins). */
  required?: boolean
  /**
   * false: the answer is sent but not stored, and the key is free again (a retry runs the handler
   * again). Asked of returned answers and thrown 4xx; a 5xx is never stored. In atomic mode the
   * handler's writes still commit; only the record is not kept.
   */
  storeIf?: (response: { status: number, body: unknown }) => boolean
  /**
   * What a retry must repeat: body fields by dot path (`['amount', 'customer.id']`, the rest
   * ignored), or a function whose value is fingerprinted. Default: the whole parsed body and the
   * query. The method, route and scope always count.
   */
  fingerprint?: IdempotencyFingerprint
  /** A response whose stored form (JSON) is larger is answered but not stored; default the module's `maxResponseBytes` (0: no limit). */
  maxResponseBytes?: number
  /** A larger request body is refused with a 413 and nothing runs; default the module's `maxBodyBytes` (1 MiB). */
  maxBodyBytes?: number
}

/** leased (the default): the handler runs with no transaction open (it calls out), and has no `tx`. */
export interface LeasedIdempotentHandlerOptions<Result> extends IdempotentHandlerSettings {
  mode?: 'leased'
  handler: (event: H3Event, context: IdempotentHandlerContext) => Result | Promise<Result>
}

/** atomic: the handler runs in the record's transaction (`context.tx`), for handlers that only write to this database. */
export interface AtomicIdempotentHandlerOptions<Result> extends IdempotentHandlerSettings {
  mode: 'atomic'
  handler: (event: H3Event, context: AtomicIdempotentHandlerContext) => Result | Promise<Result>
}

export type IdempotentHandlerOptions<Result> = LeasedIdempotentHandlerOptions<Result> | AtomicIdempotentHandlerOptions<Result>

/** Per-route options in routeRules: `routeRules: { '/api/x': { idempotency: { ttl, required, lease } } }`. */
export interface IdempotencyRouteRules {
  ttl?: number
  required?: boolean
  /** ms, as the handler's `lease` option. */
  lease?: number
}

/**
 * An event handler whose work runs once per Idempotency-Key (leased mode: no transaction is open
 * while it runs). Its return value, the status it set and its Location header are stored and
 * replayed with `Idempotent-Replayed: true`; a thrown 4xx is stored too, a 5xx never. Its type is
 * the handler's result, so `$fetch` of the route is typed with it.
 */
// Two signatures, not one union: options without `mode` would otherwise leave the handler's
// parameters untyped (TypeScript cannot tell the modes apart by a property that is absent).
export function defineIdempotentEventHandler<Result>(
  definition: AtomicIdempotentHandlerOptions<Result>,
): EventHandler<EventHandlerRequest, Promise<Result>>
export function defineIdempotentEventHandler<Result>(
  // eslint-disable-next-line @typescript-eslint/unified-signatures
  definition: LeasedIdempotentHandlerOptions<Result> | LeasedIdempotentHandlerOptions<Result>['handler'],
): EventHandler<EventHandlerRequest, Promise<Result>>
export function defineIdempotentEventHandler<Result>(
  definition: IdempotentHandlerOptions<Result> | LeasedIdempotentHandlerOptions<Result>['handler'],
): EventHandler<EventHandlerRequest, Promise<Result>> {
  const options: IdempotentHandlerOptions<Result> = typeof definition === 'function' ? { handler: definition } : definition
  return defineEventHandler(async (event) => {
    try {
      return await handleIdempotently(event, options)
    }
    catch (error) {
      // A problem or an unreachable database is the answer; its body is not the handler's Result (errors are not in the route's type).
      return sendFailure(event, error) as Promise<unknown> as Promise<Result>
    }
  })
}

async function handleIdempotently<Result>(event: H3Event, options: IdempotentHandlerOptions<Result>): Promise<Result> {
  const rules = (getRouteRules(event) as { idempotency?: IdempotencyRouteRules }).idempotency ?? {}
  const moduleOptions = useIdempotencyOptions()
  const required = rules.required ?? options.required ?? moduleOptions.required
  const route = `${event.method} ${event.context.matchedRoute?.path ?? event.path.split('?')[0]}`
  // Before anything else: a body over the limit runs nothing and stores nothing.
  const raw = await readBodyWithin(event, options.maxBodyBytes ?? moduleOptions.maxBodyBytes, route)
  const run = (context: IdempotentHandlerContext, tx?: Database) => options.mode === 'atomic'
    ? options.handler(event, { ...context, tx: tx! })
    : options.handler(event, context)
  if (!required && !getHeader(event, 'idempotency-key')) {
    const context = { idempotencyKey: '', scope: '' }
    // Unprotected, but an atomic handler still gets the transaction it is typed with.
    return options.mode === 'atomic' ? transaction((await idempotencyReady()).database.db, tx => Promise.resolve(run(context, tx))) : run(context)
  }
  const key = requireIdempotencyKey(event)
  const scope = options.scope ? `scope:${await options.scope(event)}` : `route:${route}`
  const respondWith = async (tx?: Database): Promise<IdempotentResult> => {
    const body = await run({ idempotencyKey: key, scope }, tx)
    const location = getResponseHeader(event, 'location')
    return {
      status: getResponseStatus(event),
      body: (body ?? null) as Record<string, unknown>,
      headers: location ? { Location: String(location) } : undefined,
    }
  }
  const request = {
    scope,
    route,
    key,
    payload: await fingerprinted(event, raw, options.fingerprint),
    ttlSeconds: rules.ttl ?? options.ttl,
    defaultWaitMs: options.waitMs,
    leaseMs: rules.lease ?? options.lease,
    storeIf: options.storeIf,
    maxResponseBytes: options.maxResponseBytes,
  }
  const reply = await runIdempotentRoute(event, options.mode === 'atomic'
    ? { ...request, mode: 'atomic', execute: tx => respondWith(tx) }
    : { ...request, mode: 'leased', execute: () => respondWith() })
  return reply.body as Result
}

/** What the fingerprint covers of the request: the listed fields, the function's value, or the whole body and query. */
async function fingerprinted(event: H3Event, raw: Buffer | undefined, fields: IdempotencyFingerprint | undefined): Promise<unknown> {
  const body = parsedBody(raw)
  if (typeof fields === 'function') return { custom: await fields(body, event) }
  if (fields) return { fields: pickFields(body, fields) }
  return { query: getQuery(event), body }
}

/** The body as the fingerprint sees it: parsed JSON (key order and whitespace do not matter), else its text. */
function parsedBody(raw: Buffer | undefined): unknown {
  if (raw === undefined) return null
  const text = raw.toString('utf8')
  try {
    return JSON.parse(text)
  }
  catch {
    return text
  }
}

const PAYLOAD_METHODS = new Set(['PATCH', 'POST', 'PUT', 'DELETE'])

/**
 * The request body, refused with a 413 problem when it is larger than `limit` bytes: by its
 * Content-Length before a byte is read, else by the bytes as they arrive (a chunked body stops
 * being read at the limit). Kept where h3 finds it, so the handler's readBody() reads the same bytes.
 */
export async function readBodyWithin(event: H3Event, limit: number, route: string): Promise<Buffer | undefined> {
  const tooLarge = () => {
    reportOutcome({ event, route, outcome: 'invalid' })
    return idempotencyProblem('request-too-large', `The body is larger than this route accepts (${limit} bytes). Nothing ran and nothing was stored: send a body of at most ${limit} bytes.`)
  }
  if (!PAYLOAD_METHODS.has(event.method)) return undefined
  const headers = event.node.req.headers
  const declared = Number.parseInt(headers['content-length'] ?? '', 10)
  if (limit > 0 && declared > limit) throw tooLarge()
  const request = event.node.req as typeof event.node.req & { rawBody?: unknown, body?: unknown }
  const buffered = (event as { _requestBody?: unknown })._requestBody ?? event.web?.request?.body ?? request.rawBody ?? request.body
  if (buffered || typeof request[Symbol.asyncIterator] !== 'function') {
    // Already read (or not a Node stream): h3 reads it, then its size is checked.
    const body = await readRawBody(event, false)
    if (body && limit > 0 && body.length > limit) throw tooLarge()
    return body
  }
  if (!declared && !/\bchunked\b/i.test(String(headers['transfer-encoding'] ?? ''))) return undefined
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    const stop = () => {
      request.off('data', onData).off('end', onEnd).off('error', onError)
    }
    const onData = (chunk: Buffer) => {
      size += chunk.length
      chunks.push(chunk)
      if (limit <= 0 || size <= limit) return
      stop()
      chunks.length = 0
      // The rest is read and dropped while the 413 goes out: the connection stays usable for the next request.
      request.on('data', () => {})
      reject(tooLarge())
    }
    const onEnd = () => {
      stop()
      request.rawBody = Buffer.concat(chunks)
      resolve(request.rawBody as Buffer)
    }
    const onError = (error: unknown) => {
      stop()
      reject(error)
    }
    request.on('data', onData).on('end', onEnd).on('error', onError)
  })
}

function respond(event: H3Event, response: { status: number, body: Record<string, unknown>, headers?: Record<string, string> }, replayed: boolean): Record<string, unknown> {
  setResponseStatus(event, response.status)
  if (response.headers) setResponseHeaders(event, response.headers)
  if (replayed) setResponseHeader(event, 'Idempotent-Replayed', 'true')
  const idempotency = response.body?.idempotency as Record<string, unknown> | undefined
  return idempotency ? { ...response.body, idempotency: { ...idempotency, replayed } } : response.body
}

/** Records the outcome for the request's log line and tells the app (`idempotency:outcome`). */
export function reportOutcome(report: IdempotencyOutcomeReport): void {
  report.event.context.idempotencyOutcome = report.outcome
  // The hook's type is added to Nitro's by the module's type template.
  void (useNitroApp().hooks as unknown as { callHook: (name: string, report: IdempotencyOutcomeReport) => Promise<void> }).callHook('idempotency:outcome', report)
}

function preferredWaitMs(event: H3Event): number | undefined {
  const match = /(?:^|[,;\s])wait=(\d{1,5})(?:$|[,;\s])/i.exec(getHeader(event, 'prefer') ?? '')
  if (!match) return undefined
  const seconds = Math.min(Number(match[1]), MAX_PREFER_WAIT_SECONDS)
  setResponseHeader(event, 'Preference-Applied', `wait=${seconds}`)
  return seconds * 1000
}
