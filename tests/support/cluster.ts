import { setTimeout as sleep } from 'node:timers/promises'
import { type AppProcess, startApp } from './app'
import { request, type TestResponse } from './http'
import { uniqueRedisPrefix } from './services'

/**
 * Several app instances in the production shape: one Postgres database and one Redis key prefix
 * shared by all, so that locks and idempotency records are common to every instance. Plus the
 * client a careful integrator would write: it retries with the SAME key until it gets an answer.
 */

export interface ClusterOptions {
  databaseUrl: string
  redisUrl: string | null
  /** Names the cluster's Redis prefix and its instances (`<label>-<name>`). */
  label: string
  /** Extra environment for every instance, e.g. a short IDEMPOTENCY_LEASE_MS. */
  env?: Record<string, string>
}

export interface Cluster {
  redisKeyPrefix: string
  /** Starts one more instance with the cluster's shared configuration (also to replace a dead one). */
  startInstance: (name: string) => Promise<AppProcess>
  /** Starts `count` instances at once (their migrations serialise on an advisory lock). */
  startInstances: (count: number) => Promise<AppProcess[]>
}

export function createCluster(options: ClusterOptions): Cluster {
  const redisKeyPrefix = uniqueRedisPrefix(options.label)
  const startInstance = (name: string) => startApp({
    databaseUrl: options.databaseUrl,
    redisUrl: options.redisUrl,
    label: `${options.label}-${name}`,
    env: { ...options.env, REDIS_KEY_PREFIX: redisKeyPrefix },
  })
  return {
    redisKeyPrefix,
    startInstance,
    startInstances: count => Promise.all(Array.from({ length: count }, (_, index) => startInstance(`instance-${index + 1}`))),
  }
}

/** A valid SPEC §4 order for `cartId`; `variant` changes the quantity, so the fingerprint differs. */
export function orderPayload(cartId: string, variant = 0) {
  const quantity = 2 + variant
  const unitPrice = 75_000
  return {
    cartId,
    currency: 'IDR',
    amount: quantity * unitPrice,
    paymentMethod: 'bank_transfer',
    items: [{ sku: 'SKU-1', quantity, unitPrice }],
    customer: { email: 'buyer@example.com' },
  }
}

/** One attempt of the retrying client: the response, or the network error when none arrived. */
export type OrderAnswer =
  | { baseUrl: string, response: TestResponse, networkError?: undefined }
  | { baseUrl: string, response?: undefined, networkError: Error }

export interface AnsweredOrder {
  /** The answer the client stopped at: anything that is not worth retrying. */
  final: TestResponse
  /** Every attempt in order, the final one included. */
  answers: OrderAnswer[]
}

export interface PostOrderOptions {
  /** Attempt n goes to baseUrls[n % length], as a load balancer would spread retries. */
  baseUrls: string[]
  secretKey: string
  idempotencyKey: string
  body: unknown
  headers?: Record<string, string>
  maxAttempts?: number
  deadlineMs?: number
  /** Per attempt; must exceed any `Prefer: wait` or injected delay. */
  timeoutMs?: number
}

// Retry-After is honoured but capped, so that tests stay fast; 0–50 ms of jitter spreads the herd.
const maxRetrySleepMs = 300
const networkRetrySleepMs = 100

export async function postOrderUntilAnswered(options: PostOrderOptions): Promise<AnsweredOrder> {
  const { baseUrls, maxAttempts = 100, deadlineMs = 30_000, timeoutMs = 15_000 } = options
  const deadline = Date.now() + deadlineMs
  const answers: OrderAnswer[] = []
  for (let attempt = 0; attempt < maxAttempts && Date.now() < deadline; attempt++) {
    const baseUrl = baseUrls[attempt % baseUrls.length]!
    let answer: OrderAnswer
    try {
      answer = { baseUrl, response: await postOrder(baseUrl, options, timeoutMs) }
    }
    catch (error) {
      answer = { baseUrl, networkError: error as Error }
    }
    answers.push(answer)
    if (answer.response && !isRetryable(answer.response)) return { final: answer.response, answers }
    await sleep(retryDelayMs(answer.response) + Math.random() * 50)
  }
  const seen = answers.map(answer => answer.response?.status ?? `network error (${answer.networkError?.message})`)
  throw new Error(`Idempotency-Key ${options.idempotencyKey}: no final answer after ${answers.length} attempts; saw ${seen.join(', ')}`)
}

/** One POST /api/orders; rejects when no response arrived (connection refused, dropped, timed out). */
export function postOrder(baseUrl: string, options: Pick<PostOrderOptions, 'secretKey' | 'idempotencyKey' | 'body' | 'headers'>, timeoutMs = 15_000): Promise<TestResponse> {
  return request(baseUrl, '/api/orders', {
    method: 'POST',
    headers: { 'authorization': `Bearer ${options.secretKey}`, 'idempotency-key': options.idempotencyKey, ...options.headers },
    body: options.body,
    timeoutMs,
  })
}

/** 409 request-in-progress (not cart-already-ordered, which is final) and 503 are worth retrying. */
export function isRetryable(response: TestResponse): boolean {
  return response.status === 503 || (response.status === 409 && problemSlug(response) === 'request-in-progress')
}

export function problemSlug(response: TestResponse): string | undefined {
  const type: unknown = response.json?.type
  return typeof type === 'string' ? type.replace('/problems/', '') : undefined
}

function retryDelayMs(response: TestResponse | undefined): number {
  const retryAfterSeconds = Number(response?.headers.get('retry-after'))
  if (!response || !Number.isFinite(retryAfterSeconds) || retryAfterSeconds <= 0) return networkRetrySleepMs
  return Math.min(retryAfterSeconds * 1000, maxRetrySleepMs)
}
