import { randomBytes } from 'node:crypto'
import { z } from 'zod'

/**
 * The one module that reads the environment (SPEC §10). Validated with zod at start-up: a bad value
 * stops the process with a message naming the variable. Secrets are generated (and printed) only
 * when the app runs embedded or in `nuxt dev`; a deployment with DATABASE_URL must set them.
 */

const flag = (fallback: boolean) =>
  z.enum(['true', 'false', '1', '0']).optional().transform(v => (v === undefined ? fallback : v === 'true' || v === '1'))
const intIn = (min: number, max: number, fallback: number) =>
  z.string().regex(/^\d+$/, 'must be a whole number').optional()
    .transform(v => (v === undefined ? fallback : Number(v)))
    .pipe(z.number().int().min(min).max(max))
const secret = (prefix = '') => z.string().min(prefix.length + 16, `must be at least ${prefix.length + 16} characters`)
  .refine(v => v.startsWith(prefix), `must start with "${prefix}"`).optional()

const EnvSchema = z.object({
  // Read by Nitro itself; validated here so a bad value fails with a clear message.
  PORT: intIn(0, 65_535, 3000),
  DATABASE_URL: z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL').optional(),
  REDIS_URL: z.string().regex(/^rediss?:\/\//, 'must be a redis:// URL').optional(),
  REDIS_KEY_PREFIX: z.string().regex(/^[\w:.-]{1,64}$/).default('ic:'),
  PGLITE_DIR: z.string().min(1).default('.data/pglite'),
  MIGRATIONS_DIR: z.string().min(1).default('drizzle'),
  OPS_TOKEN: secret(),
  WEBHOOK_STANDARD_SECRET: secret('whsec_'),
  WEBHOOK_STRIPE_SECRET: secret(),
  MIDTRANS_SERVER_KEY: secret(),
  FAULTS_ENABLED: flag(false),
  IDEMPOTENCY_TTL_SECONDS: intIn(60, 60 * 60 * 24 * 30, 60 * 60 * 24),
  WEBHOOK_IDEMPOTENCY_TTL_SECONDS: intIn(60, 60 * 60 * 24 * 365, 60 * 60 * 24 * 30),
  /** Lease of a claimed record (leased operations), renewed every third of it while the owner runs. */
  IDEMPOTENCY_LEASE_MS: intIn(200, 10 * 60 * 1000, 30_000),
  /** TTL of the processing lock on (scope, key), renewed every third of it while the owner runs. */
  IDEMPOTENCY_LOCK_TTL_MS: intIn(100, 60_000, 5000),
  /** This instance's cache of finished responses, bounded in bytes (replays without a database read). */
  IDEMPOTENCY_REPLAY_CACHE_BYTES: intIn(0, 2 ** 31, 32 * 2 ** 20),
  WORKER_ENABLED: flag(true),
  WORKER_CONCURRENCY: intIn(1, 64, 4),
  /** Names this process in jobs.locked_by and logs; default `<hostname>:<pid>`. */
  WORKER_ID: z.string().regex(/^[\w:.@-]{1,64}$/).optional(),
  /** Fallback poll when no notification arrives (PGlite always polls). */
  JOB_POLL_INTERVAL_MS: intIn(10, 60_000, 1000),
  /** Retry n waits min(cap, base × 2^(n-1)), ±20 % jitter. */
  JOB_BACKOFF_BASE_MS: intIn(1, 60 * 60 * 1000, 1000),
  JOB_BACKOFF_CAP_MS: intIn(1, 24 * 60 * 60 * 1000, 60 * 60 * 1000),
  /** A running job whose heartbeat is older than this is rescued (heartbeats every third of it). */
  JOB_HEARTBEAT_TIMEOUT_MS: intIn(100, 60 * 60 * 1000, 60_000),
  /** TTL of the resource lock (`lock:order:<id>`); renewed every third of it while the job runs. */
  JOB_LOCK_TTL_MS: intIn(50, 10 * 60 * 1000, 30_000),
  /** How long a job whose resource is locked by another waits before it is tried again. */
  JOB_LOCK_BUSY_DELAY_MS: intIn(1, 60_000, 250),
  /** On SIGTERM, running jobs get this long to finish before they are released (attempt given back). */
  JOB_SHUTDOWN_GRACE_MS: intIn(0, 5 * 60 * 1000, 10_000),
  /** How often a standalone worker runs rescue and retention (the app uses Nitro scheduled tasks). */
  JOB_MAINTENANCE_INTERVAL_MS: intIn(50, 60 * 60 * 1000, 15_000),
  /** Completed jobs are deleted after this many days; dead letters stay until redriven. */
  JOB_RETENTION_DAYS: intIn(0, 3650, 7),
  /**
   * The simulated provider's routes (/api/mockpay/*) and deliveries. Default: on when embedded or
   * in development, off otherwise.
   */
  MOCKPAY_ENABLED: z.enum(['true', 'false', '1', '0']).optional(),
  /** Where mockpay delivers its signed `standard` webhooks; default this instance's own endpoint. */
  MOCKPAY_WEBHOOK_URL: z.url({ protocol: /^https?$/ }).optional(),
  /** Chaos defaults for each payment event (a confirm request may override them): extra copies… */
  MOCKPAY_DUPLICATES: intIn(0, 10, 1),
  /** …a random delay of up to this much per delivery… */
  MOCKPAY_MAX_DELAY_MS: intIn(0, 60_000, 300),
  /** …and the intent's earlier events delivered again with each new one, so they arrive out of order. */
  MOCKPAY_REORDER: flag(true),
  /**
   * The checkout page's demo store: a sealed session cookie bound to the demo tenant, so the page
   * works without pasting keys. Default: on when embedded or in development, off otherwise.
   */
  CHECKOUT_DEMO_ENABLED: z.enum(['true', 'false', '1', '0']).optional(),
  /** Seals the checkout session cookie (≥ 32 characters); generated when embedded or in development. */
  SESSION_PASSWORD: z.string().min(32, 'must be at least 32 characters').optional(),
  /** One request_log row per API request (the evidence locker reads them); off only to measure their cost. */
  REQUEST_LOG_ENABLED: flag(true),
  /** request_log rows (the evidence of who asked what) are deleted by the retention task after this many days. */
  REQUEST_LOG_RETENTION_DAYS: intIn(1, 3650, 14),
  LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error', 'silent']).default('info'),
})

type Env = z.infer<typeof EnvSchema>
const secretNames = ['OPS_TOKEN', 'WEBHOOK_STANDARD_SECRET', 'WEBHOOK_STRIPE_SECRET', 'MIDTRANS_SERVER_KEY'] as const
type SecretName = typeof secretNames[number]

export type AppConfig = Omit<Env, SecretName | 'MOCKPAY_ENABLED' | 'MOCKPAY_WEBHOOK_URL' | 'CHECKOUT_DEMO_ENABLED' | 'SESSION_PASSWORD'> & Record<SecretName, string> & {
  MOCKPAY_ENABLED: boolean
  CHECKOUT_DEMO_ENABLED: boolean
  SESSION_PASSWORD: string
  MOCKPAY_WEBHOOK_URL: string
  /** No DATABASE_URL: PGlite in PGLITE_DIR, one process. */
  embedded: boolean
  /** Secrets that were generated because they were missing (dev/embedded only). */
  generatedSecrets: SecretName[]
}

export class ConfigError extends Error {}

function generateSecret(name: SecretName): string {
  const raw = randomBytes(24)
  if (name === 'WEBHOOK_STANDARD_SECRET') return `whsec_${raw.toString('base64')}`
  if (name === 'OPS_TOKEN') return `ops_${raw.toString('base64url')}`
  return raw.toString('base64url')
}

export interface ParseOptions {
  /** `nuxt dev`: missing secrets are generated. */
  dev?: boolean
  /** A standalone worker verifies no signatures and serves no API: it needs no secrets. */
  secretsOptional?: boolean
}

export function parseConfig(env: Record<string, string | undefined>, options: ParseOptions = {}): AppConfig {
  // Empty strings mean "unset": shells and .env files often export them that way.
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''))
  const parsed = EnvSchema.safeParse(present)
  if (!parsed.success) {
    const lines = parsed.error.issues.map(i => `  ${i.path.join('.')}: ${i.message}`)
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`)
  }
  const values = parsed.data
  const embedded = !values.DATABASE_URL
  const mayGenerate = embedded || options.dev === true || options.secretsOptional === true
  const missing = secretNames.filter(name => !values[name])
  if (missing.length && !mayGenerate) {
    throw new ConfigError(`Missing required secrets: ${missing.join(', ')}. Set them in the environment; `
      + 'they are generated only when the app runs embedded (no DATABASE_URL) or in development.')
  }
  const secrets = Object.fromEntries(secretNames.map(name => [name, values[name] ?? generateSecret(name)])) as Record<SecretName, string>
  const onByDefault = (value: string | undefined) => (value === undefined ? embedded || options.dev === true : ['true', '1'].includes(value))
  const checkoutDemoEnabled = onByDefault(values.CHECKOUT_DEMO_ENABLED)
  if (checkoutDemoEnabled && !values.SESSION_PASSWORD && !mayGenerate) {
    // Every instance must seal and open the same cookies.
    throw new ConfigError('Missing SESSION_PASSWORD (at least 32 characters): it is required when CHECKOUT_DEMO_ENABLED=true with DATABASE_URL.')
  }
  return {
    ...values,
    ...secrets,
    MOCKPAY_ENABLED: onByDefault(values.MOCKPAY_ENABLED),
    CHECKOUT_DEMO_ENABLED: checkoutDemoEnabled,
    SESSION_PASSWORD: values.SESSION_PASSWORD ?? randomBytes(32).toString('base64url'),
    MOCKPAY_WEBHOOK_URL: values.MOCKPAY_WEBHOOK_URL ?? `http://127.0.0.1:${values.PORT}/api/webhooks/standard`,
    embedded,
    generatedSecrets: missing,
  }
}

let current: AppConfig | undefined

/** The process-wide configuration, parsed from process.env on first use. */
export function useConfig(): AppConfig {
  current ??= parseConfig(process.env, { dev: import.meta.dev })
  return current
}

/** For entry points other than the app (the standalone worker): parse once with their options. */
export function initConfig(options: ParseOptions): AppConfig {
  current = parseConfig(process.env, options)
  return current
}
