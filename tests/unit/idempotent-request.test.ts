import fc from 'fast-check'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { watch } from 'vue'
import {
  createIdempotentRequest,
  defaultRetryPolicy,
  type IdempotentRequestOptions,
  type IntentStorage,
  judgeResponse,
  parseRetryAfter,
  type RequestSnapshot,
  retryDelayMs,
  type RetryPolicy,
  useIdempotentRequest,
} from '../../composables/useIdempotentRequest'

/**
 * The checkout's client-side retry policy (docs/checkout-page.md), against a scripted fetch that
 * answers with real Response objects shaped like the server's: one key per intent, kept until the
 * intent ends, retried only when the server cannot have stored a final answer.
 */

const policy: RetryPolicy = { maxAttempts: 6, baseDelayMs: 300, maxDelayMs: 8_000, attemptTimeoutMs: 15_000, maxRetryAfterMs: 30_000 }

const NOW = Date.parse('2025-03-14T09:00:00.000Z')
const URL = '/api/orders'
const STORAGE_PREFIX = 'idempotent-intent:'

const problemOf = (slug: string, status: number, members: Record<string, unknown> = {}) => ({
  type: `/problems/${slug}`,
  title: `title of ${slug}`,
  status,
  detail: `detail of ${slug}`,
  ...members,
})

const order = { cartId: 'crt_1', currency: 'IDR', amount: 150_000, paymentMethod: 'bank_transfer', items: [{ sku: 'SKU-1', quantity: 2, unitPrice: 75_000 }], customer: { email: 'a@b.co' } }
const created = (key: string, replayed = false) => ({ id: 'ord_1', object: 'order', status: 'pending_payment', ...order, createdAt: '2025-03-14T09:00:00.000Z', idempotency: { key, replayed } })

// ---------------------------------------------------------------------------------------------
// Test doubles: a scripted fetch, an in-memory Web Storage, a recording sleep.
// ---------------------------------------------------------------------------------------------

type Answer = { status: number, body?: unknown, text?: string, headers?: Record<string, string> }
/** One scripted reaction to one request: an answer, a thrown error, or a promise of either. */
type Step = Answer | { error: Error } | { pending: Promise<Answer | { error: Error }> }

interface Call {
  url: string
  method?: string
  credentials?: RequestCredentials
  headers: Record<string, string>
  body: string
  signal?: AbortSignal | null
  /** The storage as it was when the request left. */
  stored: Record<string, unknown>
}

function toResponse(answer: Answer): Response {
  const text = answer.text ?? (answer.body === undefined ? null : JSON.stringify(answer.body))
  const contentType = answer.status >= 400 ? 'application/problem+json' : 'application/json'
  return new Response(text, { status: answer.status, headers: { 'content-type': contentType, ...answer.headers } })
}

async function react(step: Step): Promise<Response> {
  const resolved = 'pending' in step ? await step.pending : step
  if ('error' in resolved) throw resolved.error
  return toResponse(resolved)
}

const networkError = () => ({ error: new TypeError('fetch failed') })
const timeout = () => ({ error: new DOMException('The operation was aborted due to timeout', 'TimeoutError') })

function memoryStorage() {
  const items = new Map<string, string>()
  const storage: IntentStorage & { dump: () => Record<string, unknown> } = {
    getItem: key => items.get(key) ?? null,
    setItem: (key, value) => void items.set(key, value),
    removeItem: key => void items.delete(key),
    /** Every stored intent, parsed, by storage key. */
    dump: () => Object.fromEntries([...items].map(([key, value]) => [key, JSON.parse(value)])),
  }
  return storage
}

function deferred<T>() {
  let resolve!: (value: T) => void
  const promise = new Promise<T>((done) => {
    resolve = done
  })
  return { promise, resolve }
}

interface HarnessOptions {
  storage?: ReturnType<typeof memoryStorage>
  /** Prefix of the generated keys: `tab-a-1`, `tab-a-2`, … */
  keys?: string
  random?: () => number
  options?: Partial<IdempotentRequestOptions>
}

function harness(steps: Step[], { storage = memoryStorage(), keys = 'key', random = () => 0.5, options = {} }: HarnessOptions = {}) {
  const script = [...steps]
  const calls: Call[] = []
  const delays: number[] = []
  const timeouts: number[] = []
  const signals: AbortSignal[] = []
  const snapshots: Array<RequestSnapshot<unknown>> = []
  let generated = 0
  const fetch = (async (input: RequestInfo | URL, init?: RequestInit) => {
    calls.push({
      url: String(input),
      method: init?.method,
      credentials: init?.credentials,
      headers: { ...(init?.headers as Record<string, string>) },
      body: String(init?.body),
      signal: init?.signal,
      stored: storage.dump(),
    })
    const step = script.shift()
    if (!step) throw new Error(`unscripted request #${calls.length}`)
    return react(step)
  }) as typeof globalThis.fetch
  const request = createIdempotentRequest({
    url: URL,
    intentName: () => 'checkout:crt_1',
    storage,
    fetch,
    sleep: async (ms) => {
      delays.push(ms)
    },
    random,
    newKey: () => `${keys}-${++generated}`,
    timeoutSignal: (ms) => {
      timeouts.push(ms)
      const signal = new AbortController().signal
      signals.push(signal)
      return signal
    },
    ...options,
  }, snapshot => snapshots.push(snapshot))
  return { request, storage, calls, delays, timeouts, signals, snapshots, unused: () => script.length }
}

