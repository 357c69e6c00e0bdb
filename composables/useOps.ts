import { inject, type InjectionKey, provide, readonly, type Ref, ref } from 'vue'
import type { EvidenceIds, EvidenceSubject, OpsList } from '#shared/ops-api'
import type { Problem } from './useIdempotentRequest'

/**
 * The operations console's access to /api/ops/** and /api/metrics: the operator's token, kept in
 * sessionStorage (this tab only, gone when it closes) and sent as a bearer header. A 401 from any
 * call forgets the token and says why, so the page shows the token form again. Calls go through
 * `ops.api`, Nuxt's `$fetch`, each call typed with its answer from shared/ops-api.ts (which every
 * ops route's value must satisfy); `useOps` is created once by pages/ops.vue and shared with its panels.
 */

const TOKEN_KEY = 'ops:token'

/** A non-2xx answer: its status and the problem document (RFC 9457) when the server sent one. */
export class OpsRequestError extends Error {
  constructor(readonly status: number, readonly problem: Problem | undefined, message: string) {
    super(message)
    this.name = 'OpsRequestError'
  }
}

/** What an evidence search looks for: one subject, a key optionally within a scope. */
export interface EvidenceSearch { by: EvidenceSubject, value: string, scope?: string }

/** What an id chip shows: the ids of an evidence entry, and a job's resource that is not an order. */
export type IdSet = EvidenceIds & { resource?: string }

export function useOps() {
  const token = ref<string>()
  /** Why the token form is shown again (a 401), or undefined. */
  const authError = ref<string>()
  /** The evidence search the console should run next (set by any panel's id chip). */
  const evidenceRequest = ref<EvidenceSearch & { seq: number }>()
  let evidenceSeq = 0
  /** The order the console should open next (set by an order chip). */
  const orderRequest = ref<{ orderId: string, seq: number }>()
  let orderSeq = 0

  /** Reads the token this tab kept; call on the client (onMounted). */
  function restore(): void {
    token.value = sessionStorage.getItem(TOKEN_KEY) ?? undefined
  }

  function forget(reason?: string): void {
    sessionStorage.removeItem(TOKEN_KEY)
    token.value = undefined
    authError.value = reason
  }

  /** The server answered 401 to the current token: forget it, and say why on the token form. */
  function tokenRefused(message: string): void {
    forget(`The server refused the operator token (401 Unauthorized): ${message} Enter the token again.`)
  }

  /** A failed answer as the console reports it; a 401 to the current token forgets it. */
  function failure(response: Response & { _data?: unknown }, sentToken: string | undefined, method: string, path: string): OpsRequestError {
    const isProblem = /[/+]json\b/.test(response.headers.get('content-type') ?? '') && typeof response._data === 'object' && response._data !== null
    const problem = isProblem ? response._data as Problem : undefined
    const message = problem?.detail ?? problem?.title ?? `${method} ${path} answered ${response.status}.`
    if (response.status === 401 && sentToken === token.value) tokenRefused(message)
    return new OpsRequestError(response.status, problem, message)
  }

  /**
   * `$fetch` with the current token (or the one being checked, sent as `authorization`): answers
   * typed by the routes, failures thrown as OpsRequestError. No automatic retries: an operator's
   * action is sent once.
   */
  const api = $fetch.create({
    retry: 0,
    credentials: 'omit',
    onRequest({ options }) {
      if (!options.headers.has('authorization') && token.value) options.headers.set('authorization', `Bearer ${token.value}`)
      if (!options.headers.has('accept')) options.headers.set('accept', 'application/json')
    },
    onRequestError({ error }) {
      throw new OpsRequestError(0, undefined, error.message)
    },
    onResponseError({ request, response, options }) {
      const sent = options.headers.get('authorization')?.replace(/^Bearer /, '')
      throw failure(response, sent, (options.method ?? 'GET').toUpperCase(), typeof request === 'string' ? request : new URL(response.url).pathname)
    },
  })

  /**
   * Checks a token with a cheap authenticated call before keeping it. Resolves to undefined when
   * accepted, or to the message to show.
   */
  async function signIn(candidate: string): Promise<string | undefined> {
    const trimmed = candidate.trim()
    if (!trimmed) return 'Enter the operator token (OPS_TOKEN).'
    try {
      await api('/api/ops/jobs', { query: { limit: 1 }, headers: { authorization: `Bearer ${trimmed}` } })
    }
    catch (error) {
      if (error instanceof OpsRequestError && error.status === 401) return `That token was refused (401 Unauthorized). Check the server's OPS_TOKEN and try again.`
      return `The token could not be checked: ${(error as Error).message}`
    }
    sessionStorage.setItem(TOKEN_KEY, trimmed)
    token.value = trimmed
    authError.value = undefined
    return undefined
  }

  function searchEvidence(query: EvidenceSearch): void {
    evidenceRequest.value = { ...query, seq: ++evidenceSeq }
  }

  function openOrder(orderId: string): void {
    orderRequest.value = { orderId, seq: ++orderSeq }
  }

  return {
    token: readonly(token),
    authError: readonly(authError),
    evidenceRequest: readonly(evidenceRequest),
    orderRequest: readonly(orderRequest),
    restore,
    forget,
    tokenRefused,
    api,
    signIn,
    searchEvidence,
    openOrder,
  }
}

