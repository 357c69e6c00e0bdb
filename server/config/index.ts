import { createHmac, randomBytes } from 'node:crypto'
import { accessSync, constants } from 'node:fs'
import { resolve } from 'node:path'
import { z } from 'zod'
import { keptSecrets } from './dev-secrets'

/**
 * The one module that reads the environment (docs/configuration.md). Validated with zod at
 * start-up: a bad or missing value stops the process with one message that names every setting to
 * fix. Secrets are generated (and printed) only when the app runs embedded or in `nuxt dev`, once,
 * and kept in DEV_SECRETS_FILE; a deployment with DATABASE_URL sets the ones what it turns on needs
 * (see parseConfig). `.env.example` lists every variable; `npm run secrets` prints fresh secrets.
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

/**
 * An address, or a display name and the address in angle brackets; the domain is a dot-atom (RFC
 * 5322), so it can be the right-hand side of a Message-ID as it is.
 */
const mailboxPattern = /^(?:[^<>@\r\n]*<[^\s<>@]+@([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*)>|[^\s<>@]+@([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*))$/

/** The domain of SMTP_FROM's address. */
export function mailDomainOf(from: string): string {
  const match = mailboxPattern.exec(from.trim())
  if (!match) throw new Error(`not a mail address: ${from}`)
  return match[1] ?? match[2]!
}

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
  /**
   * Connections each instance keeps to Postgres. Fewer than the default pay off when the instances'
   * connections together outnumber Postgres' cores several times (see docs/deploying.md).
   */
  DATABASE_POOL_SIZE: intIn(1, 100, 10),
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
  /** An order unpaid this long is canceled (`cancelReason: "expired"`) and its stock released (docs/inventory.md#unpaid-orders-expire). */
  ORDER_PAYMENT_TTL_SECONDS: intIn(1, 60 * 60 * 24 * 30, 1800),
  /** Lease of a claimed record (leased operations), renewed every third of it while the owner runs. */
  IDEMPOTENCY_LEASE_MS: intIn(200, 10 * 60 * 1000, 5_000),
  /** TTL of the processing lock on (scope, key), renewed every third of it while the owner runs. */
  IDEMPOTENCY_LOCK_TTL_MS: intIn(100, 60_000, 5000),
  /** This instance's cache of finished responses, bounded in bytes (replays without a database read). */
  IDEMPOTENCY_REPLAY_CACHE_BYTES: intIn(0, 2 ** 31, 32 * 2 ** 20),
  /**
   * Signs the responses the instances share through Redis (HMAC-SHA256), so that a write to Redis
   * cannot plant one; the same on every instance on one Redis. Unset: derived from OPS_TOKEN, which
   * every serving instance of a deployment already shares.
   */
  REPLAY_CACHE_SECRET: z.string().min(32, 'must be at least 32 characters').optional(),
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
  /** After a claim that found the queue drained, a wake-up claims no sooner than this after it: claims in batches, at this price in latency. */
  JOB_CLAIM_COALESCE_MS: intIn(0, 1000, 25),
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
  /** How often every instance (app and `npm run worker`) runs job rescue (docs/operations.md#maintenance). */
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
  /** The ledger check compares with the provider's the orders whose money moved in this many days. */
  LEDGER_CHECK_DAYS: intIn(1, 365, 7),
  /** The ledger check leaves an order whose payment or refunds changed more recently to a later run: their webhooks may still come. */
  LEDGER_CHECK_SETTLE_SECONDS: intIn(0, 24 * 60 * 60, 15 * 60),
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
  /**
   * Where the customer e-mails and invoices are sent (smtp:// with STARTTLS when offered, smtps://
   * for TLS from the start; user:password@ when the server asks). Unset: they land in the dev mailbox only.
   */
  SMTP_URL: z.url({ protocol: /^smtps?$/, hostname: /^[^\s]+$/, error: 'must be an smtp:// or smtps:// URL with a host' }).optional(),
  /** The From of those e-mails; its domain also names their Message-IDs (docs/payments-and-refunds.md#customer-e-mails). */
  SMTP_FROM: z.string().regex(mailboxPattern, 'must be an address (no-reply@shop.example) or a name and an address (Shop <no-reply@shop.example>)').default('Checkout <no-reply@localhost>'),
  /** One request_log row per API request, repeated replays counted (the evidence locker reads them); off only to measure their cost. */
  REQUEST_LOG_ENABLED: flag(true),
  /** request_log rows (the evidence of who asked what) are deleted by the retention task after this many days. */
  REQUEST_LOG_RETENTION_DAYS: intIn(1, 3650, 14),
  LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error', 'silent']).default('info'),
  /**
   * Webhook endpoints (docs/events.md#webhook-endpoints) may be http: and resolve to private,
   * loopback or link-local addresses. Default: on when embedded or in development, off otherwise.
   */
  WEBHOOK_ENDPOINTS_ALLOW_PRIVATE: z.enum(['true', 'false', '1', '0']).optional(),
  /** The waits between a failed delivery and its next attempt; after the last, the delivery gives up (about 3 days in all). */
  WEBHOOK_RETRY_SCHEDULE: z.string().regex(/^\d+[smhd](,\d+[smhd])*$/, 'must be durations like 5s,1m,2h,1d separated by commas').default('5s,1m,5m,30m,2h,5h,10h,10h,10h,10h,12h,12h'),
  /** An endpoint whose every attempt has failed for this many days is disabled, with an operator alert. */
  WEBHOOK_ENDPOINT_DISABLE_AFTER_DAYS: intIn(1, 30, 5),
  /** One delivery attempt may take this long (connect, send, answer) before it counts as failed. */
  WEBHOOK_DELIVERY_TIMEOUT_MS: intIn(100, 60_000, 10_000),
})