/** The headers every attempt sends (docs/checkout-page.md: the key, `Prefer: wait`, JSON both ways). */
const headersFor = (key: string, extra: Record<string, string> = {}) => ({
  'content-type': 'application/json',
  'accept': 'application/json, application/problem+json',
  'idempotency-key': key,
  'prefer': 'wait=5',
  ...extra,
})

const storedIntent = (key: string, body: unknown, startedAt = NOW) => ({ [`${STORAGE_PREFIX}checkout:crt_1`]: { key, body, startedAt } })

// ---------------------------------------------------------------------------------------------

describe('judgeResponse', () => {
  const headers = (init: Record<string, string> = {}) => new Headers(init)

  it.each([200, 201, 202, 204, 299])('judges %i a success', (status) => {
    expect(judgeResponse(status, created('k'), headers())).toEqual({ kind: 'succeeded' })
  })

  it.each([500, 502, 503, 504, 429, 408])('retries %i, with no Retry-After when none was sent', (status) => {
    expect(judgeResponse(status, problemOf('internal-error', status), headers())).toEqual({ kind: 'retry', reason: `HTTP ${status}`, retryAfterMs: undefined })
  })

  it.each([503, 429])('retries %i after its Retry-After, in milliseconds', (status) => {
    expect(judgeResponse(status, problemOf('service-unavailable', status), headers({ 'Retry-After': '2' }))).toEqual({ kind: 'retry', reason: `HTTP ${status}`, retryAfterMs: 2_000 })
  })

  it('retries a 5xx whose body is not a problem document (a proxy\'s HTML page)', () => {
    expect(judgeResponse(502, undefined, headers())).toEqual({ kind: 'retry', reason: 'HTTP 502', retryAfterMs: undefined })
  })

  it('retries 409 request-in-progress after its Retry-After', () => {
    expect(judgeResponse(409, problemOf('request-in-progress', 409), headers({ 'Retry-After': '1' }))).toEqual({ kind: 'retry', reason: 'HTTP 409', retryAfterMs: 1_000 })
  })

  it('takes an HTTP-date Retry-After relative to the current time', () => {
    vi.useFakeTimers({ toFake: ['Date'] })
    try {
      vi.setSystemTime(NOW)
      const in90s = new Date(NOW + 90_000).toUTCString()
      expect(judgeResponse(503, problemOf('service-unavailable', 503), headers({ 'Retry-After': in90s }))).toEqual({ kind: 'retry', reason: 'HTTP 503', retryAfterMs: 90_000 })
    }
    finally {
      vi.useRealTimers()
    }
  })

  it('ends the intent on 409 cart-already-ordered, an answer the server stored under the key', () => {
    const body = problemOf('cart-already-ordered', 409, { orderId: 'ord_1', idempotency: { key: 'k', replayed: false } })
    expect(judgeResponse(409, body, headers())).toEqual({ kind: 'final' })
  })

  it('ends the intent on 422 idempotency-key-reused carrying an idempotency member', () => {
    const body = problemOf('idempotency-key-reused', 422, { idempotency: { key: 'k', replayed: false } })
    expect(judgeResponse(422, body, headers())).toEqual({ kind: 'final' })
  })

  it('ends the intent on 422 idempotency-key-reused as the server sends it, with no idempotency member', () => {
    expect(judgeResponse(422, problemOf('idempotency-key-reused', 422), headers())).toEqual({ kind: 'final' })
  })

  it('rejects a 409 other than request-in-progress that nothing stored, without retrying it', () => {
    expect(judgeResponse(409, problemOf('cart-already-ordered', 409, { orderId: 'ord_1' }), headers({ 'Retry-After': '1' }))).toEqual({ kind: 'rejected' })
  })

  it('rejects a validation 400 (stored nowhere: the key stays usable)', () => {
    const body = problemOf('validation-failed', 400, { errors: [{ path: 'amount', message: 'must equal the items total' }] })
    expect(judgeResponse(400, body, headers())).toEqual({ kind: 'rejected' })
  })

  it.each([
    [401, problemOf('unauthorized', 401)],
    [400, problemOf('idempotency-key-invalid', 400)],
    [404, problemOf('not-found', 404)],
    [413, undefined],
  ])('rejects %i without an idempotency member', (status, body) => {
    expect(judgeResponse(status, body, headers())).toEqual({ kind: 'rejected' })
  })
})

