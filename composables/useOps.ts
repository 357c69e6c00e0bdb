import { inject, type InjectionKey, provide, readonly, type Ref, ref } from 'vue'
import type { JobErrorEntry } from '../server/db/schema'
import type { EvidenceEntry } from '../server/ops/evidence'
import type { Problem } from './useIdempotentRequest'

/**
 * The operations console's access to /api/ops/** and /api/metrics: the operator's token, kept in
 * sessionStorage (this tab only, gone when it closes) and sent as a bearer header. A 401 from any
 * call forgets the token and says why, so the page shows the token form again. Plain fetch, no
 * client library; `useOps` is created once by pages/ops.vue and shared with its panels.
 */

const TOKEN_KEY = 'ops:token'

/** A non-2xx answer: its status and the problem document (RFC 9457) when the server sent one. */
export class OpsRequestError extends Error {
  constructor(readonly status: number, readonly problem: Problem | undefined, message: string) {
    super(message)
    this.name = 'OpsRequestError'
  }
}

export interface OpsList<T> { object: 'list', data: T[] }


export interface OpsJob {
  id: string
  kind: string
  status: string
  attempt: number
  maxAttempts: number
  resourceId: string | null
  idempotencyKey: string | null
  requestId: string | null
  lockedBy: string | null
  lastError: string | null
  errors: JobErrorEntry[]
  runAt: string
  createdAt: string
  updatedAt?: string
  completedAt?: string | null
}

export interface IdempotencyRecord {
  scope: string
  key: string
  route: string
  status: string
  attempts: number
  responseStatus: number | null
  resourceType: string | null
  resourceId: string | null
  error: string | null
  createdAt: string
  updatedAt: string
  expiresAt: string | null
  leaseExpiresAt: string | null
}

// One shape for the timeline, the server's: the console renders what the evidence route returns.
export type { EvidenceEntry, EvidenceIds, EvidenceKind } from '../server/ops/evidence'
// Likewise the duplicates audit: violations decide `healthy`, suspects are for a human to look at.
export type { DuplicatesAudit } from '../server/ops/audit'

export interface EvidenceResult { query: Record<string, string>, timeline: EvidenceEntry[], truncated: boolean }

/** What an evidence search looks for: one of these, a key optionally within a scope. */
export type EvidenceField = 'key' | 'orderId' | 'eventId' | 'requestId' | 'keyId'
export interface EvidenceQuery { by: EvidenceField, value: string, scope?: string }

export interface MailboxMessage { id: string, tenantId: string, orderId: string | null, to: string, subject: string, body: string, createdAt: string }

export function useOps() {
  const token = ref<string>()
  /** Why the token form is shown again (a 401), or undefined. */
  const authError = ref<string>()
  /** The evidence search the console should run next (set by any panel's id chip). */
  const evidenceRequest = ref<EvidenceQuery & { seq: number }>()
  let evidenceSeq = 0

  /** Reads the token this tab kept; call on the client (onMounted). */
  function restore(): void {
    token.value = sessionStorage.getItem(TOKEN_KEY) ?? undefined
  }

  function forget(reason?: string): void {
    sessionStorage.removeItem(TOKEN_KEY)
    token.value = undefined
    authError.value = reason
  }

  /** A request with the current token; a 401 forgets it. Resolves to the parsed JSON (or text). */
  async function opsFetch<T>(path: string, init: RequestInit & { as?: 'json' | 'text' } = {}, withToken = token.value): Promise<T> {
    const headers = new Headers(init.headers)
    if (withToken) headers.set('authorization', `Bearer ${withToken}`)
    headers.set('accept', init.as === 'text' ? 'text/plain' : 'application/json')
    const response = await fetch(path, { ...init, headers, credentials: 'omit' })
    const isJson = /[/+]json\b/.test(response.headers.get('content-type') ?? '')
    const body: unknown = isJson ? await response.json().catch(() => undefined) : await response.text()
    if (!response.ok) {
      const problem = isJson ? body as Problem : undefined
      const message = problem?.detail ?? problem?.title ?? `${init.method ?? 'GET'} ${path} answered ${response.status}.`
      if (response.status === 401 && withToken === token.value) {
        forget(`The server refused the operator token (401 Unauthorized): ${message} Enter the token again.`)
      }
      throw new OpsRequestError(response.status, problem, message)
    }
    return body as T
  }

  /**
   * Checks a token with a cheap authenticated call before keeping it. Resolves to undefined when
   * accepted, or to the message to show.
   */
  async function signIn(candidate: string): Promise<string | undefined> {
    const trimmed = candidate.trim()
    if (!trimmed) return 'Enter the operator token (OPS_TOKEN).'
    try {
      await opsFetch('/api/ops/jobs?limit=1', {}, trimmed)
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

  function searchEvidence(query: EvidenceQuery): void {
    evidenceRequest.value = { ...query, seq: ++evidenceSeq }
  }

  return { token: readonly(token), authError: readonly(authError), evidenceRequest: readonly(evidenceRequest), restore, forget, opsFetch, signIn, searchEvidence }
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
  if (error instanceof OpsRequestError) return error.status === 404 && !error.problem ? `Not found (404).` : `${error.message} (HTTP ${error.status})`
  return `The server could not be reached: ${(error as Error).message}`
}

const timeFormat = () => new Intl.DateTimeFormat(undefined, {
  year: 'numeric', month: '2-digit', day: '2-digit',
  hour: '2-digit', minute: '2-digit', second: '2-digit', fractionalSecondDigits: 3, hourCycle: 'h23',
})
let cachedFormat: Intl.DateTimeFormat | undefined

/** Local date and time with milliseconds: the order of close events must be readable. */
export function formatLocalTime(iso: string | null | undefined): string {
  if (!iso) return '—'
  const date = new Date(iso)
  if (Number.isNaN(date.getTime())) return iso
  cachedFormat ??= timeFormat()
  return cachedFormat.format(date)
}

/** The order id in `order:ord_…`, or undefined. */
export function orderIdOfResource(resourceId: string | null | undefined): string | undefined {
  return resourceId?.startsWith('order:') ? resourceId.slice('order:'.length) : undefined
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
export function useOpsList<T>(url: () => string) {
  const ops = useOpsContext()
  const items = ref([]) as Ref<T[]>
  const loading = ref(false)
  const loaded = ref(false)
  const error = ref<string>()
  async function load() {
    loading.value = true
    error.value = undefined
    try {
      items.value = (await ops.opsFetch<OpsList<T>>(url())).data
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