type Env = z.infer<typeof EnvSchema>
export type ConfigVariable = keyof typeof EnvSchema.shape
/** Every variable the configuration reads, in the schema's order (`.env.example` lists each of them). */
export const configVariableNames = Object.keys(EnvSchema.shape) as ConfigVariable[]

/**
 * The webhook endpoints (docs/webhooks.md); each is served only when it has its secret
 * (docs/configuration.md#what-a-deployment-must-set).
 */
export const webhookProviderNames = ['standard', 'stripe', 'midtrans', 'mockpay'] as const
export type WebhookProviderName = typeof webhookProviderNames[number]

/** Generated (and printed) when missing in dev/embedded; in a deployment each is required only by what needs it. */
const secretNames = ['OPS_TOKEN', 'WEBHOOK_STANDARD_SECRET', 'WEBHOOK_STRIPE_SECRET', 'MIDTRANS_SERVER_KEY'] as const
type SecretName = typeof secretNames[number] | 'MOCKPAY_WEBHOOK_SECRET'
/** Every secret this app can make (a local run keeps them; the session password is kept but never printed). */
export const generatableSecretNames = [...secretNames, 'MOCKPAY_WEBHOOK_SECRET', 'SESSION_PASSWORD'] as const
export type GeneratableSecretName = typeof generatableSecretNames[number]

/** A setting that is on although it is unsafe in production, as start-up logs it and /api/ready shows it. */
export interface ConfigWarning {
  setting: 'FAULTS_ENABLED' | 'MOCKPAY_ENABLED' | 'CHECKOUT_DEMO_ENABLED' | 'WEBHOOK_ENDPOINTS_ALLOW_PRIVATE'
  detail: string
}

export type AppConfig = Omit<Env, 'OPS_TOKEN' | 'PAYMENT_PROVIDER' | 'MOCKPAY_ENABLED' | 'MOCKPAY_WEBHOOK_URL' | 'MOCKPAY_WEBHOOK_SECRET' | 'CHECKOUT_DEMO_ENABLED' | 'SESSION_PASSWORD' | 'REPLAY_CACHE_SECRET' | 'WEBHOOK_ENDPOINTS_ALLOW_PRIVATE' | 'WEBHOOK_RETRY_SCHEDULE'> & {
  /** Required in a deployment; a standalone worker, which serves nothing, gets one nobody knows. */
  OPS_TOKEN: string
  PAYMENT_PROVIDER: PaymentProviderName
  MOCKPAY_ENABLED: boolean
  CHECKOUT_DEMO_ENABLED: boolean
  WEBHOOK_ENDPOINTS_ALLOW_PRIVATE: boolean
  /** WEBHOOK_RETRY_SCHEDULE in milliseconds: the wait after failed attempt n is the nth. */
  WEBHOOK_RETRY_SCHEDULE: number[]
  SESSION_PASSWORD: string
  /** Set, or made for this process alone (its shared replay entries are then believed by no other instance). */
  REPLAY_CACHE_SECRET: string
  MOCKPAY_WEBHOOK_URL: string
  /** Set whenever MOCKPAY_ENABLED; undefined otherwise (nothing signs or verifies mockpay deliveries then). */
  MOCKPAY_WEBHOOK_SECRET: string | undefined
  /**
   * The webhook endpoints this process serves, each with the secret it verifies with: a provider
   * without its secret is off (its route answers 404). In dev/embedded every one has a secret, but
   * Midtrans is served only with PAYMENT_PROVIDER=midtrans (see parseConfig).
   */
  webhookSecrets: Partial<Record<WebhookProviderName, string>>
  /** The keys of webhookSecrets, in webhookProviderNames' order (what /api/ready lists). */
  webhookProviders: WebhookProviderName[]
  /** No DATABASE_URL: PGlite in PGLITE_DIR, one process. */
  embedded: boolean
  /** Secrets that were generated because they were missing (dev/embedded only; a worker's unused OPS_TOKEN). */
  generatedSecrets: SecretName[]
  /** The file the generated secrets are kept in; undefined when none were generated or they are not kept. */
  secretsFile: string | undefined
  /** Test and demo features switched on in a deployment (DATABASE_URL set, not in development). */
  warnings: ConfigWarning[]
}

/** What a setting is and what it looks like, for the start-up error that names it. */
export interface SettingHelp {
  /** What it is and the shape of its value. */
  expected: string
  /** A value of that shape; `…` where it is a secret that must not be copied from here. */
  example: string
}

const flagHelp = (what: string): SettingHelp => ({ expected: `${what}: true or false (or 1 / 0)`, example: 'true' })
const msHelp = (what: string, min: number, max: number, example: number): SettingHelp => ({ expected: `${what}, in milliseconds (a whole number, ${min}–${max})`, example: String(example) })
const hostPorts = 'host:port,host:port,…'

