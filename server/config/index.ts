import { randomBytes } from 'node:crypto'
import { resolve } from 'node:path'
import { z } from 'zod'
import { keptSecrets } from './dev-secrets'

/**
 * The one module that reads the environment (SPEC §10). Validated with zod at start-up: a bad value
 * stops the process with a message naming the variable. Secrets are generated (and printed) only
 * when the app runs embedded or in `nuxt dev`, once, and kept in DEV_SECRETS_FILE; a deployment with
 * DATABASE_URL must set them.
 */

const flag = (fallback: boolean) =>
  z.enum(['true', 'false', '1', '0']).optional().transform(v => (v === undefined ? fallback : v === 'true' || v === '1'))
const intIn = (min: number, max: number, fallback: number) =>
  z.string().regex(/^\d+$/, 'must be a whole number').optional()
    .transform(v => (v === undefined ? fallback : Number(v)))
    .pipe(z.number().int().min(min).max(max))
/** An opaque shared secret (a token, Stripe's endpoint secret, Midtrans' server key). */
const secret = (prefix = '') => z.string().min(prefix.length + 16, `must be at least ${prefix.length + 16} characters`)
  .refine(v => v.startsWith(prefix), `must start with "${prefix}"`).optional()

/** The fewest key bytes a `whsec_` signing secret may decode to. */
export const MIN_SIGNING_KEY_BYTES = 24

/**
 * The HMAC key of a `whsec_` secret, or undefined unless the rest is canonical base64 (decoding and
 * encoding again gives it back, padding optional) of at least MIN_SIGNING_KEY_BYTES. Node's decoder
 * skips what is not base64, so `whsec_!!!!…` would otherwise become an empty key that anyone can sign with.
 */
export function signingKeyOf(value: string): Buffer | undefined {
  if (!value.startsWith('whsec_')) return undefined
  const encoded = value.slice('whsec_'.length)
  const key = Buffer.from(encoded, 'base64')
  const canonical = key.toString('base64')
  if (encoded !== canonical && encoded !== canonical.replace(/=+$/, '')) return undefined
  return key.length >= MIN_SIGNING_KEY_BYTES ? key : undefined
}

export const paymentProviderNames = ['mockpay', 'stripe', 'midtrans'] as const
export type PaymentProviderName = typeof paymentProviderNames[number]

/** A Standard Webhooks signing secret: `whsec_` and the base64 of its key. */
const signingSecret = () => z.string()
  .refine(v => signingKeyOf(v) !== undefined, `must be "whsec_" followed by the canonical base64 of a key of at least ${MIN_SIGNING_KEY_BYTES} random bytes`)
  .optional()

