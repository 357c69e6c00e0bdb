import { readonly, shallowRef } from 'vue'

/**
 * A POST that happens once however often it is sent: one Idempotency-Key per intent, kept in
 * storage until the intent ends, so a retry, a reload or a second tab repeats the same intent
 * instead of starting another. Network errors, timeouts, 5xx, 429 and 409 request-in-progress are
 * retried with the same key (full-jitter exponential backoff, at least Retry-After, a cap on
 * attempts); a 4xx is never retried. `createIdempotentRequest` is the framework-free core,
 * `useIdempotentRequest` its Vue wrapper.
 */

export type RequestPhase = 'idle' | 'submitting' | 'retrying' | 'succeeded' | 'failed'

export interface Problem {
  type?: string
  title?: string
  status?: number
  detail?: string
  errors?: ReadonlyArray<{ path: string, message: string }>
  [member: string]: unknown
}

export interface RequestSnapshot<T> {
  phase: RequestPhase
  /** Attempts sent so far for the current intent (retrying(n): n = attempt). */
  attempt: number
  /** The key of the current or last intent. */
  key?: string
  /** Why the last attempt is being retried (`HTTP 503`, `network error`, `timed out`). */
  retryReason?: string
  /** Set while waiting before the next attempt; cleared once attempt `attempt` is sent. */
  retryInMs?: number
  /** The success response, with whether the server replayed it (the first attempt had gone through). */
  result?: { status: number, body: T }
  replayed: boolean
  /** On failure: the problem document (RFC 9457) when the server sent one. */
  problem?: Problem
  /** On failure: what to tell the user. */
  detail?: string
  /** The key is kept after this failure: sending again continues the same intent. */
  keyKept?: boolean
}

export interface RetryPolicy {
  maxAttempts: number
  baseDelayMs: number
  maxDelayMs: number
  /** One attempt's timeout; above `Prefer: wait`, so a waiting server answers first. */
  attemptTimeoutMs: number
  /** A Retry-After longer than this is not waited for in full. */
  maxRetryAfterMs: number
}

export const defaultRetryPolicy: RetryPolicy = { maxAttempts: 6, baseDelayMs: 300, maxDelayMs: 8_000, attemptTimeoutMs: 15_000, maxRetryAfterMs: 30_000 }

/** What one attempt's answer means for the intent. */
export type Verdict
  = | { kind: 'succeeded' }
    | { kind: 'retry', reason: string, retryAfterMs?: number }
  /** A 4xx the server stored under the key: it will be replayed forever, the intent has ended. */
    | { kind: 'final' }
  /** A 4xx stored nowhere (validation, auth): fix the request and send it again with the same key. */
    | { kind: 'rejected' }

const isProblemOf = (body: unknown, slug: string) => (body as Problem | undefined)?.type === `/problems/${slug}`

/** Retry-After as milliseconds: delta-seconds or an HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`). */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  const trimmed = value?.trim()
  if (!trimmed) return undefined
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000
  if (!/^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/.test(trimmed)) return undefined
  const date = Date.parse(trimmed)
  return Number.isNaN(date) ? undefined : Math.max(0, date - now)
}

export function judgeResponse(status: number, body: unknown, headers: Headers): Verdict {
  if (status >= 200 && status < 300) return { kind: 'succeeded' }
  const retryAfterMs = parseRetryAfter(headers.get('retry-after'))
  if (status >= 500 || status === 429 || status === 408 || (status === 409 && isProblemOf(body, 'request-in-progress'))) {
    return { kind: 'retry', reason: `HTTP ${status}`, retryAfterMs }
  }
  // The idempotency layer marks every answer it stored with the key: those are final. So is 422
  // idempotency-key-reused: the key belongs to another request for good.
  const stored = (body as { idempotency?: unknown } | undefined)?.idempotency !== undefined
  return stored || isProblemOf(body, 'idempotency-key-reused') ? { kind: 'final' } : { kind: 'rejected' }
}

/** The wait before retry n (1-based): full jitter under min(cap, base·2ⁿ⁻¹), and never less than Retry-After. */
export function retryDelayMs(retry: number, retryAfterMs: number | undefined, policy: RetryPolicy, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (retry - 1))
  const jittered = Math.floor(random() * ceiling)
  return retryAfterMs === undefined ? jittered : Math.max(Math.min(retryAfterMs, policy.maxRetryAfterMs), jittered)
}

export interface PendingIntent { key: string, body: unknown, startedAt: number }

/** The part of the Web Storage API used here (localStorage, sessionStorage, or a test double). */
export interface IntentStorage {
  getItem: (key: string) => string | null
  setItem: (key: string, value: string) => void
  removeItem: (key: string) => void
}