export const settingHelp: Readonly<Record<ConfigVariable, SettingHelp>> = {
  PORT: { expected: 'the port to listen on (a whole number, 0–65535)', example: '3000' },
  DATABASE_URL: { expected: 'the Postgres connection URL (postgres://user:password@host:port/database); unset, the app runs embedded on PGlite', example: 'postgres://checkout:password@db.internal:5432/checkout' },
  DATABASE_POOL_MODE: { expected: '"session" (a direct connection or a session pooler) or "transaction" (DATABASE_URL is a transaction pooler: PgBouncer, Supavisor, Neon pooled, RDS Proxy)', example: 'transaction' },
  DATABASE_POOL_SIZE: { expected: 'the connections each instance keeps to Postgres (a whole number, 1–100)', example: '4' },
  DATABASE_DIRECT_URL: { expected: 'a direct (unpooled) postgres:// URL, used for migrations and LISTEN when DATABASE_URL is a pooler', example: 'postgres://checkout:password@db-direct.internal:5432/checkout' },
  DATABASE_CA_FILE: { expected: 'the path of a PEM file with the CA that signed the Postgres server\'s certificate', example: '/etc/ssl/certs/postgres-ca.pem' },
  REDIS_URL: { expected: 'the URL of a Redis 7+ (redis:// or rediss:// for TLS); unset, locks are in-process (one instance)', example: 'redis://redis.internal:6379' },
  REDIS_CLUSTER_NODES: { expected: `some masters of a Redis Cluster, ${hostPorts} (the rest are discovered)`, example: 'redis-1.internal:6379,redis-2.internal:6379' },
  REDIS_SENTINELS: { expected: `the Redis Sentinels, ${hostPorts}, with REDIS_SENTINEL_NAME`, example: 'sentinel-1.internal:26379,sentinel-2.internal:26379' },
  REDIS_SENTINEL_NAME: { expected: 'the master\'s name the sentinels monitor (1–64 letters, digits, _ . -)', example: 'mymaster' },
  REDIS_USERNAME: { expected: 'the Redis ACL user of every node (of a cluster, behind sentinels, or REDIS_URL\'s when it carries none)', example: 'checkout' },
  REDIS_PASSWORD: { expected: 'the Redis password of every node (of a cluster, behind sentinels, or REDIS_URL\'s when it carries none)', example: '…' },
  REDIS_TLS: flagHelp('TLS to every Redis node'),
  REDIS_CA_FILE: { expected: 'the path of a PEM file with the CA that signed the Redis servers\' certificates', example: '/etc/ssl/certs/redis-ca.pem' },
  REDIS_KEY_PREFIX: { expected: 'the prefix of every Redis key (1–64 letters, digits, _ : . -)', example: 'ic:' },
  PGLITE_DIR: { expected: 'the embedded database\'s directory', example: '.data/pglite' },
  DEV_SECRETS_FILE: { expected: 'the file that keeps secrets generated in dev/embedded', example: '.data/dev-secrets.json' },
  MIGRATIONS_DIR: { expected: 'a directory of SQL migrations in drizzle\'s layout (default: the ones the build ships)', example: '/srv/checkout/drizzle' },
  OPS_TOKEN: { expected: 'the operators\' bearer token for /api/ops and /api/metrics, at least 16 characters (`npm run secrets` prints one)', example: 'ops_…' },
  WEBHOOK_STANDARD_SECRET: { expected: `the Standard Webhooks signing secret the sender shares: "whsec_" and the base64 of at least ${MIN_SIGNING_KEY_BYTES} random bytes (\`npm run secrets\` prints one)`, example: 'whsec_…' },
  WEBHOOK_STRIPE_SECRET: { expected: 'Stripe\'s endpoint signing secret (whsec_…) from the dashboard\'s webhook endpoint for /api/webhooks/stripe (`stripe listen` prints one for local tests)', example: 'whsec_…' },
  MIDTRANS_SERVER_KEY: { expected: 'the server key from the Midtrans dashboard (Settings → Access Keys; SB-Mid-server-… in the sandbox)', example: 'SB-Mid-server-…' },
  FAULTS_ENABLED: flagHelp('the X-Fault test header (tests only)'),
  IDEMPOTENCY_TTL_SECONDS: { expected: 'how long an order\'s key is remembered, in seconds (a whole number, 60–2592000)', example: '86400' },
  WEBHOOK_IDEMPOTENCY_TTL_SECONDS: { expected: 'how long a webhook event id is remembered, in seconds (a whole number, 60–31536000)', example: '2592000' },
  ORDER_PAYMENT_TTL_SECONDS: { expected: 'how long an order may stay unpaid before it expires, in seconds (a whole number, 1–2592000)', example: '1800' },
  IDEMPOTENCY_LEASE_MS: msHelp('the lease of a claimed record', 200, 600_000, 5_000),
  IDEMPOTENCY_LOCK_TTL_MS: msHelp('the processing lock of a key in flight', 100, 60_000, 5000),
  IDEMPOTENCY_REPLAY_CACHE_BYTES: { expected: 'the size of this instance\'s cache of finished responses, in bytes (a whole number, 0–2147483648)', example: '33554432' },
  REPLAY_CACHE_SECRET: { expected: 'the key that signs the responses instances share through Redis, at least 32 characters, the same on every instance (e.g. `openssl rand -base64 32`)', example: '…' },
  WORKER_ENABLED: flagHelp('the job worker inside the app'),
  WORKER_CONCURRENCY: { expected: 'jobs one worker runs at once (a whole number, 1–64)', example: '4' },
  WORKER_PREFETCH: { expected: 'jobs a worker claims beyond its free slots (a whole number, 0–256)', example: '8' },
  WORKER_ID: { expected: 'this worker\'s name in jobs.locked_by and logs (1–64 letters, digits, _ : . @ -)', example: 'worker-1' },
  JOB_POLL_INTERVAL_MS: msHelp('the fallback poll of the job queue', 10, 60_000, 1000),
  JOB_CLAIM_COALESCE_MS: msHelp('how long after a claim that found the queue drained a wake-up may claim again', 0, 1000, 25),
  JOB_BACKOFF_BASE_MS: msHelp('the first retry\'s delay', 1, 3_600_000, 1000),
  JOB_BACKOFF_CAP_MS: msHelp('the longest retry delay', 1, 86_400_000, 3_600_000),
  JOB_HEARTBEAT_TIMEOUT_MS: msHelp('how long a running job may stay silent before it is rescued', 100, 3_600_000, 60_000),
  JOB_LOCK_TTL_MS: msHelp('the resource lock of a running job', 50, 600_000, 30_000),
  JOB_MAX_SNOOZES: { expected: 'times a job may snooze without spending an attempt (a whole number, 0–10000)', example: '20' },
  JOB_MAX_SNOOZE_MS: msHelp('the longest snooze', 1, 86_400_000, 3_600_000),
  JOB_LOCK_BUSY_DELAY_MS: msHelp('the wait of a job whose resource is locked', 1, 60_000, 250),
  JOB_SHUTDOWN_GRACE_MS: msHelp('how long running jobs may finish on SIGTERM', 0, 300_000, 10_000),
  JOB_MAINTENANCE_INTERVAL_MS: msHelp('how often each instance runs job rescue', 50, 3_600_000, 15_000),
  JOB_RETENTION_DAYS: { expected: 'days completed jobs are kept (a whole number, 0–3650)', example: '7' },
  PAYMENT_PROVIDER: { expected: 'where orders ask for their payments: stripe, midtrans, or mockpay (the built-in simulator: demo and tests only)', example: 'stripe' },
  STRIPE_SECRET_KEY: { expected: 'a Stripe secret key from the dashboard (Developers → API keys): sk_test_…, sk_live_…, or a restricted rk_test_… / rk_live_…', example: 'sk_live_…' },
  STRIPE_API_BASE: { expected: 'an https URL the Stripe client calls instead of https://api.stripe.com (a proxy; plain http only on loopback, for a local stand-in)', example: 'http://127.0.0.1:12111' },
  MIDTRANS_API_BASE: { expected: 'an https URL the Midtrans client calls instead of Midtrans\' own API (a proxy; plain http only on loopback, for a local stand-in)', example: 'https://midtrans-proxy.internal' },
  MIDTRANS_IS_PRODUCTION: flagHelp('Midtrans production instead of its sandbox'),
  PAYMENT_PROVIDER_TIMEOUT_MS: msHelp('the longest one payment provider call may take', 100, 120_000, 20_000),
  PAYMENT_RECONCILE_AFTER_SECONDS: { expected: 'how long an order may await its payment before the provider is asked, in seconds (a whole number, 0–2592000)', example: '900' },
  LEDGER_CHECK_DAYS: { expected: 'how many days back the ledger check compares orders whose money moved with the provider (a whole number, 1–365)', example: '7' },
  LEDGER_CHECK_SETTLE_SECONDS: { expected: 'how long an order and its refunds must be unchanged before the ledger check compares them, in seconds (a whole number, 0–86400)', example: '900' },
  MOCKPAY_ENABLED: flagHelp('the simulated payment provider (demo and tests only)'),
  MOCKPAY_WEBHOOK_URL: { expected: 'the http(s) URL mockpay delivers its webhooks to', example: 'http://127.0.0.1:3000/api/webhooks/mockpay' },
  MOCKPAY_WEBHOOK_SECRET: { expected: `mockpay's own signing secret, "whsec_" and the base64 of at least ${MIN_SIGNING_KEY_BYTES} random bytes, never WEBHOOK_STANDARD_SECRET's key (\`npm run secrets\` prints one)`, example: 'whsec_…' },
  MOCKPAY_DUPLICATES: { expected: 'extra copies mockpay sends of each event (a whole number, 0–10)', example: '1' },
  MOCKPAY_MAX_DELAY_MS: msHelp('mockpay\'s random delay per delivery', 0, 60_000, 300),
  MOCKPAY_REORDER: flagHelp('mockpay re-sending earlier events with each new one'),
  CHECKOUT_DEMO_ENABLED: flagHelp('the checkout page\'s demo store (demo only)'),
  SESSION_PASSWORD: { expected: 'the password that seals the checkout session cookie, at least 32 characters (`npm run secrets` prints one)', example: '…' },
  SMTP_URL: { expected: 'the SMTP server customer e-mails go through: smtp://host:port (STARTTLS when the server offers it) or smtps://host:port (TLS), with user:password@ when it asks for them', example: 'smtps://checkout:…@smtp.example.com:465' },
  SMTP_FROM: { expected: 'the From of the customer e-mails: an address, or a name and the address in angle brackets', example: 'Shop <no-reply@shop.example>' },
  REQUEST_LOG_ENABLED: flagHelp('one request_log row per API request'),
  REQUEST_LOG_RETENTION_DAYS: { expected: 'days request_log rows are kept (a whole number, 1–3650)', example: '14' },
  LOG_LEVEL: { expected: 'debug, info, warn, error or silent', example: 'info' },
  WEBHOOK_ENDPOINTS_ALLOW_PRIVATE: flagHelp('allow webhook endpoints on http: and on private, loopback or link-local addresses'),
  WEBHOOK_RETRY_SCHEDULE: { expected: 'the waits between delivery attempts, durations (s, m, h, d) separated by commas', example: '5s,1m,5m,30m,2h,5h,10h,10h,10h,10h,12h,12h' },
  WEBHOOK_ENDPOINT_DISABLE_AFTER_DAYS: { expected: 'days of failed deliveries before an endpoint is disabled (a whole number, 1–30)', example: '5' },
  WEBHOOK_DELIVERY_TIMEOUT_MS: msHelp('one delivery attempt\'s time limit', 100, 60_000, 10_000),
}