describe('parseRetryAfter', () => {
  it.each(['-5', '1.5', 'abc 1', 'soon', '2025-03-14'])('reads %j as no Retry-After at all', (value) => {
    expect(parseRetryAfter(value, NOW)).toBeUndefined()
  })

  it.each([
    ['0', 0],
    ['1', 1_000],
    ['2', 2_000],
    [' 120 ', 120_000],
    ['86400', 86_400_000],
  ])('reads delta-seconds %j as %i ms', (value, ms) => {
    expect(parseRetryAfter(value, NOW)).toBe(ms)
  })

  it('reads an HTTP date as the time left until it, from the given now', () => {
    expect(parseRetryAfter('Fri, 14 Mar 2025 09:00:30 GMT', NOW)).toBe(30_000)
    expect(parseRetryAfter('Fri, 14 Mar 2025 10:00:00 GMT', NOW)).toBe(3_600_000)
    expect(parseRetryAfter('Fri, 14 Mar 2025 10:00:00 GMT', NOW + 3_599_000)).toBe(1_000)
  })

  it('reads an HTTP date already past as no wait at all, never a negative one', () => {
    expect(parseRetryAfter('Fri, 14 Mar 2025 08:59:00 GMT', NOW)).toBe(0)
    expect(parseRetryAfter('Thu, 01 Jan 1970 00:00:00 GMT', NOW)).toBe(0)
  })

  it.each([null, '', 'soon', 'in a minute', 'NaN', '1e3', 'Infinity'])('ignores %j', (value) => {
    expect(parseRetryAfter(value, NOW)).toBeUndefined()
  })
})

describe('retryDelayMs', () => {
  const lowest = () => 0
  const highest = () => 0.999_999
  const middle = () => 0.5

  it('is the default policy the composable uses', () => {
    expect(defaultRetryPolicy).toEqual(policy)
  })

  it('waits nothing at the bottom of the jitter, whatever the retry', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 20].map(retry => retryDelayMs(retry, undefined, policy, lowest))).toEqual([0, 0, 0, 0, 0, 0, 0, 0])
  })

  it('waits just under min(cap, base·2ⁿ⁻¹) at the top of the jitter', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 20].map(retry => retryDelayMs(retry, undefined, policy, highest)))
      .toEqual([299, 599, 1_199, 2_399, 4_799, 7_999, 7_999, 7_999])
  })

  it('scales the ceiling by the random value and rounds down to whole milliseconds', () => {
    expect([1, 2, 3, 4, 5, 6, 7].map(retry => retryDelayMs(retry, undefined, policy, middle)))
      .toEqual([150, 300, 600, 1_200, 2_400, 4_000, 4_000])
    expect(retryDelayMs(1, undefined, { ...policy, baseDelayMs: 333 }, () => 0.7)).toBe(233)
  })

  it('never waits less than Retry-After, even at the bottom of the jitter', () => {
    expect(retryDelayMs(1, 2_000, policy, lowest)).toBe(2_000)
    expect(retryDelayMs(1, 2_000, policy, highest)).toBe(2_000)
    // A jitter above Retry-After is kept: Retry-After is a floor, not the delay.
    expect(retryDelayMs(5, 2_000, policy, highest)).toBe(4_799)
    expect(retryDelayMs(3, 0, policy, middle)).toBe(600)
  })

  it('waits at most maxRetryAfterMs for a longer Retry-After', () => {
    expect(retryDelayMs(1, 120_000, policy, lowest)).toBe(30_000)
    expect(retryDelayMs(1, 30_000, policy, lowest)).toBe(30_000)
    expect(retryDelayMs(1, 29_999, policy, lowest)).toBe(29_999)
    expect(retryDelayMs(2, 10_000, { ...policy, maxRetryAfterMs: 5_000 }, lowest)).toBe(5_000)
  })

  it('stays within [max(min(Retry-After, maxRetryAfterMs), 0), max(that, ceiling)) for any retry, random value and Retry-After', () => {
    fc.assert(fc.property(
      fc.integer({ min: 1, max: 60 }),
      fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
      fc.option(fc.integer({ min: 0, max: 10 * 60 * 1000 }), { nil: undefined }),
      (retry, randomValue, retryAfterMs) => {
        const delay = retryDelayMs(retry, retryAfterMs, policy, () => randomValue)
        const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (retry - 1))
        const floor = retryAfterMs === undefined ? 0 : Math.min(retryAfterMs, policy.maxRetryAfterMs)
        expect(Number.isInteger(delay)).toBe(true)
        expect(delay).toBeGreaterThanOrEqual(floor)
        expect(delay).toBeLessThanOrEqual(Math.max(floor, ceiling - 1))
        expect(delay).toBeLessThanOrEqual(Math.max(policy.maxDelayMs, policy.maxRetryAfterMs))
        // The jitter part is exactly floor(random · ceiling).
        expect(delay).toBe(Math.max(floor, Math.floor(randomValue * ceiling)))
      },
    ))
  })
})

