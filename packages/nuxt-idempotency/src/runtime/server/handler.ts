import {
  defineEventHandler, type EventHandler, type EventHandlerRequest, getHeader, getQuery, getRequestHeader, getResponseHeader, getResponseStatus,
  type H3Event, readRawBody, setResponseHeader, setResponseHeaders, setResponseStatus,
} from 'h3'
import { type AtomicPlan, type IdempotentOutcome, type IdempotentResult, runIdempotent as runCore } from '../core/run'
import type { Database } from '@idempotent-checkout/db-kit'
import { fingerprint } from '../core/fingerprint'
import { parseIdempotencyKeyHeader } from '../core/key'
import { idempotencyProblem, problemOf, sendProblem } from '../core/problems'
import { idempotencyReady, useIdempotencyOptions } from './services'
import { getRouteRules, useNitroApp } from '#imports'

/**
 * The h3 side of the layer: reads the request (key, `Prefer: wait`), runs the transport-free core
 * (../core/run.ts) and turns its outcome into the response. Every idempotent route of an app goes
 * through `runIdempotent` here, directly or through defineIdempotentEventHandler.
 */

/** What the layer made of a request, for logs and metrics (the `idempotency:outcome` hook, `event.context.idempotencyOutcome`). */
export type IdempotencyOutcome = 'miss' | 'replay' | 'conflict' | 'in_progress' | 'missing_key' | 'invalid' | 'signature_invalid' | 'error'

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
export async function runIdempotent(event: H3Event, operation: IdempotentRoute): Promise<IdempotentReply> {
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
    throw error
  }
  const notes = { degraded: outcome.degraded, takeover: outcome.takeover }

  switch (outcome.kind) {
    case 'executed':
      report('miss', notes)
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
  /** `mode: 'atomic'` only: the record's own transaction; the handler's writes commit with its stored response, or not at all. */
  tx?: Database
}

export interface IdempotentHandlerOptions<Result> {
  /** Whose keys these are (a tenant, a user); default: the route. Keys of two scopes never meet. */
  scope?: (event: H3Event) => string | Promise<string>
  /** Seconds the key is remembered; default: the module's `ttl` (routeRules `idempotency.ttl` wins). */
  ttl?: number
  /** How long a duplicate of a request in flight waits for its result (ms) before a 409. */
  waitMs?: number
  /** false: a request without a key runs unprotected (routeRules `idempotency.required` wins). */
  required?: boolean
  /**
   * leased (default): the handler runs with no transaction open (it calls out). atomic: it runs in
   * the record's transaction (`context.tx`), for handlers that only write to this database.
   */
  mode?: 'leased' | 'atomic'
  handler: (event: H3Event, context: IdempotentHandlerContext) => Result | Promise<Result>
}

/** Per-route options in routeRules: `routeRules: { '/api/x': { idempotency: { ttl, required } } }`. */
export interface IdempotencyRouteRules {
  ttl?: number
  required?: boolean
}

/**
 * An event handler whose work runs once per Idempotency-Key (leased mode: no transaction is open
 * while it runs). Its return value, the status it set and its Location header are stored and
 * replayed with `Idempotent-Replayed: true`; a thrown 4xx is stored too, a 5xx never.
 */
export function defineIdempotentEventHandler<Result>(
  definition: IdempotentHandlerOptions<Result> | IdempotentHandlerOptions<Result>['handler'],
): EventHandler<EventHandlerRequest, Promise<unknown>> {
  const options = typeof definition === 'function' ? { handler: definition } : definition
  return defineEventHandler(async (event) => {
    try {
      return await handleIdempotently(event, options)
    }
    catch (error) {
      const problem = problemOf(error)
      if (!problem) throw error
      return sendProblem(event, problem)
    }
  })
}

async function handleIdempotently<Result>(event: H3Event, options: IdempotentHandlerOptions<Result>): Promise<unknown> {
  const rules = (getRouteRules(event) as { idempotency?: IdempotencyRouteRules }).idempotency ?? {}
  const required = rules.required ?? options.required ?? useIdempotencyOptions().required
  const route = `${event.method} ${event.context.matchedRoute?.path ?? event.path.split('?')[0]}`
  if (!required && !getHeader(event, 'idempotency-key')) return options.handler(event, { idempotencyKey: '', scope: '' })
  const key = requireIdempotencyKey(event)
  const scope = options.scope ? `scope:${await options.scope(event)}` : `route:${route}`
  const respondWith = async (tx?: Database): Promise<IdempotentResult> => {
    const body = await options.handler(event, { idempotencyKey: key, scope, ...(tx && { tx }) })
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
    payload: { query: getQuery(event), body: await readPayload(event) },
    ttlSeconds: rules.ttl ?? options.ttl,
    defaultWaitMs: options.waitMs,
  }
  const reply = await runIdempotent(event, options.mode === 'atomic'
    ? { ...request, mode: 'atomic', execute: tx => respondWith(tx) }
    : { ...request, mode: 'leased', execute: () => respondWith() })
  return reply.body
}

/** The body as the fingerprint sees it: parsed JSON (key order and whitespace do not matter), else its text. */
async function readPayload(event: H3Event): Promise<unknown> {
  const text = await readRawBody(event, 'utf8')
  if (text === undefined) return null
  try {
    return JSON.parse(text)
  }
  catch {
    return text
  }
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