/** One setting to fix: its name, and what is wrong with it, what it expects and an example. */
export interface ConfigProblem {
  name: ConfigVariable
  message: string
}

export class ConfigError extends Error {
  /** Every setting to fix, when the configuration was read (empty for other failures). */
  readonly problems: ConfigProblem[]

  constructor(message: string, problems: ConfigProblem[] = []) {
    super(message)
    this.problems = problems
  }
}

const DURATION_UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const

/** `5s,1m,2h` → [5000, 60000, 7200000]. */
export const durationsMs = (list: string): number[] =>
  list.split(',').map(entry => Number(entry.slice(0, -1)) * DURATION_UNIT_MS[entry.at(-1) as keyof typeof DURATION_UNIT_MS])

/** A Standard Webhooks signing secret: `whsec_` and the base64 of MIN_SIGNING_KEY_BYTES random bytes. */
export const newSigningSecret = (): string => `whsec_${randomBytes(MIN_SIGNING_KEY_BYTES).toString('base64')}`

/** A fresh secret in the shape its variable takes (the one generator, also behind `npm run secrets`). */
export function generateSecret(name: GeneratableSecretName): string {
  if (name === 'SESSION_PASSWORD') return randomBytes(32).toString('base64url')
  if (name === 'WEBHOOK_STANDARD_SECRET' || name === 'MOCKPAY_WEBHOOK_SECRET') return newSigningSecret()
  const raw = randomBytes(MIN_SIGNING_KEY_BYTES)
  if (name === 'OPS_TOKEN') return `ops_${raw.toString('base64url')}`
  return raw.toString('base64url')
}