const EnvSchema = z.object({
  // Read by Nitro itself; validated here so a bad value fails with a clear message.
  PORT: intIn(0, 65_535, 3000),
  DATABASE_URL: z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL').optional(),
  /**
   * `transaction`: DATABASE_URL is a transaction pooler (PgBouncer, Supavisor, Neon pooled, RDS
   * Proxy): no named prepared statements, no startup parameters, no session state between transactions.
   */
  DATABASE_POOL_MODE: z.enum(['session', 'transaction']).default('session'),
  /** A direct (unpooled) connection for migrations and LISTEN, when DATABASE_URL is a pooler. */
  DATABASE_DIRECT_URL: z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL').optional(),
  /** PEM file of the CA that signed the Postgres server's certificate (sslmode=verify-full). */
  DATABASE_CA_FILE: z.string().min(1).optional(),
  REDIS_URL: z.string().regex(/^rediss?:\/\//, 'must be a redis:// URL').optional(),
  /** A Redis Cluster: `host:port,host:port,…` (any of its masters; the rest are discovered). */
  REDIS_CLUSTER_NODES: z.string().regex(/^[\w.-]+:\d+(,[\w.-]+:\d+)*$/, 'must be host:port,host:port,…').optional(),
  /** Redis Sentinels: `host:port,host:port,…`, with REDIS_SENTINEL_NAME. */
  REDIS_SENTINELS: z.string().regex(/^[\w.-]+:\d+(,[\w.-]+:\d+)*$/, 'must be host:port,host:port,…').optional(),
  /** The master's name the sentinels monitor (`sentinel monitor <name> …`). */
  REDIS_SENTINEL_NAME: z.string().regex(/^[\w.-]{1,64}$/).optional(),
  /** Password (and user, for ACLs) of the Redis nodes in a cluster or behind sentinels; REDIS_URL carries its own. */
  REDIS_USERNAME: z.string().min(1).optional(),
  REDIS_PASSWORD: z.string().min(1).optional(),
  /** TLS to every Redis node (rediss:// in REDIS_URL says the same). */
  REDIS_TLS: flag(false),
  /** PEM file of the CA that signed the Redis servers' certificates (TLS is verified against it). */
  REDIS_CA_FILE: z.string().min(1).optional(),
  REDIS_KEY_PREFIX: z.string().regex(/^[\w:.-]{1,64}$/).default('ic:'),
  PGLITE_DIR: z.string().min(1).default('.data/pglite'),
  /** Where generated local secrets are kept between restarts (mode 0600; .data is not in the repository). */
  DEV_SECRETS_FILE: z.string().min(1).default('.data/dev-secrets.json'),
  /** Overrides the migrations shipped with the build (see shippedMigrationsDir). */
  MIGRATIONS_DIR: z.string().min(1).optional(),
  OPS_TOKEN: secret(),
  WEBHOOK_STANDARD_SECRET: signingSecret(),
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
  /**
   * Jobs a worker claims beyond its free slots, held (claimed, heart-beaten) in a local buffer so a
   * finished job's slot is refilled without a round trip; given back on shutdown. 0: claim only free slots.
   */
  WORKER_PREFETCH: intIn(0, 256, 8),
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
  /** A job may snooze (run later without spending an attempt) this many times; the next snooze counts as a failed attempt. */
  JOB_MAX_SNOOZES: intIn(0, 10_000, 20),
  /** The longest a snooze may ask for; longer requests (a provider's Retry-After of days) are cut to it. */
  JOB_MAX_SNOOZE_MS: intIn(1, 24 * 60 * 60 * 1000, 60 * 60 * 1000),
  /** How long a job whose resource is locked by another waits before it is tried again. */
  JOB_LOCK_BUSY_DELAY_MS: intIn(1, 60_000, 250),
  /** On SIGTERM, running jobs get this long to finish before they are released (attempt given back). */
  JOB_SHUTDOWN_GRACE_MS: intIn(0, 5 * 60 * 1000, 10_000),
  /** How often a standalone worker runs rescue and retention (the app uses Nitro scheduled tasks). */
  JOB_MAINTENANCE_INTERVAL_MS: intIn(50, 60 * 60 * 1000, 15_000),
  /** Completed jobs are deleted after this many days; dead letters stay until redriven. */
  JOB_RETENTION_DAYS: intIn(0, 3650, 7),
  /**
   * Where payment.create_intent asks for a payment: mockpay (the simulator), stripe or midtrans.
   * Default mockpay when embedded or in development; required with DATABASE_URL.
   */
  PAYMENT_PROVIDER: z.enum(paymentProviderNames).optional(),
  /** Stripe's secret API key (`sk_test_…`, `sk_live_…` or a restricted `rk_…`): required with PAYMENT_PROVIDER=stripe. */
  STRIPE_SECRET_KEY: z.string().regex(/^(sk|rk)_(test|live)_\w{8,}$/, 'must be a Stripe secret key (sk_test_…, sk_live_…, rk_test_… or rk_live_…)').optional(),
  /** Where the Stripe client sends its requests (protocol, host, port): a local stand-in in tests. Unset: api.stripe.com. */
  STRIPE_API_BASE: z.url({ protocol: /^https?$/ }).optional(),
  /** Where the Midtrans client sends Core API requests. Unset: Midtrans' sandbox, or production with MIDTRANS_IS_PRODUCTION. */
  MIDTRANS_API_BASE: z.url({ protocol: /^https?$/ }).optional(),
  MIDTRANS_IS_PRODUCTION: flag(false),
  /** One call to the payment provider may take this long before it counts as failed (and is retried). */
  PAYMENT_PROVIDER_TIMEOUT_MS: intIn(100, 120_000, 20_000),
  /** An order still awaiting payment this long after its last change is looked up at the provider (the webhook that never came). */
  PAYMENT_RECONCILE_AFTER_SECONDS: intIn(0, 30 * 24 * 60 * 60, 15 * 60),
  /**
   * The simulated provider's routes (/api/mockpay/*) and deliveries. Default: on when
   * PAYMENT_PROVIDER is mockpay, off otherwise.
   */
  MOCKPAY_ENABLED: z.enum(['true', 'false', '1', '0']).optional(),
  /** Where mockpay delivers its signed webhooks; default this instance's own /api/webhooks/mockpay. */
  MOCKPAY_WEBHOOK_URL: z.url({ protocol: /^https?$/ }).optional(),
  /**
   * mockpay's own signing secret (`whsec_…`), never the real provider's: a simulator that anyone can
   * drive must not be able to sign what /api/webhooks/standard accepts.
   */
  MOCKPAY_WEBHOOK_SECRET: signingSecret(),
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
/** Required in a deployment; generated (and printed) when embedded or in development. */
const secretNames = ['OPS_TOKEN', 'WEBHOOK_STANDARD_SECRET', 'WEBHOOK_STRIPE_SECRET', 'MIDTRANS_SERVER_KEY'] as const
type SecretName = typeof secretNames[number] | 'MOCKPAY_WEBHOOK_SECRET'
/** Every secret a local run may generate (the session password is kept but never printed). */
const localSecretNames = [...secretNames, 'MOCKPAY_WEBHOOK_SECRET', 'SESSION_PASSWORD'] as const
type LocalSecretName = typeof localSecretNames[number]

/** A setting that is on although it is unsafe in production, as start-up logs it and /api/ready shows it. */
export interface ConfigWarning {
  setting: 'FAULTS_ENABLED' | 'MOCKPAY_ENABLED' | 'CHECKOUT_DEMO_ENABLED'
  detail: string
}

export type AppConfig = Omit<Env, SecretName | 'PAYMENT_PROVIDER' | 'MOCKPAY_ENABLED' | 'MOCKPAY_WEBHOOK_URL' | 'CHECKOUT_DEMO_ENABLED' | 'SESSION_PASSWORD'> & Record<typeof secretNames[number], string> & {
  PAYMENT_PROVIDER: PaymentProviderName
  MOCKPAY_ENABLED: boolean
  CHECKOUT_DEMO_ENABLED: boolean
  SESSION_PASSWORD: string
  MOCKPAY_WEBHOOK_URL: string
  /** Set whenever MOCKPAY_ENABLED; undefined otherwise (nothing signs or verifies mockpay deliveries then). */
  MOCKPAY_WEBHOOK_SECRET: string | undefined
  /** No DATABASE_URL: PGlite in PGLITE_DIR, one process. */
  embedded: boolean
  /** Secrets that were generated because they were missing (dev/embedded only). */
  generatedSecrets: SecretName[]
  /** The file the generated secrets are kept in; undefined when none were generated or they are not kept. */
  secretsFile: string | undefined
  /** Test and demo features switched on in a deployment (DATABASE_URL set, not in development). */
  warnings: ConfigWarning[]
}

export class ConfigError extends Error {}

function generateSecret(name: LocalSecretName): string {
  if (name === 'SESSION_PASSWORD') return randomBytes(32).toString('base64url')
  const raw = randomBytes(24)
  if (name === 'WEBHOOK_STANDARD_SECRET' || name === 'MOCKPAY_WEBHOOK_SECRET') return `whsec_${raw.toString('base64')}`
  if (name === 'OPS_TOKEN') return `ops_${raw.toString('base64url')}`
  return raw.toString('base64url')
}

export interface ParseOptions {
  /** `nuxt dev`: missing secrets are generated. */
  dev?: boolean
  /** Generated secrets are read from DEV_SECRETS_FILE, and written there the first time (dev and embedded only). */
  keepSecrets?: boolean
  /** A standalone worker verifies no signatures and serves no API: it needs no secrets but mockpay's signing one. */
  secretsOptional?: boolean
}

function warningsOf(config: Pick<AppConfig, 'FAULTS_ENABLED' | 'MOCKPAY_ENABLED' | 'CHECKOUT_DEMO_ENABLED'>): ConfigWarning[] {
  const warnings: ConfigWarning[] = []
  if (config.FAULTS_ENABLED) {
    warnings.push({ setting: 'FAULTS_ENABLED', detail: 'Any client can make a request crash the process, drop its connection or fail its commit with the X-Fault header. Tests only: unset it in production.' })
  }
  if (config.MOCKPAY_ENABLED) {
    warnings.push({ setting: 'MOCKPAY_ENABLED', detail: 'The simulated payment provider is on: anyone can mark an order paid or refunded through /api/mockpay without paying, and orders ask mockpay for their payment intents. Demo and tests only: set MOCKPAY_ENABLED=false in production.' })
  }
  if (config.CHECKOUT_DEMO_ENABLED) {
    warnings.push({ setting: 'CHECKOUT_DEMO_ENABLED', detail: 'The demo checkout is on: any visitor gets a session that places orders as the demo tenant without a secret key. Demo only: set CHECKOUT_DEMO_ENABLED=false in production.' })
  }
  return warnings
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
  const local = embedded || options.dev === true
  const mayGenerate = local || options.secretsOptional === true
  const missing: SecretName[] = secretNames.filter(name => !values[name])
  if (missing.length && !mayGenerate) {
    throw new ConfigError(`Missing required secrets: ${missing.join(', ')}. Set them in the environment; `
      + 'they are generated only when the app runs embedded (no DATABASE_URL) or in development.')
  }
  const toKeep = local && options.keepSecrets ? localSecretNames.filter(name => !values[name]) : []
  const secretsFile = toKeep.length ? resolve(values.DEV_SECRETS_FILE) : undefined
  const kept = secretsFile ? keepSecrets(secretsFile, toKeep) : {}
  const generate = (name: LocalSecretName) => kept[name] ?? generateSecret(name)
  const secrets = Object.fromEntries(secretNames.map(name => [name, values[name] ?? generate(name)])) as Record<typeof secretNames[number], string>
  const onByDefault = (value: string | undefined) => (value === undefined ? local : ['true', '1'].includes(value))
  const paymentProvider = resolvePaymentProvider(values, local)
  const mockpayEnabled = values.MOCKPAY_ENABLED === undefined ? paymentProvider === 'mockpay' : ['true', '1'].includes(values.MOCKPAY_ENABLED)
  if (paymentProvider === 'mockpay' && !mockpayEnabled) {
    throw new ConfigError('PAYMENT_PROVIDER=mockpay needs MOCKPAY_ENABLED: the simulated provider is the one orders would ask. Choose PAYMENT_PROVIDER=stripe or midtrans, or unset MOCKPAY_ENABLED.')
  }
  let mockpaySecret: string | undefined
  if (mockpayEnabled) {
    mockpaySecret = values.MOCKPAY_WEBHOOK_SECRET
    if (!mockpaySecret) {
      // The standalone worker signs mockpay's deliveries too: a generated key would sign what no instance accepts.
      if (!local) {
        throw new ConfigError('Missing MOCKPAY_WEBHOOK_SECRET (whsec_ and the base64 of at least 24 random bytes): it is required when mockpay is on (MOCKPAY_ENABLED=true, or PAYMENT_PROVIDER=mockpay) '
          + 'with DATABASE_URL, the same on every instance and worker, and different from WEBHOOK_STANDARD_SECRET.')
      }
      mockpaySecret = generate('MOCKPAY_WEBHOOK_SECRET')
      missing.push('MOCKPAY_WEBHOOK_SECRET')
    }
    // Both were validated above: each has a key.
    if (signingKeyOf(mockpaySecret)!.equals(signingKeyOf(secrets.WEBHOOK_STANDARD_SECRET)!)) {
      throw new ConfigError('MOCKPAY_WEBHOOK_SECRET must differ from WEBHOOK_STANDARD_SECRET: with the same key, anyone who drives mockpay could sign events for /api/webhooks/standard.')
    }
  }
  const checkoutDemoEnabled = onByDefault(values.CHECKOUT_DEMO_ENABLED)
  if (checkoutDemoEnabled && !values.SESSION_PASSWORD && !mayGenerate) {
    // Every instance must seal and open the same cookies.
    throw new ConfigError('Missing SESSION_PASSWORD (at least 32 characters): it is required when CHECKOUT_DEMO_ENABLED=true with DATABASE_URL.')
  }
  const switches = { FAULTS_ENABLED: values.FAULTS_ENABLED, MOCKPAY_ENABLED: mockpayEnabled, CHECKOUT_DEMO_ENABLED: checkoutDemoEnabled }
  return {
    ...values,
    ...secrets,
    ...switches,
    PAYMENT_PROVIDER: paymentProvider,
    MOCKPAY_WEBHOOK_SECRET: mockpaySecret,
    SESSION_PASSWORD: values.SESSION_PASSWORD ?? generate('SESSION_PASSWORD'),
    MOCKPAY_WEBHOOK_URL: values.MOCKPAY_WEBHOOK_URL ?? `http://127.0.0.1:${values.PORT}/api/webhooks/mockpay`,
    embedded,
    generatedSecrets: missing,
    secretsFile,
    warnings: local ? [] : warningsOf(switches),
  }
}

/** The kept local secrets, each checked as the environment's value would be. */
function keepSecrets(file: string, names: LocalSecretName[]): Partial<Record<LocalSecretName, string>> {
  try {
    return keptSecrets(file, names, {
      generate: name => generateSecret(name as LocalSecretName),
      valid: (name, value) => EnvSchema.shape[name as LocalSecretName].safeParse(value).success,
    })
  }
  catch (error) {
    throw new ConfigError(`Cannot keep the development secrets in ${file} (DEV_SECRETS_FILE): ${error instanceof Error ? error.message : String(error)}`)
  }
}

/**
 * The payment provider, and what it needs. Its own keys are never generated: a made-up Stripe key or
 * Midtrans server key would only fail at the provider, so they are required even when embedded.
 */
function resolvePaymentProvider(values: Env, local: boolean): PaymentProviderName {
  const provider = values.PAYMENT_PROVIDER ?? (local ? 'mockpay' : undefined)
  if (!provider) {
    throw new ConfigError('Missing PAYMENT_PROVIDER (mockpay, stripe or midtrans): it is required with DATABASE_URL. '
      + 'mockpay is the built-in simulator (demo and tests only); stripe needs STRIPE_SECRET_KEY, midtrans needs MIDTRANS_SERVER_KEY.')
  }
  if (provider === 'stripe' && !values.STRIPE_SECRET_KEY) {
    throw new ConfigError('Missing STRIPE_SECRET_KEY: PAYMENT_PROVIDER=stripe creates PaymentIntents with it. Use a test-mode key (sk_test_…) from the Stripe dashboard to try it.')
  }
  if (provider === 'midtrans' && !values.MIDTRANS_SERVER_KEY) {
    throw new ConfigError('Missing MIDTRANS_SERVER_KEY: PAYMENT_PROVIDER=midtrans charges and checks transactions with it (and verifies notifications). Use the sandbox server key from the Midtrans dashboard to try it.')
  }
  return provider
}

let current: AppConfig | undefined

/** The process-wide configuration, parsed from process.env on first use. */
export function useConfig(): AppConfig {
  current ??= parseConfig(process.env, { dev: import.meta.dev, keepSecrets: true })
  return current
}

/** For entry points other than the app (the standalone worker): parse once with their options. */
export function initConfig(options: ParseOptions): AppConfig {
  current = parseConfig(process.env, options)
  return current
}
