import { setTimeout as sleep } from 'node:timers/promises'
import { type AppProcess, startApp } from './app'
import type { TestResponse } from './http'
import { postOrder, type PostOrderOptions, problemSlug } from './orders'
import { createTestDatabase, uniqueRedisPrefix } from './services'

/**
 * Several app instances in the production shape: one Postgres database and one Redis key prefix
 * shared by all, so that locks and idempotency records are common to every instance. Plus the
 * client a careful integrator would write: it retries with the SAME key until it gets an answer.
 */

export interface ClusterOptions {
  databaseUrl: string
  redisUrl: string | null
  /** Redis settings besides REDIS_URL for every instance, e.g. REDIS_CLUSTER_NODES (with `redisUrl: null`). */
  redisEnv?: Record<string, string>
  /** Names the cluster's Redis prefix and its instances (`<label>-<name>`). */
  label: string
  /** Extra environment for every instance, e.g. a short IDEMPOTENCY_LOCK_TTL_MS. */
  env?: Record<string, string>
}

export interface Cluster {
  redisKeyPrefix: string
  /**
   * Starts one more instance with the cluster's shared configuration (also to replace a dead one);
   * `env` adds to it for this instance only, e.g. its WORKER_ID.
   */
  startInstance: (name: string, env?: Record<string, string>) => Promise<AppProcess>
  /** Starts `count` instances at once (their migrations serialise on an advisory lock). */
  startInstances: (count: number) => Promise<AppProcess[]>
  /** Stops every instance the cluster started, replacements included. */
  stopInstances: () => Promise<void>
}

export function createCluster(options: ClusterOptions): Cluster {
  const redisKeyPrefix = uniqueRedisPrefix(options.label)
  const started: AppProcess[] = []
  const startInstance = async (name: string, env: Record<string, string> = {}) => {
    const instance = await startApp({
      databaseUrl: options.databaseUrl,
      redisUrl: options.redisUrl,
      redisEnv: options.redisEnv,
      label: `${options.label}-${name}`,
      env: { ...options.env, ...env, REDIS_KEY_PREFIX: redisKeyPrefix },
    })
    started.push(instance)
    return instance
  }
  return {
    redisKeyPrefix,
    startInstance,
    startInstances: count => Promise.all(Array.from({ length: count }, (_, index) => startInstance(`instance-${index + 1}`))),
    stopInstances: async () => { await Promise.all(started.map(instance => instance.stop())) },
  }
}

export interface StackOptions extends Omit<ClusterOptions, 'databaseUrl'> {
  /** The instances to start at once: how many, or each by name with its own extra environment. */
  instances: number | Array<{ name: string, env?: Record<string, string> }>
}

/** A fresh Postgres database with a cluster of instances on it. */
export interface Stack {
  databaseUrl: string
  cluster: Cluster
  instances: AppProcess[]
  /** Stops every instance of the cluster (replacements too), then drops the database. */
  close: () => Promise<void>
}

export async function startStack(options: StackOptions): Promise<Stack> {
  const { instances: wanted, ...clusterOptions } = options
  const database = await createTestDatabase(options.label)
  const cluster = createCluster({ ...clusterOptions, databaseUrl: database.url })
  const named = typeof wanted === 'number' ? Array.from({ length: wanted }, (_, index) => ({ name: `instance-${index + 1}`, env: undefined })) : wanted
  const started = await Promise.allSettled(named.map(({ name, env }) => cluster.startInstance(name, env)))
  const instances = started.flatMap(result => result.status === 'fulfilled' ? [result.value] : [])
  const close = async () => {
    await cluster.stopInstances()
    await database.drop()
  }
  const failed = started.find(result => result.status === 'rejected')
  if (failed) {
    await close()
    throw failed.reason
  }
  return { databaseUrl: database.url, cluster, instances, close }
}

/** One attempt of the retrying client: the response, or the network error when none arrived. */
export type OrderAnswer
  = | { baseUrl: string, response: TestResponse, networkError?: undefined }
    | { baseUrl: string, response?: undefined, networkError: Error }

export interface AnsweredOrder {
  /** The answer the client stopped at: anything that is not worth retrying. */
  final: TestResponse
  /** Every attempt in order, the final one included. */
  answers: OrderAnswer[]
}

export interface RetryingPostOptions extends PostOrderOptions {
  /** Attempt n goes to baseUrls[n % length], as a load balancer would spread retries. */
  baseUrls: string[]
  /** The same key on every attempt: that is what makes the retries safe. */
  key: string
  maxAttempts?: number
  deadlineMs?: number
}

// Retry-After is honoured but capped, so that tests stay fast; 0–50 ms of jitter spreads the herd.
const maxRetrySleepMs = 300
const networkRetrySleepMs = 100

export async function postOrderUntilAnswered(options: RetryingPostOptions): Promise<AnsweredOrder> {
  const { baseUrls, maxAttempts = 100, deadlineMs = 30_000 } = options
  const deadline = Date.now() + deadlineMs
  const answers: OrderAnswer[] = []
  for (let attempt = 0; attempt < maxAttempts && Date.now() < deadline; attempt++) {
    const baseUrl = baseUrls[attempt % baseUrls.length]!
    let answer: OrderAnswer
    try {
      answer = { baseUrl, response: await postOrder(baseUrl, options) }
    }
    catch (error) {
      answer = { baseUrl, networkError: error as Error }
    }
    answers.push(answer)
    if (answer.response && !isRetryable(answer.response)) return { final: answer.response, answers }
    await sleep(retryDelayMs(answer.response) + Math.random() * 50)
  }
  const seen = answers.map(answer => answer.response?.status ?? `network error (${answer.networkError?.message})`)
  throw new Error(`Idempotency-Key ${options.key}: no final answer after ${answers.length} attempts; saw ${seen.join(', ')}`)
}

/** 409 request-in-progress (not cart-already-ordered, which is final) and 503 are worth retrying. */
export function isRetryable(response: TestResponse): boolean {
  return response.status === 503 || (response.status === 409 && problemSlug(response) === 'request-in-progress')
}

function retryDelayMs(response: TestResponse | undefined): number {
  const retryAfterSeconds = Number(response?.headers.get('retry-after'))
  if (!response || !Number.isFinite(retryAfterSeconds) || retryAfterSeconds <= 0) return networkRetrySleepMs
  return Math.min(retryAfterSeconds * 1000, maxRetrySleepMs)
}