/** Why `value` is not a valid `name`, or undefined when it is (checked as given: parseConfig treats '' as unset first). */
export function settingProblem(name: ConfigVariable, value: string): string | undefined {
  const result = (EnvSchema.shape[name] as z.ZodType).safeParse(value)
  return result.success ? undefined : result.error.issues.map(issue => issue.message).join('; ')
}

export interface ParseOptions {
  /** `nuxt dev`: missing secrets are generated. */
  dev?: boolean
  /** Generated secrets are read from DEV_SECRETS_FILE, and written there the first time (dev and embedded only). */
  keepSecrets?: boolean
  /** A standalone worker verifies no signatures and serves no API: it needs no secrets but mockpay's signing one. */
  secretsOptional?: boolean
}

function warningsOf(config: Pick<AppConfig, 'FAULTS_ENABLED' | 'MOCKPAY_ENABLED' | 'CHECKOUT_DEMO_ENABLED' | 'WEBHOOK_ENDPOINTS_ALLOW_PRIVATE'>): ConfigWarning[] {
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
  if (config.WEBHOOK_ENDPOINTS_ALLOW_PRIVATE) {
    warnings.push({ setting: 'WEBHOOK_ENDPOINTS_ALLOW_PRIVATE', detail: 'Any tenant can point a webhook endpoint at this network (loopback, private and link-local addresses, cloud metadata) over plain http, and the worker will POST to it. Tests and laptops only: unset it in production.' })
  }
  return warnings
}

/** TLS to Redis: REDIS_TLS, or a rediss:// REDIS_URL. */
export const redisUsesTls = (settings: Pick<Env, 'REDIS_TLS' | 'REDIS_URL'>) => settings.REDIS_TLS || settings.REDIS_URL?.startsWith('rediss://') === true

/** The Redis settings that decide how the app reaches Redis. */
/** REDIS_CLUSTER_NODES and REDIS_SENTINELS (`host:port,host:port`, checked by the schema) as ioredis takes them. */
export function hostPortList(list: string): Array<{ host: string, port: number }> {
  return list.split(',').map((entry) => {
    const colon = entry.lastIndexOf(':')
    return { host: entry.slice(0, colon), port: Number(entry.slice(colon + 1)) }
  })
}

export type RedisSettingValues = Pick<Env, 'REDIS_URL' | 'REDIS_CLUSTER_NODES' | 'REDIS_SENTINELS' | 'REDIS_SENTINEL_NAME'
  | 'REDIS_USERNAME' | 'REDIS_PASSWORD' | 'REDIS_TLS' | 'REDIS_CA_FILE'>

/**
 * The Redis settings that must fit together: at most one of REDIS_URL, REDIS_CLUSTER_NODES and
 * REDIS_SENTINELS; REDIS_SENTINELS with REDIS_SENTINEL_NAME; the other Redis settings only with one
 * of them (or the app would silently run on in-process locks); REDIS_CA_FILE only with TLS.
 */