export type OpsContext = ReturnType<typeof useOps>

const opsKey: InjectionKey<OpsContext> = Symbol('ops')

export function provideOps(ops: OpsContext): void {
  provide(opsKey, ops)
}

export function useOpsContext(): OpsContext {
  const ops = inject(opsKey)
  if (!ops) throw new Error('useOpsContext() outside pages/ops.vue')
  return ops
}

/** What a failed call means for the operator; a 401 is handled by the token form instead. */
export function describeError(error: unknown): string {
  if (error instanceof OpsRequestError && error.status) return error.status === 404 && !error.problem ? `Not found (404).` : `${error.message} (HTTP ${error.status})`
  return `The server could not be reached: ${(error as Error).message}`
}

/**
 * The one way the console shows an instant: ISO 8601 in UTC with milliseconds,
 * `2026-12-01 09:14:03.120Z` — no locale reads it day-first or month-first, and close events stay
 * in order.
 */
export function formatTime(iso: string | null | undefined): string {
  if (!iso) return '—'
  const date = new Date(iso)
  if (Number.isNaN(date.getTime())) return iso
  return date.toISOString().replace('T', ' ')
}

/**
 * Sums a Prometheus counter over every label but `by`: `{miss: 12, replay: 3}`. Lines look like
 * `name{a="1",outcome="miss"} 12` (a timestamp may follow); comments and other metrics are skipped.
 * Undefined when the metric does not appear at all.
 */
export function sumCounterBy(text: string, metric: string, by: string): Record<string, number> | undefined {
  let seen = false
  const totals: Record<string, number> = {}
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line.trim())
    if (!match || match[1] !== metric) continue
    seen = true
    const value = Number(match[3])
    if (!Number.isFinite(value)) continue
    let label = ''
    for (const pair of (match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
      if (pair[1] === by) label = pair[2]!.replace(/\\(.)/g, '$1')
    }
    totals[label] = (totals[label] ?? 0) + value
  }
  return seen ? totals : undefined
}

/**
 * One listing of the console (jobs, records, mailbox): its rows, whether it is loading or loaded,
 * and what went wrong. A 401 is not an error here: the token gate takes over.
 */
export function useOpsList<T>(fetchList: () => Promise<OpsList<T>>) {
  const items = ref([]) as Ref<T[]>
  const loading = ref(false)
  const loaded = ref(false)
  const error = ref<string>()
  async function load() {
    loading.value = true
    error.value = undefined
    try {
      items.value = (await fetchList()).data
      loaded.value = true
    }
    catch (caught) {
      if (!(caught instanceof OpsRequestError && caught.status === 401)) error.value = describeError(caught)
    }
    finally {
      loading.value = false
    }
  }
  return { items, loading, loaded, error, load }
}
