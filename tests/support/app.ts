import { setTimeout as sleep } from 'node:timers/promises'
import { serverEntry } from './build-once'
import { type ManagedProcess, spawnManaged, stopAll } from './processes'
import { appDatabaseEnv } from './postgres-topology'
import { appRedisEnv } from './redis-topologies'
import { freePort, uniqueRedisPrefix } from './services'

/**
 * The built server (`.output`, produced by the e2e global setup) as a real child process, so the
 * suites exercise what ships: env parsing, start-up, graceful shutdown, crashes.
 */

/** Fixed key bytes of the Standard Webhooks secret (`whsec_` + base64), so tests can sign payloads. */
const webhookStandardKey = Buffer.from(Array.from({ length: 32 }, (_, i) => i + 1))
/** mockpay's own signing key: never the Standard Webhooks one. */
const mockpayWebhookKey = Buffer.from(Array.from({ length: 32 }, (_, i) => 200 - i))

export const testSecrets = {
  opsToken: 'ops_test_token_0123456789abcdef',
  webhookStandardKey,
  webhookStandardSecret: `whsec_${webhookStandardKey.toString('base64')}`,
  mockpayWebhookKey,
  mockpayWebhookSecret: `whsec_${mockpayWebhookKey.toString('base64')}`,
  webhookStripeSecret: 'stripe_test_secret_0123456789',
  midtransServerKey: 'midtrans_test_server_key_0123',
  sessionPassword: 'session_test_password_0123456789abcdef',
  /** The instances of one test share their Redis replay tier, so they share the key that signs it. */
  replayCacheSecret: 'replay_cache_test_secret_0123456789abcdef',
} as const

/** The in-app worker with short timings, so jobs, retries and dead letters happen within a test. */
export const fastJobsEnv = {
  WORKER_ENABLED: 'true',
  JOB_POLL_INTERVAL_MS: '50',
  JOB_BACKOFF_BASE_MS: '100',
  JOB_BACKOFF_CAP_MS: '1000',
} as const

export interface StartAppOptions {
  /** Omitted: the app runs embedded on PGlite. */
  databaseUrl?: string
  /** Omitted or null: no Redis. The shared test Redis's URL stands for its topology in this run (see appRedisEnv). */
  redisUrl?: string | null
  /**
   * Redis settings besides REDIS_URL (REDIS_CLUSTER_NODES, REDIS_SENTINELS and REDIS_SENTINEL_NAME,
   * REDIS_CA_FILE, …), applied before `env`.
   */
  redisEnv?: Record<string, string>
  /** Applied last, so it overrides every default above (e.g. a shared REDIS_KEY_PREFIX). */
  env?: Record<string, string>
  /** Names the instance in its Redis prefix and in error messages. */
  label?: string
  /** What counts as started: `/api/ready` answering 200 (default), or only `/api/health` (listening). */
  until?: 'ready' | 'listening'
}

export interface AppProcess extends ManagedProcess {
  /** http://127.0.0.1:PORT */
  url: string
  port: number
  /** The REDIS_KEY_PREFIX its Redis keys (e.g. processing locks) live under; undefined without Redis. */
  redisKeyPrefix: string | undefined
}

const readyTimeoutMs = 60_000
const readyPollMs = 100

/**
 * The environment every test process of the app gets: fixed secrets, faults on, mockpay on (the
 * payment provider orders ask for intents, with its own signing secret), its own Redis prefix, no
 * worker unless asked (suites that count jobs start workers explicitly).
 */
export function appEnv(options: Pick<StartAppOptions, 'databaseUrl' | 'redisUrl' | 'redisEnv' | 'env' | 'label'>): Record<string, string | undefined> {
  // The test process's own service URLs (and Redis settings) must not leak into an instance that was given none.
  const env: Record<string, string | undefined> = Object.fromEntries(Object.entries(process.env)
    .filter(([name]) => name !== 'DATABASE_URL' && !(redisTopologySettings as readonly string[]).includes(name)))
  Object.assign(env, {
    HOST: '127.0.0.1',
    NODE_ENV: 'production',
    REDIS_KEY_PREFIX: uniqueRedisPrefix(options.label ?? 'app'),
    OPS_TOKEN: testSecrets.opsToken,
    WEBHOOK_STANDARD_SECRET: testSecrets.webhookStandardSecret,
    WEBHOOK_STRIPE_SECRET: testSecrets.webhookStripeSecret,
    MIDTRANS_SERVER_KEY: testSecrets.midtransServerKey,
    SESSION_PASSWORD: testSecrets.sessionPassword,
    REPLAY_CACHE_SECRET: testSecrets.replayCacheSecret,
    FAULTS_ENABLED: 'true',
    PAYMENT_PROVIDER: 'mockpay',
    MOCKPAY_ENABLED: 'true',
    MOCKPAY_WEBHOOK_SECRET: testSecrets.mockpayWebhookSecret,
    LOG_LEVEL: 'warn',
    WORKER_ENABLED: 'false',
  })
  if (options.databaseUrl) Object.assign(env, appDatabaseEnv(options.databaseUrl))
  if (options.redisUrl) Object.assign(env, appRedisEnv(options.redisUrl))
  Object.assign(env, options.redisEnv, options.env)
  return env
}

/** The settings that connect an instance to Redis (one of the first three names its topology). */
const redisTopologySettings = ['REDIS_URL', 'REDIS_CLUSTER_NODES', 'REDIS_SENTINELS', 'REDIS_SENTINEL_NAME', 'REDIS_USERNAME', 'REDIS_PASSWORD', 'REDIS_TLS', 'REDIS_CA_FILE'] as const
const usesRedis = (env: Record<string, string | undefined>) => Boolean(env.REDIS_URL || env.REDIS_CLUSTER_NODES || env.REDIS_SENTINELS)

export async function startApp(options: StartAppOptions = {}): Promise<AppProcess> {
  const label = options.label ?? 'app'
  const port = await freePort()
  const env = appEnv(options)
  const child = spawnManaged({ label, args: [serverEntry], env: { ...env, PORT: String(port) } })
  const app: AppProcess = { ...child, url: `http://127.0.0.1:${port}`, port, redisKeyPrefix: usesRedis(env) ? env.REDIS_KEY_PREFIX : undefined }

  const deadline = Date.now() + readyTimeoutMs
  while (Date.now() < deadline) {
    if (child.hasExited()) {
      throw new Error(`${label} exited with code ${await child.exited} before it was ready. Output:\n${child.output()}`)
    }
    if (await answers200(`${app.url}${options.until === 'listening' ? '/api/health' : '/api/ready'}`)) return app
    await sleep(readyPollMs)
  }
  await app.stop()
  throw new Error(`${label} was not ready within ${readyTimeoutMs / 1000} s. Output:\n${child.output()}`)
}

async function answers200(url: string): Promise<boolean> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(2_000) })
    await response.body?.cancel()
    return response.status === 200
  }
  catch {
    // Not listening yet, or too slow to answer: poll again.
    return false
  }
}

export { stopAll }