export function redisSettingProblems(settings: RedisSettingValues): ConfigProblem[] {
  const problems: ConfigProblem[] = []
  const named = (['REDIS_URL', 'REDIS_CLUSTER_NODES', 'REDIS_SENTINELS'] as const).filter(name => settings[name])
  if (named.length > 1) {
    problems.push({ name: named[1]!, message: `set only one of REDIS_URL (one node), REDIS_CLUSTER_NODES (a Redis Cluster) and REDIS_SENTINELS (Sentinel); ${named.join(' and ')} are all set.` })
  }
  if (settings.REDIS_SENTINELS && !settings.REDIS_SENTINEL_NAME) {
    problems.push({ name: 'REDIS_SENTINEL_NAME', message: 'missing — REDIS_SENTINELS needs REDIS_SENTINEL_NAME, the master\'s name the sentinels monitor (`sentinel monitor <name> …`, often "mymaster").' })
  }
  if (settings.REDIS_SENTINEL_NAME && !settings.REDIS_SENTINELS) {
    problems.push({ name: 'REDIS_SENTINEL_NAME', message: 'is set without REDIS_SENTINELS (host:port,… of the sentinels).' })
  }
  if (!named.length) {
    const orphans = (['REDIS_USERNAME', 'REDIS_PASSWORD', 'REDIS_TLS', 'REDIS_CA_FILE'] as const).filter(name => settings[name])
    for (const name of orphans) {
      problems.push({ name, message: 'is set without REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS: the app would run on in-process locks. Set one of them, or unset it.' })
    }
  }
  else if (settings.REDIS_CA_FILE && !redisUsesTls(settings)) {
    problems.push({ name: 'REDIS_CA_FILE', message: 'is set but TLS is off: use a rediss:// REDIS_URL, or set REDIS_TLS=true.' })
  }
  return problems
}

const exampleOf = (name: ConfigVariable) => `Example: ${name}=${settingHelp[name].example}`
/** What follows an invalid value's reason: the shape the setting takes and an example. */
const shouldBe = (name: ConfigVariable) => ` — should be ${settingHelp[name].expected}. ${exampleOf(name)}`

/** The hosts a provider API base may name over plain http: this machine (the test stand-ins). */
const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost'])

/**
 * A provider API base over plain http on another machine: the API key, and the payment links the
 * checkout page shows, would cross the network readable and forgeable.
 */
function plainHttpBaseProblem(name: 'STRIPE_API_BASE' | 'MIDTRANS_API_BASE', base: string | undefined): ConfigProblem[] {
  if (base === undefined) return []
  const { protocol, hostname } = new URL(base)
  if (protocol !== 'http:' || LOOPBACK_HOSTS.has(hostname)) return []
  return [{ name, message: `is http:// on ${hostname}: the provider's API key and answers would cross the network in the clear. Use https://, or plain http only on loopback (127.0.0.1, ::1, localhost) for a local stand-in.` }]
}

/** A CA file setting that names no readable file. */
function unreadableFileProblem(name: 'DATABASE_CA_FILE' | 'REDIS_CA_FILE', file: string | undefined): ConfigProblem[] {
  if (file === undefined) return []
  try {
    accessSync(file, constants.R_OK)
    return []
  }
  catch (error) {
    return [{ name, message: `cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)}): ${file}${shouldBe(name)}` }]
  }
}

/**
 * Reads and checks the whole environment, then either returns the configuration or throws one
 * ConfigError that lists every setting to fix: each invalid value, each missing setting that what
 * this deployment turns on requires, and each pair that contradicts itself.
 *
 * What a deployment (DATABASE_URL, outside `nuxt dev`) must set: PAYMENT_PROVIDER; OPS_TOKEN (not a
 * standalone worker); the chosen provider's API key (STRIPE_SECRET_KEY or MIDTRANS_SERVER_KEY,
 * required embedded too: a made-up one would only fail at the provider); WEBHOOK_STRIPE_SECRET with
 * stripe (not a standalone worker), whose webhooks are how payments and refunds arrive;
 * MOCKPAY_WEBHOOK_SECRET while mockpay is on; SESSION_PASSWORD while the demo checkout is on.
 * Every other webhook secret is optional: a provider without its secret is off. Dev and embedded
 * generate every missing secret, so each provider works locally.
 */