export interface IdempotentRequestOptions {
  /** A function names a URL per intent (e.g. per order); it is read once when the intent is submitted. */
  url: string | (() => string)
  /** Names the intent in storage, e.g. one per cart: `checkout:<cartId>`. */
  intentName: () => string
  /**
   * Where the pending intent survives a reload. Default localStorage, shared by the tabs of the
   * origin (sessionStorage would keep it per tab); null keeps it in memory.
   */
  storage?: IntentStorage | null
  /** A stored intent older than this is dropped (the server forgets keys after 24 h by default). */
  intentMaxAgeMs?: number
  headers?: () => Record<string, string>
  policy?: Partial<RetryPolicy>
  /** Sent as `Prefer: wait=N`: a duplicate waits for the original's answer instead of a 409. */
  preferWaitSeconds?: number
  fetch?: typeof fetch
  sleep?: (ms: number) => Promise<void>
  random?: () => number
  newKey?: () => string
  timeoutSignal?: (ms: number) => AbortSignal
}

export interface SubmitOptions {
  /** Headers for the first attempt only (e.g. a test fault): retries must not repeat them. */
  firstAttemptHeaders?: Record<string, string>
}

export interface IdempotentRequest<T> {
  snapshot: () => RequestSnapshot<T>
  /** Sends `body` under the pending intent's key (or a new one); while in flight, returns the same promise. */
  submit: (body: unknown, options?: SubmitOptions) => Promise<RequestSnapshot<T>>
  /** The stored intent of `intentName()`, if one is pending (e.g. after a reload). */
  pendingIntent: () => PendingIntent | undefined
  /** Sends the pending intent again, unchanged. */
  resume: () => Promise<RequestSnapshot<T>> | undefined
  /** Drops the pending intent and returns to idle (a new intent will get a new key). */
  forget: () => void
}

/**
 * A UUID v4. crypto.randomUUID exists only in secure contexts (https, localhost); a page served over
 * plain http elsewhere still has crypto.getRandomValues.
 */
export function newIdempotencyKey(): string {
  if (typeof crypto.randomUUID === 'function') return crypto.randomUUID()
  const bytes = crypto.getRandomValues(new Uint8Array(16))
  bytes[6] = (bytes[6]! & 0x0F) | 0x40
  bytes[8] = (bytes[8]! & 0x3F) | 0x80
  const hex = Array.from(bytes, byte => byte.toString(16).padStart(2, '0')).join('')
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
}

const defaultStorage = (): IntentStorage | null => (globalThis as { localStorage?: IntentStorage }).localStorage ?? null