describe('createIdempotentRequest', () => {
  beforeEach(() => {
    // Only Date is faked, so a stored intent's startedAt is exact; sleeps are injected.
    vi.useFakeTimers({ toFake: ['Date'] })
    vi.setSystemTime(NOW)
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  it('carries one intent through a network error, a timeout, a 503 and a 409 in progress under one key, then succeeds', async () => {
    const { request, storage, calls, delays, timeouts, signals, snapshots, unused } = harness([
      networkError(),
      timeout(),
      { status: 503, body: problemOf('service-unavailable', 503), headers: { 'Retry-After': '2' } },
      { status: 409, body: problemOf('request-in-progress', 409), headers: { 'Retry-After': '1' } },
      { status: 201, body: created('key-1'), headers: { Location: '/api/orders/ord_1' } },
    ])

    const outcome = await request.submit(order, { firstAttemptHeaders: { 'x-fault': 'drop-after-commit' } })

    expect(unused()).toBe(0)
    expect(calls.map(call => call.headers)).toEqual([
      headersFor('key-1', { 'x-fault': 'drop-after-commit' }),
      headersFor('key-1'),
      headersFor('key-1'),
      headersFor('key-1'),
      headersFor('key-1'),
    ])
    for (const [index, call] of calls.entries()) {
      expect(call).toMatchObject({ url: URL, method: 'POST', credentials: 'same-origin', body: JSON.stringify(order) })
      expect(call.signal).toBe(signals[index])
      // The intent is stored before the first attempt leaves and stays stored through every retry.
      expect(call.stored).toEqual(storedIntent('key-1', order))
    }
    expect(timeouts).toEqual([15_000, 15_000, 15_000, 15_000, 15_000])
    // random() = 0.5: 150, 300, then Retry-After 2 s over 600, then 1 200 over Retry-After 1 s.
    expect(delays).toEqual([150, 300, 2_000, 1_200])
    expect(snapshots).toEqual([
      { phase: 'submitting', attempt: 1, key: 'key-1', replayed: false },
      { phase: 'retrying', attempt: 1, key: 'key-1', replayed: false, retryReason: 'network error', retryInMs: 150 },
      { phase: 'retrying', attempt: 2, key: 'key-1', replayed: false, retryReason: 'network error', retryInMs: undefined },
      { phase: 'retrying', attempt: 2, key: 'key-1', replayed: false, retryReason: 'timed out', retryInMs: 300 },
      { phase: 'retrying', attempt: 3, key: 'key-1', replayed: false, retryReason: 'timed out', retryInMs: undefined },
      { phase: 'retrying', attempt: 3, key: 'key-1', replayed: false, retryReason: 'HTTP 503', retryInMs: 2_000 },
      { phase: 'retrying', attempt: 4, key: 'key-1', replayed: false, retryReason: 'HTTP 503', retryInMs: undefined },
      { phase: 'retrying', attempt: 4, key: 'key-1', replayed: false, retryReason: 'HTTP 409', retryInMs: 1_200 },
      { phase: 'retrying', attempt: 5, key: 'key-1', replayed: false, retryReason: 'HTTP 409', retryInMs: undefined },
      { phase: 'succeeded', attempt: 5, key: 'key-1', replayed: false, result: { status: 201, body: created('key-1') } },
    ])
    expect(outcome).toBe(snapshots.at(-1))
    expect(request.snapshot()).toBe(outcome)
    // The intent ended: nothing is left to resume.
    expect(storage.dump()).toEqual({})
    expect(request.pendingIntent()).toBeUndefined()
  })

  it('sends the caller\'s headers on every attempt and Prefer: wait with the configured seconds', async () => {
    const { request, calls } = harness([
      networkError(),
      { status: 201, body: created('key-1') },
    ], { options: { headers: () => ({ 'x-request-id': 'req-1' }), preferWaitSeconds: 10 } })

    await request.submit(order)

    expect(calls.map(call => call.headers)).toEqual([
      { ...headersFor('key-1', { 'x-request-id': 'req-1' }), prefer: 'wait=10' },
      { ...headersFor('key-1', { 'x-request-id': 'req-1' }), prefer: 'wait=10' },
    ])
  })

  it.each([
    ['the Idempotent-Replayed header', { 'Idempotent-Replayed': 'true' }, created('key-1', false)],
    ['idempotency.replayed in the body', {}, created('key-1', true)],
  ])('reports a replayed success from %s', async (_, headers, body) => {
    const { request, calls, snapshots, storage } = harness([
      // The first attempt committed, then the connection dropped: the retry gets the stored answer.
      networkError(),
      { status: 201, body, headers },
    ])

    const outcome = await request.submit(order)

    expect(calls.map(call => call.headers['idempotency-key'])).toEqual(['key-1', 'key-1'])
    expect(outcome).toEqual({ phase: 'succeeded', attempt: 2, key: 'key-1', replayed: true, result: { status: 201, body } })
    expect(snapshots.map(snapshot => snapshot.phase)).toEqual(['submitting', 'retrying', 'retrying', 'succeeded'])
    expect(storage.dump()).toEqual({})
  })

  it('does not report a first execution as replayed', async () => {
    const { request } = harness([{ status: 201, body: created('key-1'), headers: { 'Idempotent-Replayed': 'false' } }])
    expect(await request.submit(order)).toEqual({ phase: 'succeeded', attempt: 1, key: 'key-1', replayed: false, result: { status: 201, body: created('key-1') } })
  })

  describe('a 4xx is answered once, never retried', () => {
    it.each([
      ['409 cart-already-ordered', 409, problemOf('cart-already-ordered', 409, { orderId: 'ord_0', idempotency: { key: 'key-1', replayed: false } }), {}, false],
      ['a replayed 409 cart-already-ordered', 409, problemOf('cart-already-ordered', 409, { orderId: 'ord_0', idempotency: { key: 'key-1', replayed: true } }), { 'Idempotent-Replayed': 'true' }, true],
      ['422 idempotency-key-reused with an idempotency member', 422, problemOf('idempotency-key-reused', 422, { idempotency: { key: 'key-1', replayed: false } }), {}, false],
    ])('a stored final %s ends the intent: failed, storage cleared, key not kept', async (_, status, body, headers, replayed) => {
      const { request, calls, delays, snapshots, storage } = harness([{ status, body, headers }])

      const outcome = await request.submit(order)

      expect(calls).toHaveLength(1)
      expect(delays).toEqual([])
      expect(snapshots).toEqual([
        { phase: 'submitting', attempt: 1, key: 'key-1', replayed: false },
        { phase: 'failed', attempt: 1, key: 'key-1', replayed, problem: body, detail: body.detail, keyKept: false },
      ])
      expect(outcome).toBe(snapshots[1])
      expect(storage.dump()).toEqual({})
      expect(request.pendingIntent()).toBeUndefined()
    })

    it.each([
      ['400 validation-failed', 400, problemOf('validation-failed', 400, { errors: [{ path: 'amount', message: 'must equal the items total' }] }), 'detail of validation-failed'],
      ['401 unauthorized', 401, problemOf('unauthorized', 401), 'detail of unauthorized'],
      ['403 without a body', 403, undefined, 'The server answered 403.'],
    ])('%s stored nothing: failed with the key kept and the intent still stored', async (_, status, body, detail) => {
      const { request, calls, delays, snapshots, storage } = harness([{ status, body, headers: { 'Retry-After': '1' } }])

      const outcome = await request.submit(order)

      expect(calls).toHaveLength(1)
      expect(delays).toEqual([])
      expect(snapshots).toEqual([
        { phase: 'submitting', attempt: 1, key: 'key-1', replayed: false },
        { phase: 'failed', attempt: 1, key: 'key-1', replayed: false, problem: body, detail, keyKept: true },
      ])
      expect(outcome).toBe(snapshots[1])
      expect(storage.dump()).toEqual(storedIntent('key-1', order))
      expect(request.pendingIntent()).toEqual({ key: 'key-1', body: order, startedAt: NOW })
    })

    it('a 4xx after retries ends the run at once, with no further attempt', async () => {
      const { request, calls, delays, snapshots } = harness([
        { status: 503, body: problemOf('service-unavailable', 503) },
        { status: 401, body: problemOf('unauthorized', 401) },
      ])

      const outcome = await request.submit(order)

      expect(calls).toHaveLength(2)
      expect(delays).toEqual([150])
      expect(snapshots.map(snapshot => [snapshot.phase, snapshot.attempt])).toEqual([['submitting', 1], ['retrying', 1], ['retrying', 2], ['failed', 2]])
      expect(outcome).toMatchObject({ phase: 'failed', attempt: 2, keyKept: true })
    })
  })

  it('sends the corrected body under the same key after a validation 400', async () => {
    const invalid = { ...order, amount: 1 }
    const { request, calls, storage } = harness([
      { status: 400, body: problemOf('validation-failed', 400, { errors: [{ path: 'amount', message: 'must equal the items total' }] }) },
      { status: 201, body: created('key-1') },
    ])

    expect(await request.submit(invalid)).toMatchObject({ phase: 'failed', key: 'key-1', keyKept: true })
    vi.setSystemTime(NOW + 60_000)
    const outcome = await request.submit(order)

    expect(calls.map(call => [call.headers['idempotency-key'], call.body])).toEqual([
      ['key-1', JSON.stringify(invalid)],
      ['key-1', JSON.stringify(order)],
    ])
    // The same intent, now with the corrected body; it keeps its start time.
    expect(calls[1]!.stored).toEqual(storedIntent('key-1', order, NOW))
    expect(outcome).toEqual({ phase: 'succeeded', attempt: 1, key: 'key-1', replayed: false, result: { status: 201, body: created('key-1') } })
    expect(storage.dump()).toEqual({})
  })

  it('starts a new intent with a new key after one ended, by success or by a stored final 4xx', async () => {
    const { request, calls } = harness([
      { status: 409, body: problemOf('cart-already-ordered', 409, { orderId: 'ord_0', idempotency: { key: 'key-1', replayed: false } }) },
      { status: 201, body: created('key-2') },
      { status: 201, body: created('key-3') },
    ])

    await request.submit(order)
    await request.submit(order)
    await request.submit(order)

    expect(calls.map(call => call.headers['idempotency-key'])).toEqual(['key-1', 'key-2', 'key-3'])
  })

  it('gives up after maxAttempts with the key kept, and the next submit continues the same intent', async () => {
    const unavailable = problemOf('service-unavailable', 503)
    const { request, calls, delays, snapshots, storage } = harness([
      { status: 503, body: unavailable },
      { status: 502, text: '<html>Bad Gateway</html>' },
      { status: 503, body: unavailable },
      { status: 201, body: created('key-1', true), headers: { 'Idempotent-Replayed': 'true' } },
    ], { options: { policy: { maxAttempts: 3 } } })

    const outcome = await request.submit(order)

    expect(calls).toHaveLength(3)
    // No sleep after the last attempt.
    expect(delays).toEqual([150, 300])
    const failed = {
      phase: 'failed',
      attempt: 3,
      key: 'key-1',
      replayed: false,
      problem: unavailable,
      detail: 'No final answer after 3 attempts (last: HTTP 503). Your request may already have gone through: try again and it will be completed once, never twice.',
      keyKept: true,
    }
    expect(snapshots).toEqual([
      { phase: 'submitting', attempt: 1, key: 'key-1', replayed: false },
      { phase: 'retrying', attempt: 1, key: 'key-1', replayed: false, retryReason: 'HTTP 503', retryInMs: 150 },
      { phase: 'retrying', attempt: 2, key: 'key-1', replayed: false, retryReason: 'HTTP 503', retryInMs: undefined },
      { phase: 'retrying', attempt: 2, key: 'key-1', replayed: false, retryReason: 'HTTP 502', retryInMs: 300 },
      { phase: 'retrying', attempt: 3, key: 'key-1', replayed: false, retryReason: 'HTTP 502', retryInMs: undefined },
      failed,
    ])
    expect(outcome).toEqual(failed)
    expect(storage.dump()).toEqual(storedIntent('key-1', order))

    const again = await request.submit(order)

    expect(calls.map(call => call.headers['idempotency-key'])).toEqual(['key-1', 'key-1', 'key-1', 'key-1'])
    expect(again).toEqual({ phase: 'succeeded', attempt: 1, key: 'key-1', replayed: true, result: { status: 201, body: created('key-1', true) } })
    expect(storage.dump()).toEqual({})
  })

  it('names the last network failure when it gives up, with no problem document', async () => {
    const { request, calls } = harness([networkError(), timeout()], { options: { policy: { maxAttempts: 2 } } })

    const outcome = await request.submit(order)

    expect(calls).toHaveLength(2)
    expect(outcome).toEqual({
      phase: 'failed',
      attempt: 2,
      key: 'key-1',
      replayed: false,
      problem: undefined,
      detail: 'No final answer after 2 attempts (last: timed out). Your request may already have gone through: try again and it will be completed once, never twice.',
      keyKept: true,
    })
  })

  it('answers a second submit while the first is in flight with the same promise and one request (double click)', async () => {
    const answer = deferred<Answer>()
    const { request, calls, snapshots, storage } = harness([
      { pending: answer.promise },
      { status: 201, body: created('key-2') },
    ])

    const first = request.submit(order)
    const second = request.submit({ ...order, amount: 999 })

    expect(second).toBe(first)
    expect(calls).toHaveLength(1)
    expect(request.snapshot()).toEqual({ phase: 'submitting', attempt: 1, key: 'key-1', replayed: false })
    answer.resolve({ status: 201, body: created('key-1') })
    expect(await second).toEqual({ phase: 'succeeded', attempt: 1, key: 'key-1', replayed: false, result: { status: 201, body: created('key-1') } })
    expect(calls).toHaveLength(1)
    expect(calls[0]!.body).toBe(JSON.stringify(order))
    expect(snapshots.map(snapshot => snapshot.phase)).toEqual(['submitting', 'succeeded'])
    expect(storage.dump()).toEqual({})

    // Once settled, a submit is a new intent again.
    const third = request.submit(order)
    expect(third).not.toBe(first)
    expect(await third).toMatchObject({ phase: 'succeeded', key: 'key-2' })
  })

  it('resumes the stored intent after a reload: same key, same body, no first-attempt headers', async () => {
    const storage = memoryStorage()
    // The page sends its Pay, then goes away before any answer arrives.
    const before = harness([{ pending: new Promise(() => {}) }], { storage, keys: 'tab-a' })
    void before.request.submit(order, { firstAttemptHeaders: { 'x-fault': 'delay-before-commit=4000' } })
    expect(before.calls.map(call => call.headers)).toEqual([headersFor('tab-a-1', { 'x-fault': 'delay-before-commit=4000' })])

    vi.setSystemTime(NOW + 5_000)
    const after = harness([
      { status: 409, body: problemOf('request-in-progress', 409), headers: { 'Retry-After': '1' } },
      { status: 201, body: created('tab-a-1', true), headers: { 'Idempotent-Replayed': 'true' } },
    ], { storage, keys: 'tab-b' })

    expect(after.request.snapshot()).toEqual({ phase: 'idle', attempt: 0, replayed: false })
    expect(after.request.pendingIntent()).toEqual({ key: 'tab-a-1', body: order, startedAt: NOW })
    const outcome = await after.request.resume()

    expect(after.calls.map(call => call.headers)).toEqual([headersFor('tab-a-1'), headersFor('tab-a-1')])
    expect(after.calls.map(call => call.body)).toEqual([JSON.stringify(order), JSON.stringify(order)])
    expect(after.delays).toEqual([1_000])
    expect(outcome).toEqual({ phase: 'succeeded', attempt: 2, key: 'tab-a-1', replayed: true, result: { status: 201, body: created('tab-a-1', true) } })
    expect(storage.dump()).toEqual({})
    expect(after.request.resume()).toBeUndefined()
    expect(after.calls).toHaveLength(2)
  })

  it('has nothing to resume on fresh storage', () => {
    const { request, calls, snapshots } = harness([])
    expect(request.pendingIntent()).toBeUndefined()
    expect(request.resume()).toBeUndefined()
    expect(calls).toEqual([])
    expect(snapshots).toEqual([])
  })

  it('forget() drops the pending intent and returns to idle; the next submit gets a new key', async () => {
    const { request, calls, snapshots, storage } = harness([
      { status: 400, body: problemOf('validation-failed', 400) },
      { status: 201, body: created('key-2') },
    ])
    await request.submit(order)
    expect(storage.dump()).toEqual(storedIntent('key-1', order))

    request.forget()

    expect(storage.dump()).toEqual({})
    expect(request.snapshot()).toEqual({ phase: 'idle', attempt: 0, replayed: false })
    expect(snapshots.at(-1)).toEqual({ phase: 'idle', attempt: 0, replayed: false })
    expect(request.resume()).toBeUndefined()
    expect(await request.submit(order)).toMatchObject({ phase: 'succeeded', key: 'key-2' })
    expect(calls.map(call => call.headers['idempotency-key'])).toEqual(['key-1', 'key-2'])
  })

  it('a 422 after the attempts ran out ends the intent: the next submit, with a changed cart, gets a new key', async () => {
    const { request, calls, storage } = harness([
      ...Array.from({ length: policy.maxAttempts }, networkError),
      { status: 422, body: problemOf('idempotency-key-reused', 422) },
      { status: 201, body: created('key-2') },
    ])
    expect(await request.submit(order)).toMatchObject({ phase: 'failed', keyKept: true })
    const changed = { ...order, amount: 1 }
    expect(await request.submit(changed)).toMatchObject({ phase: 'failed', keyKept: false, key: 'key-1' })
    expect(storage.dump()).toEqual({})
    expect(await request.submit(changed)).toMatchObject({ phase: 'succeeded', key: 'key-2' })
    expect(calls.map(call => call.headers['idempotency-key'])).toEqual([...Array.from({ length: policy.maxAttempts + 1 }, () => 'key-1'), 'key-2'])
  })

  it('forget() during a retry wait silences the old run; a submit right after is a new intent with a new key', async () => {
    const wait = deferred<undefined>()
    const { request, calls, snapshots, storage } = harness([networkError(), { status: 201, body: created('key-2') }], {
      options: { sleep: () => wait.promise },
    })
    const old = request.submit(order)
    await vi.waitFor(() => expect(request.snapshot().phase).toBe('retrying'))

    request.forget()
    const fresh = request.submit(order)
    expect(fresh).not.toBe(old)
    expect(await fresh).toMatchObject({ phase: 'succeeded', key: 'key-2' })
    wait.resolve(undefined)
    await old

    expect(calls.map(call => call.headers['idempotency-key'])).toEqual(['key-1', 'key-2'])
    expect(snapshots.map(snapshot => [snapshot.phase, snapshot.key])).toEqual([
      ['submitting', 'key-1'], ['retrying', 'key-1'], ['idle', undefined], ['submitting', 'key-2'], ['succeeded', 'key-2'],
    ])
    expect(request.snapshot()).toMatchObject({ phase: 'succeeded', key: 'key-2' })
    expect(storage.dump()).toEqual({})
  })

  it('ends the intent it submitted even when intentName() changed while it was in flight', async () => {
    const answer = deferred<Answer>()
    let cart = 'a'
    const { request, storage } = harness([{ pending: answer.promise }], { options: { intentName: () => `checkout:${cart}` } })
    const paying = request.submit(order)
    cart = 'b'
    storage.setItem(`${STORAGE_PREFIX}checkout:b`, JSON.stringify({ key: 'other', body: {}, startedAt: NOW }))
    answer.resolve({ status: 201, body: created('key-1') })
    await paying
    expect(storage.dump()).toEqual({ [`${STORAGE_PREFIX}checkout:b`]: { key: 'other', body: {}, startedAt: NOW } })
  })

  it('ignores a stored intent as old as intentMaxAgeMs, and uses one a millisecond younger', async () => {
    const maxAge = 60 * 60 * 1000
    const storage = memoryStorage()
    const { request, calls } = harness([
      { status: 201, body: created('key-1') },
      { status: 201, body: created('fresh') },
    ], { storage, options: { intentMaxAgeMs: maxAge } })

    storage.setItem(`${STORAGE_PREFIX}checkout:crt_1`, JSON.stringify({ key: 'stale', body: order, startedAt: NOW - maxAge }))
    expect(request.pendingIntent()).toBeUndefined()
    expect(request.resume()).toBeUndefined()
    await request.submit(order)
    // The stale intent was replaced by a new one with a new key and a new start time.
    expect(calls[0]!.stored).toEqual(storedIntent('key-1', order, NOW))

    storage.setItem(`${STORAGE_PREFIX}checkout:crt_1`, JSON.stringify({ key: 'fresh', body: order, startedAt: NOW - maxAge + 1 }))
    expect(request.pendingIntent()).toEqual({ key: 'fresh', body: order, startedAt: NOW - maxAge + 1 })
    await request.submit(order)

    expect(calls.map(call => call.headers['idempotency-key'])).toEqual(['key-1', 'fresh'])
    expect(storage.dump()).toEqual({})
  })

  it('drops a stored intent once it is 24 hours old by default', async () => {
    const storage = memoryStorage()
    const { request } = harness([], { storage })
    storage.setItem(`${STORAGE_PREFIX}checkout:crt_1`, JSON.stringify({ key: 'day-old', body: order, startedAt: NOW - 24 * 60 * 60 * 1000 + 1 }))
    expect(request.pendingIntent()).toEqual({ key: 'day-old', body: order, startedAt: NOW - 24 * 60 * 60 * 1000 + 1 })
    vi.setSystemTime(NOW + 1)
    expect(request.pendingIntent()).toBeUndefined()
  })

  it('treats unreadable storage as no pending intent', async () => {
    const storage = memoryStorage()
    const { request, calls } = harness([{ status: 201, body: created('key-1') }], { storage })
    storage.setItem(`${STORAGE_PREFIX}checkout:crt_1`, '{not json')

    expect(request.pendingIntent()).toBeUndefined()
    await request.submit(order)
    expect(calls.map(call => call.headers['idempotency-key'])).toEqual(['key-1'])
  })

  it('keeps one intent per intentName(): two carts, two keys', async () => {
    let cart = 'crt_a'
    const storage = memoryStorage()
    const orderOf = (cartId: string) => ({ ...order, cartId })
    const { request, calls } = harness([
      { status: 400, body: problemOf('validation-failed', 400) },
      { status: 400, body: problemOf('validation-failed', 400) },
      { status: 201, body: created('key-1') },
    ], { storage, options: { intentName: () => `checkout:${cart}` } })

    await request.submit(orderOf('crt_a'))
    cart = 'crt_b'
    await request.submit(orderOf('crt_b'))

    expect(storage.dump()).toEqual({
      [`${STORAGE_PREFIX}checkout:crt_a`]: { key: 'key-1', body: orderOf('crt_a'), startedAt: NOW },
      [`${STORAGE_PREFIX}checkout:crt_b`]: { key: 'key-2', body: orderOf('crt_b'), startedAt: NOW },
    })

    cart = 'crt_a'
    expect(request.pendingIntent()).toEqual({ key: 'key-1', body: orderOf('crt_a'), startedAt: NOW })
    await request.submit(orderOf('crt_a'))

    expect(calls.map(call => call.headers['idempotency-key'])).toEqual(['key-1', 'key-2', 'key-1'])
    // Only cart A's intent ended.
    expect(storage.dump()).toEqual({ [`${STORAGE_PREFIX}checkout:crt_b`]: { key: 'key-2', body: orderOf('crt_b'), startedAt: NOW } })
  })

  it('keeps the intent in memory when storage is null', async () => {
    const { request, calls } = harness([
      { status: 400, body: problemOf('validation-failed', 400) },
      { status: 201, body: created('key-1') },
    ], { options: { storage: null } })

    await request.submit(order)
    expect(request.pendingIntent()).toEqual({ key: 'key-1', body: order, startedAt: NOW })
    await request.submit(order)

    expect(calls.map(call => call.headers['idempotency-key'])).toEqual(['key-1', 'key-1'])
    expect(request.pendingIntent()).toBeUndefined()
  })
})

describe('useIdempotentRequest', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date'] })
    vi.setSystemTime(NOW)
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  it('exposes each snapshot as state.value, in order', async () => {
    const steps: Step[] = [
      { status: 503, body: problemOf('service-unavailable', 503), headers: { 'Retry-After': '2' } },
      { status: 201, body: created('vue-1') },
    ]
    const delays: number[] = []
    const { state, submit, snapshot, forget } = useIdempotentRequest({
      url: URL,
      intentName: () => 'checkout:crt_1',
      storage: memoryStorage(),
      fetch: (async () => react(steps.shift()!)) as typeof fetch,
      sleep: async (ms) => {
        delays.push(ms)
      },
      random: () => 0,
      newKey: () => 'vue-1',
      timeoutSignal: () => new AbortController().signal,
    })
    const seen: Array<typeof state.value> = []
    watch(state, value => seen.push(value), { flush: 'sync' })

    expect(state.value).toEqual({ phase: 'idle', attempt: 0, replayed: false })
    const pending = submit(order)
    expect(state.value).toEqual({ phase: 'submitting', attempt: 1, key: 'vue-1', replayed: false })
    const outcome = await pending

    expect(delays).toEqual([2_000])
    expect(seen).toEqual([
      { phase: 'submitting', attempt: 1, key: 'vue-1', replayed: false },
      { phase: 'retrying', attempt: 1, key: 'vue-1', replayed: false, retryReason: 'HTTP 503', retryInMs: 2_000 },
      { phase: 'retrying', attempt: 2, key: 'vue-1', replayed: false, retryReason: 'HTTP 503', retryInMs: undefined },
      { phase: 'succeeded', attempt: 2, key: 'vue-1', replayed: false, result: { status: 201, body: created('vue-1') } },
    ])
    expect(state.value).toEqual(outcome)
    expect(state.value).toEqual(snapshot())

    forget()
    expect(state.value).toEqual({ phase: 'idle', attempt: 0, replayed: false })
  })
})