export function parseConfig(env: Record<string, string | undefined>, options: ParseOptions = {}): AppConfig {
  // Empty strings mean "unset": shells and .env files often export them that way.
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== '')) as Record<string, string>
  const isSet = (name: ConfigVariable) => present[name] !== undefined
  const problems: ConfigProblem[] = []
  const parsed: Record<string, unknown> = {}
  for (const name of configVariableNames) {
    const result = (EnvSchema.shape[name] as z.ZodType).safeParse(present[name])
    if (result.success) parsed[name] = result.data
    else problems.push({ name, message: `${result.error.issues.map(issue => issue.message).join('; ')}${shouldBe(name)}` })
  }
  // An invalid variable is undefined here, and listed already: no rule below reports it again as missing.
  const values = parsed as Env
  const invalid = new Set(problems.map(problem => problem.name))
  const missing = (name: ConfigVariable, reason: string) => {
    const lookalike = lookalikeOf(name, present)
    problems.push({ name, message: `missing — ${settingHelp[name].expected}; required ${reason}. ${exampleOf(name)}${lookalike ? ` (${lookalike} is set, but this app reads ${name})` : ''}` })
  }

  const embedded = !isSet('DATABASE_URL')
  const local = embedded || options.dev === true
  const deployment = !local
  // The app serves the API and receives webhooks; a standalone worker does neither.
  const serving = options.secretsOptional !== true
  const paymentProvider = invalid.has('PAYMENT_PROVIDER') ? undefined : values.PAYMENT_PROVIDER ?? (local ? 'mockpay' : undefined)
  const mockpayEnabled = values.MOCKPAY_ENABLED === undefined ? paymentProvider === 'mockpay' : ['true', '1'].includes(values.MOCKPAY_ENABLED)
  const checkoutDemoEnabled = values.CHECKOUT_DEMO_ENABLED === undefined ? local : ['true', '1'].includes(values.CHECKOUT_DEMO_ENABLED)

  if (deployment && serving && !isSet('OPS_TOKEN')) missing('OPS_TOKEN', 'in a deployment (DATABASE_URL set): it guards the operator routes')
  if (deployment && !isSet('PAYMENT_PROVIDER')) {
    missing('PAYMENT_PROVIDER', 'with DATABASE_URL: there is no default outside development (stripe needs STRIPE_SECRET_KEY and WEBHOOK_STRIPE_SECRET, midtrans needs MIDTRANS_SERVER_KEY)')
  }
  if (paymentProvider === 'stripe' && !isSet('STRIPE_SECRET_KEY')) {
    missing('STRIPE_SECRET_KEY', 'because PAYMENT_PROVIDER=stripe: it creates PaymentIntents with it (never generated; a test-mode sk_test_… key to try it)')
  }
  if (paymentProvider === 'stripe' && deployment && serving && !isSet('WEBHOOK_STRIPE_SECRET')) {
    missing('WEBHOOK_STRIPE_SECRET', 'because PAYMENT_PROVIDER=stripe: without it /api/webhooks/stripe is off, and only reconciliation would see a payment (PAYMENT_RECONCILE_AFTER_SECONDS later) and nothing would see a refund')
  }
  if (paymentProvider === 'midtrans' && !isSet('MIDTRANS_SERVER_KEY')) {
    missing('MIDTRANS_SERVER_KEY', 'because PAYMENT_PROVIDER=midtrans: it charges and checks transactions with it and verifies notifications (never generated; the sandbox key to try it)')
  }
  if (paymentProvider === 'mockpay' && !mockpayEnabled && !invalid.has('MOCKPAY_ENABLED')) {
    problems.push({ name: 'MOCKPAY_ENABLED', message: 'is false, but PAYMENT_PROVIDER=mockpay needs MOCKPAY_ENABLED: the simulated provider is the one orders would ask. Choose PAYMENT_PROVIDER=stripe or midtrans, or unset MOCKPAY_ENABLED.' })
  }
  // The standalone worker signs mockpay's deliveries too: a generated key would sign what no instance accepts.
  if (mockpayEnabled && deployment && !isSet('MOCKPAY_WEBHOOK_SECRET')) {
    missing('MOCKPAY_WEBHOOK_SECRET', 'because mockpay is on (MOCKPAY_ENABLED=true, or PAYMENT_PROVIDER=mockpay) with DATABASE_URL: the same on every instance and standalone worker')
  }
  if (mockpayEnabled && values.MOCKPAY_WEBHOOK_SECRET && values.WEBHOOK_STANDARD_SECRET
    && signingKeyOf(values.MOCKPAY_WEBHOOK_SECRET)!.equals(signingKeyOf(values.WEBHOOK_STANDARD_SECRET)!)) {
    problems.push({ name: 'MOCKPAY_WEBHOOK_SECRET', message: 'must differ from WEBHOOK_STANDARD_SECRET: with the same key, anyone who drives mockpay could sign events for /api/webhooks/standard. `npm run secrets` prints two different ones.' })
  }
  // Every instance must seal and open the same cookies.
  if (checkoutDemoEnabled && deployment && serving && !isSet('SESSION_PASSWORD')) {
    missing('SESSION_PASSWORD', 'because CHECKOUT_DEMO_ENABLED=true with DATABASE_URL: every instance seals and opens the same cookies with it')
  }
  problems.push(...redisSettingProblems(values), ...unreadableFileProblem('DATABASE_CA_FILE', values.DATABASE_CA_FILE), ...unreadableFileProblem('REDIS_CA_FILE', values.REDIS_CA_FILE))
  problems.push(...plainHttpBaseProblem('STRIPE_API_BASE', values.STRIPE_API_BASE), ...plainHttpBaseProblem('MIDTRANS_API_BASE', values.MIDTRANS_API_BASE))
  if (problems.length) throw configErrorOf(problems)

  // Generated: every missing secret when local; a standalone worker's OPS_TOKEN, which nothing asks for.
  const toKeep = local && options.keepSecrets ? generatableSecretNames.filter(name => !values[name]) : []
  const secretsFile = toKeep.length ? resolve(values.DEV_SECRETS_FILE) : undefined
  const kept = secretsFile ? keepSecrets(secretsFile, toKeep) : {}
  const generate = (name: GeneratableSecretName) => kept[name] ?? generateSecret(name)
  const generatedSecrets: SecretName[] = secretNames.filter(name => !values[name] && (local || name === 'OPS_TOKEN'))
  const secrets = Object.fromEntries(secretNames.map(name => [name, values[name] ?? (generatedSecrets.includes(name) ? generate(name) : undefined)])) as
    Pick<AppConfig, 'OPS_TOKEN' | 'WEBHOOK_STANDARD_SECRET' | 'WEBHOOK_STRIPE_SECRET' | 'MIDTRANS_SERVER_KEY'>
  let mockpaySecret: string | undefined
  if (mockpayEnabled) {
    mockpaySecret = values.MOCKPAY_WEBHOOK_SECRET
    if (!mockpaySecret) {
      // Only local runs get here (a deployment without it was refused above).
      mockpaySecret = generate('MOCKPAY_WEBHOOK_SECRET')
      generatedSecrets.push('MOCKPAY_WEBHOOK_SECRET')
    }
  }
  const webhookSecrets: AppConfig['webhookSecrets'] = {
    standard: secrets.WEBHOOK_STANDARD_SECRET,
    stripe: secrets.WEBHOOK_STRIPE_SECRET,
    // Midtrans signs too little of a notification to apply it as sent: only the worker of a Midtrans
    // deployment confirms each one with the status API, so no other deployment may take them in.
    midtrans: paymentProvider === 'midtrans' ? secrets.MIDTRANS_SERVER_KEY : undefined,
    mockpay: mockpaySecret,
  }
  const switches = {
    FAULTS_ENABLED: values.FAULTS_ENABLED, MOCKPAY_ENABLED: mockpayEnabled, CHECKOUT_DEMO_ENABLED: checkoutDemoEnabled,
    WEBHOOK_ENDPOINTS_ALLOW_PRIVATE: values.WEBHOOK_ENDPOINTS_ALLOW_PRIVATE === undefined ? local : ['true', '1'].includes(values.WEBHOOK_ENDPOINTS_ALLOW_PRIVATE),
  }
  return {
    ...values,
    ...secrets,
    ...switches,
    // Not undefined here: a deployment without it was refused, and local runs default to mockpay.
    PAYMENT_PROVIDER: paymentProvider!,
    MOCKPAY_WEBHOOK_SECRET: mockpaySecret,
    WEBHOOK_RETRY_SCHEDULE: durationsMs(values.WEBHOOK_RETRY_SCHEDULE),
    SESSION_PASSWORD: values.SESSION_PASSWORD ?? generate('SESSION_PASSWORD'),
    REPLAY_CACHE_SECRET: values.REPLAY_CACHE_SECRET ?? replayCacheKeyFrom(secrets.OPS_TOKEN),
    MOCKPAY_WEBHOOK_URL: values.MOCKPAY_WEBHOOK_URL ?? `http://127.0.0.1:${values.PORT}/api/webhooks/mockpay`,
    webhookSecrets: Object.fromEntries(Object.entries(webhookSecrets).filter(([, secret]) => secret !== undefined)),
    webhookProviders: webhookProviderNames.filter(name => webhookSecrets[name] !== undefined),
    embedded,
    generatedSecrets,
    secretsFile,
    warnings: local ? [] : warningsOf(switches),
  }
}