export function createIdempotentRequest<T = unknown>(options: IdempotentRequestOptions, onChange: (snapshot: RequestSnapshot<T>) => void = () => {}): IdempotentRequest<T> {
  const policy = { ...defaultRetryPolicy, ...options.policy }
  const storage = options.storage === undefined ? defaultStorage() : options.storage
  const memory = new Map<string, string>()
  const store: IntentStorage = storage ?? { getItem: k => memory.get(k) ?? null, setItem: (k, v) => void memory.set(k, v), removeItem: k => void memory.delete(k) }
  const doFetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init))
  const sleep = options.sleep ?? (ms => new Promise<void>(resolve => setTimeout(resolve, ms)))
  const random = options.random ?? Math.random
  const newKey = options.newKey ?? newIdempotencyKey
  const timeoutSignal = options.timeoutSignal ?? (ms => AbortSignal.timeout(ms))
  const maxAge = options.intentMaxAgeMs ?? 24 * 60 * 60 * 1000
  const storageKey = (name = options.intentName()) => `idempotent-intent:${name}`

  let current: RequestSnapshot<T> = { phase: 'idle', attempt: 0, replayed: false }
  let inFlight: Promise<RequestSnapshot<T>> | undefined
  /** Bumped by forget(): a run of an earlier generation finishes silently, touching nothing. */
  let generation = 0
  const set = (next: RequestSnapshot<T>) => {
    current = next
    onChange(next)
    return next
  }

  function pendingIntent(): PendingIntent | undefined {
    try {
      const intent = JSON.parse(store.getItem(storageKey()) ?? 'null') as PendingIntent | null
      if (intent && typeof intent.key === 'string' && Date.now() - intent.startedAt < maxAge) return intent
    }
    catch {
      // Unreadable: treat as none.
    }
    return undefined
  }

  async function attemptOnce(url: string, key: string, body: unknown, extraHeaders: Record<string, string>): Promise<{ verdict: Verdict, status?: number, payload?: unknown, replayed?: boolean }> {
    try {
      const response = await doFetch(url, {
        method: 'POST',
        credentials: 'same-origin',
        headers: {
          'content-type': 'application/json',
          'accept': 'application/json, application/problem+json',
          'idempotency-key': key,
          'prefer': `wait=${options.preferWaitSeconds ?? 5}`,
          ...options.headers?.(),
          ...extraHeaders,
        },
        body: JSON.stringify(body),
        signal: timeoutSignal(policy.attemptTimeoutMs),
      })
      const text = await response.text()
      let payload: unknown
      try {
        payload = text ? JSON.parse(text) : undefined
      }
      catch {
        payload = undefined
      }
      const replayed = response.headers.get('idempotent-replayed') === 'true'
        || (payload as { idempotency?: { replayed?: boolean } } | undefined)?.idempotency?.replayed === true
      return { verdict: judgeResponse(response.status, payload, response.headers), status: response.status, payload, replayed }
    }
    catch (error) {
      const timedOut = error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError')
      return { verdict: { kind: 'retry', reason: timedOut ? 'timed out' : 'network error' } }
    }
  }

  /** One intent's attempts; `intentKey` is its storage key and `url` its address, fixed when it was submitted. */
  async function run(intentKey: string, url: string, key: string, body: unknown, submitOptions: SubmitOptions): Promise<RequestSnapshot<T>> {
    const mine = generation
    const forgotten = () => mine !== generation
    const endIntent = () => store.removeItem(intentKey)
    let last: Awaited<ReturnType<typeof attemptOnce>> | undefined
    for (let attempt = 1; attempt <= policy.maxAttempts; attempt++) {
      if (attempt === 1) set({ phase: 'submitting', attempt, key, replayed: false })
      last = await attemptOnce(url, key, body, attempt === 1 ? submitOptions.firstAttemptHeaders ?? {} : {})
      if (forgotten()) return current
      const { verdict } = last
      if (verdict.kind === 'succeeded') {
        endIntent()
        return set({ phase: 'succeeded', attempt, key, replayed: last.replayed ?? false, result: { status: last.status!, body: last.payload as T } })
      }
      if (verdict.kind === 'final' || verdict.kind === 'rejected') {
        if (verdict.kind === 'final') endIntent()
        const problem = last.payload as Problem | undefined
        return set({
          phase: 'failed',
          attempt,
          key,
          replayed: last.replayed ?? false,
          problem,
          detail: problem?.detail ?? `The server answered ${last.status}.`,
          keyKept: verdict.kind === 'rejected',
        })
      }
      if (attempt === policy.maxAttempts) break
      const retryInMs = retryDelayMs(attempt, verdict.retryAfterMs, policy, random)
      set({ phase: 'retrying', attempt, key, replayed: false, retryReason: verdict.reason, retryInMs })
      await sleep(retryInMs)
      if (forgotten()) return current
      set({ ...current, attempt: attempt + 1, retryInMs: undefined })
    }
    return set({
      phase: 'failed',
      attempt: policy.maxAttempts,
      key,
      replayed: false,
      problem: last?.payload as Problem | undefined,
      detail: `No final answer after ${policy.maxAttempts} attempts (last: ${last?.verdict.kind === 'retry' ? last.verdict.reason : 'unknown'}). `
        + 'Your request may already have gone through: try again and it will be completed once, never twice.',
      keyKept: true,
    })
  }

  function submit(body: unknown, submitOptions: SubmitOptions = {}): Promise<RequestSnapshot<T>> {
    if (inFlight) return inFlight
    // A pending intent keeps its key even when the body changed: a request the server rejected
    // (validation) stored nothing under it, and one it stored answers 422, which ends the intent.
    const pending = pendingIntent()
    const intent: PendingIntent = { key: pending?.key ?? newKey(), body, startedAt: pending?.startedAt ?? Date.now() }
    const intentKey = storageKey()
    store.setItem(intentKey, JSON.stringify(intent))
    const url = typeof options.url === 'function' ? options.url() : options.url
    const running = run(intentKey, url, intent.key, body, submitOptions).finally(() => {
      if (inFlight === running) inFlight = undefined
    })
    inFlight = running
    return running
  }

  return {
    snapshot: () => current,
    submit,
    pendingIntent,
    resume() {
      const intent = pendingIntent()
      return intent ? submit(intent.body) : undefined
    },
    forget() {
      generation++
      inFlight = undefined
      store.removeItem(storageKey())
      set({ phase: 'idle', attempt: 0, replayed: false })
    },
  }
}

/**
 * What a request in flight says while it waits: `sending` on the first attempt, then the retry
 * with its reason and the attempt under way; nothing once it has ended.
 */
export function progressLine(state: Pick<RequestSnapshot<unknown>, 'phase' | 'attempt' | 'retryReason' | 'retryInMs'>, sending: string): string {
  if (state.phase === 'submitting') return sending
  if (state.phase === 'retrying') {
    // While waiting, `attempt` is the one that failed; once sent, the one in flight.
    const next = state.retryInMs !== undefined ? state.attempt + 1 : state.attempt
    return `Connection trouble (${state.retryReason}). Trying again with the same request — attempt ${next}…`
  }
  return ''
}

/** Vue wrapper: `state` is a readonly ref of the latest snapshot. */
export function useIdempotentRequest<T = unknown>(options: IdempotentRequestOptions) {
  const state = shallowRef<RequestSnapshot<T>>({ phase: 'idle', attempt: 0, replayed: false })
  const request = createIdempotentRequest<T>(options, (snapshot) => {
    state.value = snapshot
  })
  return { state: readonly(state), ...request }
}