/**
 * The replay cache's signing key when none is set: a key of its own drawn from OPS_TOKEN (never the
 * token itself), so instances sharing a Redis agree on it with no setting more.
 */
function replayCacheKeyFrom(opsToken: string): string {
  return createHmac('sha256', opsToken).update('replay-cache signing key v1').digest('base64url')
}

/** One error for every problem, in the schema's order (the order of `.env.example`), each on its own line. */
function configErrorOf(problems: ConfigProblem[]): ConfigError {
  const sorted = [...problems].sort((a, b) => configVariableNames.indexOf(a.name) - configVariableNames.indexOf(b.name))
  const count = sorted.length === 1 ? '1 setting to fix' : `${sorted.length} settings to fix`
  return new ConfigError(`Invalid configuration (${count}):\n${sorted.map(problem => `  ${problem.name}: ${problem.message}`).join('\n')}\n`
    + 'Every setting is described in .env.example and in docs/configuration.md; `npm run secrets` prints new secrets to paste.', sorted)
}

/**
 * A variable in the environment that looks like `name` without being one this app reads: the same
 * words in another order (STRIPE_WEBHOOK_SECRET) or a typo of two characters at most.
 */
function lookalikeOf(name: string, present: Record<string, string>): string | undefined {
  const words = (variable: string) => variable.toUpperCase().split('_').sort().join('_')
  return Object.keys(present).find(other => other !== name && !Object.hasOwn(EnvSchema.shape, other)
    && (words(other) === words(name) || editDistance(other.toUpperCase(), name) <= 2))
}

function editDistance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > 2) return 3
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const row = [i]
    for (let j = 1; j <= b.length; j++) row[j] = Math.min(previous[j]! + 1, row[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1))
    previous = row
  }
  return previous[b.length]!
}

/** The kept local secrets, each checked as the environment's value would be. */
function keepSecrets(file: string, names: GeneratableSecretName[]): Partial<Record<GeneratableSecretName, string>> {
  try {
    return keptSecrets(file, names, {
      generate: name => generateSecret(name as GeneratableSecretName),
      valid: (name, value) => settingProblem(name as GeneratableSecretName, value) === undefined,
    })
  }
  catch (error) {
    throw new ConfigError(`Cannot keep the development secrets in ${file} (DEV_SECRETS_FILE): ${error instanceof Error ? error.message : String(error)}`)
  }
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
