import { describe, expect, it } from 'vitest'
import { configVariableNames, ConfigError, parseConfig, type ParseOptions, settingHelp, settingProblem, signingKeyOf } from '../../server/config/index'

const SECRET_NAMES = ['OPS_TOKEN', 'WEBHOOK_STANDARD_SECRET', 'WEBHOOK_STRIPE_SECRET', 'MIDTRANS_SERVER_KEY'] as const
type SecretName = typeof SECRET_NAMES[number]

const DATABASE_URL = 'postgres://root@127.0.0.1:5432/checkout'

const providedSecrets: Record<SecretName, string> = {
  OPS_TOKEN: 'ops_provided_token_0123456789',
  WEBHOOK_STANDARD_SECRET: `whsec_${Buffer.from('provided-standard-key-of-32-bytes').toString('base64')}`,
  WEBHOOK_STRIPE_SECRET: 'stripe_provided_secret_0123',
  MIDTRANS_SERVER_KEY: 'midtrans_provided_key_0123',
}

const stripeKey = 'sk_test_provided0123456789'

/** A complete deployment environment (a real payment provider included): every other test changes one variable of it. */
const deploymentEnv = (): Record<string, string | undefined> => ({ DATABASE_URL, ...providedSecrets, PAYMENT_PROVIDER: 'stripe', STRIPE_SECRET_KEY: stripeKey })

/** The ConfigError parseConfig throws for `env`; fails the test when it does not throw one. */
function configErrorFor(env: Record<string, string | undefined>, options?: ParseOptions): ConfigError {
  try {
    parseConfig(env, options)
  }
  catch (error) {
    expect(error).toBeInstanceOf(ConfigError)
    return error as ConfigError
  }
  throw new Error(`parseConfig accepted ${JSON.stringify(env)}`)
}

/** The settings the error lists, each with its message (the text after "NAME: "). */
const problemsOf = (error: ConfigError) => Object.fromEntries(error.problems.map(problem => [problem.name, problem.message]))

// 24 random bytes: 32 characters of base64(url), after the prefix that says what the secret is.
const generatedSecretShapes: Record<SecretName, RegExp> = {
  OPS_TOKEN: /^ops_[\w-]{32}$/,
  WEBHOOK_STANDARD_SECRET: /^whsec_[A-Za-z0-9+/]{32}$/,
  WEBHOOK_STRIPE_SECRET: /^[\w-]{32}$/,
  MIDTRANS_SERVER_KEY: /^[\w-]{32}$/,
}

describe('parseConfig: secrets', () => {
  it('runs embedded without DATABASE_URL and generates all four secrets (and mockpay\'s) in their shapes', () => {
    const config = parseConfig({})
    expect(config.embedded).toBe(true)
    expect(config.DATABASE_URL).toBeUndefined()
    expect(config.generatedSecrets).toEqual([...SECRET_NAMES, 'MOCKPAY_WEBHOOK_SECRET'])
    for (const name of SECRET_NAMES) expect(config[name]).toMatch(generatedSecretShapes[name])
  })

  it('generates different secrets on every start, each one valid for a deployment', () => {
    const first = parseConfig({})
    const second = parseConfig({})
    for (const name of SECRET_NAMES) expect(first[name]).not.toBe(second[name])
    const generated = Object.fromEntries(SECRET_NAMES.map(name => [name, first[name]]))
    expect(parseConfig({ DATABASE_URL, ...generated, PAYMENT_PROVIDER: 'stripe', STRIPE_SECRET_KEY: stripeKey }).generatedSecrets).toEqual([])
  })

  it('keeps provided secrets verbatim and generates only the missing ones when embedded', () => {
    const config = parseConfig({ OPS_TOKEN: providedSecrets.OPS_TOKEN, MIDTRANS_SERVER_KEY: providedSecrets.MIDTRANS_SERVER_KEY })
    expect(config.OPS_TOKEN).toBe(providedSecrets.OPS_TOKEN)
    expect(config.MIDTRANS_SERVER_KEY).toBe(providedSecrets.MIDTRANS_SERVER_KEY)
    expect(config.generatedSecrets).toEqual(['WEBHOOK_STANDARD_SECRET', 'WEBHOOK_STRIPE_SECRET', 'MOCKPAY_WEBHOOK_SECRET'])
    expect(config.WEBHOOK_STANDARD_SECRET).toMatch(generatedSecretShapes.WEBHOOK_STANDARD_SECRET)
  })

  it('uses every provided secret as is with DATABASE_URL', () => {
    const config = parseConfig(deploymentEnv())
    expect(config.embedded).toBe(false)
    expect(config.DATABASE_URL).toBe(DATABASE_URL)
    expect(config.generatedSecrets).toEqual([])
    for (const name of SECRET_NAMES) expect(config[name]).toBe(providedSecrets[name])
  })

  it.each([
    ['OPS_TOKEN', /^missing — the operators' bearer token for \/api\/ops and \/api\/metrics, at least 16 characters \(`npm run secrets` prints one\); required in a deployment \(DATABASE_URL set\)/],
    ['WEBHOOK_STRIPE_SECRET', /^missing — Stripe's endpoint signing secret \(whsec_…\) from the dashboard's webhook endpoint for \/api\/webhooks\/stripe .*; required because PAYMENT_PROVIDER=stripe: without it \/api\/webhooks\/stripe is off/],
  ] as const)('refuses a Stripe deployment without %s, naming only it, with what it is and an example', (name, message) => {
    const error = configErrorFor({ ...deploymentEnv(), [name]: undefined })
    expect(problemsOf(error)).toEqual({ [name]: expect.stringMatching(message) })
    expect(error.message).toMatch(new RegExp(`\\n {2}${name}: missing — .*\\. Example: ${name}=\\S+`))
  })

  it.each(['WEBHOOK_STANDARD_SECRET', 'MIDTRANS_SERVER_KEY'] as const)('runs a Stripe deployment without %s: that webhook is simply off, nothing generated for it', (name) => {
    const config = parseConfig({ ...deploymentEnv(), [name]: undefined })
    expect(config[name]).toBeUndefined()
    expect(config.generatedSecrets).toEqual([])
    expect(config.webhookProviders).not.toContain(name === 'MIDTRANS_SERVER_KEY' ? 'midtrans' : 'standard')
  })

  it('asks a bare deployment (DATABASE_URL alone) for OPS_TOKEN and PAYMENT_PROVIDER only: no webhook secret before a provider is chosen', () => {
    expect(Object.keys(problemsOf(configErrorFor({ DATABASE_URL })))).toEqual(['OPS_TOKEN', 'PAYMENT_PROVIDER'])
  })

  it('lets a standalone worker start with DATABASE_URL and no secrets (it serves no API and receives no webhook)', () => {
    const worker = { DATABASE_URL, PAYMENT_PROVIDER: 'stripe', STRIPE_SECRET_KEY: stripeKey }
    const config = parseConfig(worker, { secretsOptional: true })
    expect(config.embedded).toBe(false)
    // An operator token nobody knows, for a process that answers no request; no webhook secret is made up.
    expect(config.generatedSecrets).toEqual(['OPS_TOKEN'])
    expect([config.WEBHOOK_STANDARD_SECRET, config.WEBHOOK_STRIPE_SECRET, config.MIDTRANS_SERVER_KEY, config.webhookProviders]).toEqual([undefined, undefined, undefined, []])
    expect(Object.keys(problemsOf(configErrorFor(worker)))).toEqual(['OPS_TOKEN', 'WEBHOOK_STRIPE_SECRET'])
  })

  it('generates missing secrets in development even with DATABASE_URL', () => {
    const config = parseConfig({ DATABASE_URL }, { dev: true })
    expect(config.embedded).toBe(false)
    expect(config.generatedSecrets).toEqual([...SECRET_NAMES, 'MOCKPAY_WEBHOOK_SECRET'])
    for (const name of SECRET_NAMES) expect(config[name]).toMatch(generatedSecretShapes[name])
  })
})

describe('parseConfig: values', () => {
  it('applies the documented defaults', () => {
    const config = parseConfig(deploymentEnv())
    expect(config.FAULTS_ENABLED).toBe(false)
    expect(config.WORKER_ENABLED).toBe(true)
    expect(config.IDEMPOTENCY_TTL_SECONDS).toBe(86_400)
    expect(config.WEBHOOK_IDEMPOTENCY_TTL_SECONDS).toBe(2_592_000)
    expect(config.REDIS_URL).toBeUndefined()
    expect(config.WORKER_CONCURRENCY).toBe(4)
    expect(config.WORKER_ID).toBeUndefined()
    expect({
      paymentProvider: config.PAYMENT_PROVIDER,
      stripeApiBase: config.STRIPE_API_BASE,
      midtransApiBase: config.MIDTRANS_API_BASE,
      midtransIsProduction: config.MIDTRANS_IS_PRODUCTION,
      providerTimeout: config.PAYMENT_PROVIDER_TIMEOUT_MS,
      reconcileAfter: config.PAYMENT_RECONCILE_AFTER_SECONDS,
    }).toEqual({
      paymentProvider: 'stripe',
      stripeApiBase: undefined,
      midtransApiBase: undefined,
      midtransIsProduction: false,
      providerTimeout: 20_000,
      reconcileAfter: 900,
    })
    expect({
      poll: config.JOB_POLL_INTERVAL_MS,
      claimCoalesce: config.JOB_CLAIM_COALESCE_MS,
      backoffBase: config.JOB_BACKOFF_BASE_MS,
      backoffCap: config.JOB_BACKOFF_CAP_MS,
      heartbeatTimeout: config.JOB_HEARTBEAT_TIMEOUT_MS,
      lockTtl: config.JOB_LOCK_TTL_MS,
      lockBusyDelay: config.JOB_LOCK_BUSY_DELAY_MS,
      shutdownGrace: config.JOB_SHUTDOWN_GRACE_MS,
      maintenanceInterval: config.JOB_MAINTENANCE_INTERVAL_MS,
      retentionDays: config.JOB_RETENTION_DAYS,
      prefetch: config.WORKER_PREFETCH,
      maxSnoozes: config.JOB_MAX_SNOOZES,
      maxSnoozeMs: config.JOB_MAX_SNOOZE_MS,
    }).toEqual({
      poll: 1000,
      claimCoalesce: 25,
      backoffBase: 1000,
      backoffCap: 3_600_000,
      heartbeatTimeout: 60_000,
      lockTtl: 30_000,
      lockBusyDelay: 250,
      shutdownGrace: 10_000,
      maintenanceInterval: 15_000,
      retentionDays: 7,
      prefetch: 8,
      maxSnoozes: 20,
      maxSnoozeMs: 3_600_000,
    })
  })

  it('reads valid values', () => {
    const config = parseConfig({
      ...deploymentEnv(),
      REDIS_URL: 'rediss://cache.internal:6380',
      FAULTS_ENABLED: 'true',
      WORKER_ENABLED: '0',
      WORKER_CONCURRENCY: '8',
      IDEMPOTENCY_TTL_SECONDS: '3600',
      WORKER_ID: 'worker-a.eu:1',
      JOB_BACKOFF_BASE_MS: '100',
      JOB_HEARTBEAT_TIMEOUT_MS: '5000',
      JOB_SHUTDOWN_GRACE_MS: '0',
      JOB_RETENTION_DAYS: '0',
      WORKER_PREFETCH: '0',
      JOB_MAX_SNOOZES: '0',
      JOB_MAX_SNOOZE_MS: '86400000',
      STRIPE_API_BASE: 'http://127.0.0.1:12111',
      MIDTRANS_API_BASE: 'https://midtrans-proxy.internal/v2',
      MIDTRANS_IS_PRODUCTION: 'true',
      PAYMENT_PROVIDER_TIMEOUT_MS: '5000',
      PAYMENT_RECONCILE_AFTER_SECONDS: '60',
    })
    expect(config.STRIPE_SECRET_KEY).toBe(stripeKey)
    expect(config.STRIPE_API_BASE).toBe('http://127.0.0.1:12111')
    expect(config.MIDTRANS_API_BASE).toBe('https://midtrans-proxy.internal/v2')
    expect(config.MIDTRANS_IS_PRODUCTION).toBe(true)
    expect(config.PAYMENT_PROVIDER_TIMEOUT_MS).toBe(5000)
    expect(config.PAYMENT_RECONCILE_AFTER_SECONDS).toBe(60)
    expect(config.WORKER_PREFETCH).toBe(0)
    expect(config.JOB_MAX_SNOOZES).toBe(0)
    expect(config.JOB_MAX_SNOOZE_MS).toBe(86_400_000)
    expect(config.WORKER_ID).toBe('worker-a.eu:1')
    expect(config.JOB_BACKOFF_BASE_MS).toBe(100)
    expect(config.JOB_HEARTBEAT_TIMEOUT_MS).toBe(5000)
    expect(config.JOB_SHUTDOWN_GRACE_MS).toBe(0)
    expect(config.JOB_RETENTION_DAYS).toBe(0)
    expect(config.REDIS_URL).toBe('rediss://cache.internal:6380')
    expect(config.FAULTS_ENABLED).toBe(true)
    expect(config.WORKER_ENABLED).toBe(false)
    expect(config.WORKER_CONCURRENCY).toBe(8)
    expect(config.IDEMPOTENCY_TTL_SECONDS).toBe(3600)
  })

  it.each([
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['IDEMPOTENCY_TTL_SECONDS', 'abc'],
    ['IDEMPOTENCY_TTL_SECONDS', '-1'],
    ['IDEMPOTENCY_TTL_SECONDS', '99999999999'],
    ['FAULTS_ENABLED', 'maybe'],
    ['WORKER_CONCURRENCY', '0'],
    ['WORKER_ID', 'has space'],
    ['JOB_HEARTBEAT_TIMEOUT_MS', '99'],
    ['JOB_LOCK_TTL_MS', '10'],
    ['JOB_BACKOFF_BASE_MS', '0'],
    ['JOB_POLL_INTERVAL_MS', '1.5'],
    ['JOB_CLAIM_COALESCE_MS', '-1'],
    ['JOB_CLAIM_COALESCE_MS', '1001'],
    ['WORKER_PREFETCH', '257'],
    ['JOB_MAX_SNOOZES', '-1'],
    // A longer delay would overflow Postgres' int milliseconds.
    ['JOB_MAX_SNOOZE_MS', '86400001'],
    ['JOB_MAX_SNOOZE_MS', '0'],
    ['DATABASE_URL', 'mysql://x'],
    ['REDIS_URL', 'http://x'],
    ['WEBHOOK_STANDARD_SECRET', 'c3RhbmRhcmQta2V5LXdpdGhvdXQtcHJlZml4'],
    ['MOCKPAY_WEBHOOK_SECRET', 'c3RhbmRhcmQta2V5LXdpdGhvdXQtcHJlZml4'],
    ['PAYMENT_PROVIDER', 'paypal'],
    ['PAYMENT_PROVIDER', 'Stripe'],
    // A publishable key is public: it cannot create PaymentIntents.
    ['STRIPE_SECRET_KEY', 'pk_test_0123456789abcdef'],
    ['STRIPE_SECRET_KEY', 'sk_test_1234567'],
    ['STRIPE_SECRET_KEY', 'sk_prod_0123456789abcdef'],
    ['STRIPE_SECRET_KEY', 'whsec_0123456789abcdef'],
    ['STRIPE_SECRET_KEY', 'sk_test_0123456789 abc'],
    ['STRIPE_API_BASE', 'ftp://stripe.internal'],
    ['STRIPE_API_BASE', 'not a url'],
    ['MIDTRANS_API_BASE', 'ftp://midtrans.internal'],
    ['MIDTRANS_API_BASE', '127.0.0.1:4000'],
    ['MIDTRANS_IS_PRODUCTION', 'yes'],
    ['PAYMENT_PROVIDER_TIMEOUT_MS', '99'],
    ['PAYMENT_PROVIDER_TIMEOUT_MS', '120001'],
    ['PAYMENT_PROVIDER_TIMEOUT_MS', '1.5'],
    ['PAYMENT_RECONCILE_AFTER_SECONDS', '-1'],
    ['PAYMENT_RECONCILE_AFTER_SECONDS', '2592001'],
  ])('rejects %s=%j with a ConfigError naming the variable', (name, value) => {
    const error = configErrorFor({ ...deploymentEnv(), [name]: value })
    expect(error.message).toMatch(new RegExp(`\\b${name}\\b`))
  })

  it('treats empty strings as unset', () => {
    const config = parseConfig({
      DATABASE_URL: '',
      REDIS_URL: '',
      FAULTS_ENABLED: '',
      WORKER_ENABLED: '',
      IDEMPOTENCY_TTL_SECONDS: '',
      OPS_TOKEN: '',
    })
    expect(config.embedded).toBe(true)
    expect(config.REDIS_URL).toBeUndefined()
    expect(config.FAULTS_ENABLED).toBe(false)
    expect(config.WORKER_ENABLED).toBe(true)
    expect(config.IDEMPOTENCY_TTL_SECONDS).toBe(86_400)
    expect(config.generatedSecrets).toContain('OPS_TOKEN')
  })

  it('treats an empty secret as missing in a deployment', () => {
    expect(configErrorFor({ ...deploymentEnv(), OPS_TOKEN: '' }).message).toContain('OPS_TOKEN')
  })
})

describe('parseConfig: signing secrets are keys', () => {
  const whsec = (bytes: Buffer) => `whsec_${bytes.toString('base64')}`
  const key24 = Buffer.from(Array.from({ length: 24 }, (_, i) => i * 7 + 3))
  const key32 = Buffer.from(Array.from({ length: 32 }, (_, i) => 255 - i))
  const signingSecrets = ['WEBHOOK_STANDARD_SECRET', 'MOCKPAY_WEBHOOK_SECRET'] as const
  const base64Alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
  /** The base64 of `key` with a bit set that the decoder drops: the same key, spelt another way. */
  const nonCanonical = (key: Buffer) => {
    const canonical = key.toString('base64')
    const last = canonical.replace(/=+$/, '').length - 1
    return canonical.slice(0, last) + base64Alphabet[base64Alphabet.indexOf(canonical[last]!) | 1] + canonical.slice(last + 1)
  }
  /** A deployment with mockpay on, so that both signing secrets are read. */
  const withMockpay = (): Record<string, string | undefined> => ({ ...deploymentEnv(), MOCKPAY_ENABLED: 'true', MOCKPAY_WEBHOOK_SECRET: whsec(key32) })

  it.each(signingSecrets.flatMap(name => [
    [name, 'whsec_!!!!!!!!!!!!!!!!!!!!', 'not base64 at all: Node would decode it to an empty key'],
    [name, `whsec_${'!'.repeat(40)}`, 'long enough for a length check, still no key'],
    [name, whsec(Buffer.alloc(16, 1)), 'a 16-byte key'],
    [name, whsec(Buffer.alloc(23, 1)), 'a 23-byte key'],
    [name, `whsec_${key32.toString('base64url')}`, 'base64url, not base64'],
    [name, `whsec_${key32.toString('base64')} `, 'a trailing space'],
    [name, `whsec_${key24.toString('base64').slice(0, 10)}*${key24.toString('base64').slice(10)}`, 'a character base64 does not have'],
    [name, `whsec_${nonCanonical(Buffer.alloc(25, 8))}`, 'non-canonical: the last character has bits the key does not'],
    [name, `whsec_${key32.toString('base64')}=`, 'padding where none belongs'],
    [name, key32.toString('base64'), 'no whsec_ prefix'],
  ]))('rejects %s=%j (%s), naming the variable', (name, value) => {
    const error = configErrorFor({ ...withMockpay(), [name]: value })
    expect(error.message).toMatch(new RegExp(`\\b${name}: must be "whsec_" followed by the canonical base64 of a key of at least 24 random bytes`))
    expect(Object.keys(problemsOf(error))).toEqual([name])
  })

  it.each(signingSecrets.flatMap(name => [
    [name, key24, whsec(key24)],
    [name, key32, whsec(key32)],
    // 25 bytes: base64 with two padding characters, accepted with or without them.
    [name, Buffer.alloc(25, 9), whsec(Buffer.alloc(25, 9))],
    [name, Buffer.alloc(25, 9), whsec(Buffer.alloc(25, 9)).replace(/=+$/, '')],
  ] as const).map(([name, key, value]) => [name, key.length, value, key] as const))('accepts %s with a %i-byte key: %s', (name, _bytes, value, key) => {
    const other = name === 'WEBHOOK_STANDARD_SECRET' ? { MOCKPAY_WEBHOOK_SECRET: whsec(Buffer.alloc(32, 0xAB)) } : {}
    const config = parseConfig({ ...withMockpay(), ...other, [name]: value })
    expect(config[name]).toBe(value)
    expect(signingKeyOf(value)).toEqual(key)
  })

  it('keeps the opaque secrets (Stripe, Midtrans, OPS_TOKEN) as strings of at least 16 characters, not keys', () => {
    const opaque = { OPS_TOKEN: '!'.repeat(16), WEBHOOK_STRIPE_SECRET: 'whsec_not-base64-at-all', MIDTRANS_SERVER_KEY: 'SB-Mid-server-abc-123' }
    expect(parseConfig({ ...deploymentEnv(), ...opaque })).toMatchObject(opaque)
    for (const name of Object.keys(opaque)) {
      expect(configErrorFor({ ...deploymentEnv(), [name]: 'short' }).message).toMatch(new RegExp(`\\b${name}: must be at least`))
    }
  })
})

describe('parseConfig: mockpay and the demo checkout', () => {
  const sessionPassword = 'a-session-password-of-32-chars-!'
  const mockpaySecret = `whsec_${Buffer.alloc(32, 0x5A).toString('base64')}`

  it('turns both on when embedded or in development (where mockpay is the default provider), and off in a deployment', () => {
    const embedded = parseConfig({})
    expect([embedded.MOCKPAY_ENABLED, embedded.CHECKOUT_DEMO_ENABLED]).toEqual([true, true])
    expect(embedded.SESSION_PASSWORD).toMatch(/^[\w-]{43}$/)
    const dev = parseConfig({ ...deploymentEnv(), PAYMENT_PROVIDER: undefined, SESSION_PASSWORD: undefined }, { dev: true })
    expect([dev.MOCKPAY_ENABLED, dev.CHECKOUT_DEMO_ENABLED]).toEqual([true, true])
    const deployed = parseConfig(deploymentEnv())
    expect([deployed.MOCKPAY_ENABLED, deployed.CHECKOUT_DEMO_ENABLED]).toEqual([false, false])
  })

  it('delivers mockpay webhooks to this instance\'s mockpay endpoint unless told otherwise', () => {
    expect(parseConfig({ PORT: '4100' }).MOCKPAY_WEBHOOK_URL).toBe('http://127.0.0.1:4100/api/webhooks/mockpay')
    expect(parseConfig({ MOCKPAY_WEBHOOK_URL: 'https://hooks.example.com/api/webhooks/mockpay' }).MOCKPAY_WEBHOOK_URL)
      .toBe('https://hooks.example.com/api/webhooks/mockpay')
    expect(configErrorFor({ MOCKPAY_WEBHOOK_URL: 'ftp://x' }).message).toMatch(/\bMOCKPAY_WEBHOOK_URL\b/)
    const chaos = parseConfig({})
    expect([chaos.MOCKPAY_DUPLICATES, chaos.MOCKPAY_MAX_DELAY_MS, chaos.MOCKPAY_REORDER]).toEqual([1, 300, true])
  })

  it('requires SESSION_PASSWORD for the demo checkout in a deployment, and keeps it verbatim', () => {
    expect(configErrorFor({ ...deploymentEnv(), CHECKOUT_DEMO_ENABLED: 'true' }).message).toMatch(/\bSESSION_PASSWORD\b/)
    const config = parseConfig({ ...deploymentEnv(), CHECKOUT_DEMO_ENABLED: 'true', MOCKPAY_ENABLED: '1', MOCKPAY_WEBHOOK_SECRET: mockpaySecret, SESSION_PASSWORD: sessionPassword })
    expect([config.CHECKOUT_DEMO_ENABLED, config.MOCKPAY_ENABLED, config.SESSION_PASSWORD]).toEqual([true, true, sessionPassword])
    expect(configErrorFor({ ...deploymentEnv(), SESSION_PASSWORD: 'too-short' }).message).toMatch(/\bSESSION_PASSWORD\b/)
  })

  it('lets a deployment switch them off explicitly even when embedded (mockpay given a real provider instead)', () => {
    const config = parseConfig({ PAYMENT_PROVIDER: 'stripe', STRIPE_SECRET_KEY: stripeKey, MOCKPAY_ENABLED: 'false', CHECKOUT_DEMO_ENABLED: '0' })
    expect([config.MOCKPAY_ENABLED, config.CHECKOUT_DEMO_ENABLED]).toEqual([false, false])
  })

  it('has its own signing secret: required with MOCKPAY_ENABLED=true and DATABASE_URL, generated and printed when embedded or in development', () => {
    const error = configErrorFor({ ...deploymentEnv(), MOCKPAY_ENABLED: 'true' })
    expect(problemsOf(error)).toEqual({ MOCKPAY_WEBHOOK_SECRET: expect.stringMatching(/^missing — mockpay's own signing secret.*; required because mockpay is on \(MOCKPAY_ENABLED=true, or PAYMENT_PROVIDER=mockpay\) with DATABASE_URL/) })
    // The standalone worker signs mockpay's deliveries: it needs the secret the instances verify with.
    expect(Object.keys(problemsOf(configErrorFor({ DATABASE_URL, PAYMENT_PROVIDER: 'mockpay', MOCKPAY_ENABLED: 'true' }, { secretsOptional: true })))).toEqual(['MOCKPAY_WEBHOOK_SECRET'])
    const deployed = parseConfig({ ...deploymentEnv(), MOCKPAY_ENABLED: 'true', MOCKPAY_WEBHOOK_SECRET: mockpaySecret })
    expect(deployed.MOCKPAY_WEBHOOK_SECRET).toBe(mockpaySecret)
    expect(deployed.generatedSecrets).toEqual([])

    const embedded = parseConfig({})
    expect(embedded.MOCKPAY_WEBHOOK_SECRET).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/)
    expect(embedded.MOCKPAY_WEBHOOK_SECRET).not.toBe(embedded.WEBHOOK_STANDARD_SECRET)
    expect(embedded.generatedSecrets).toEqual([...SECRET_NAMES, 'MOCKPAY_WEBHOOK_SECRET'])
    const dev = parseConfig({ ...deploymentEnv(), PAYMENT_PROVIDER: undefined, SESSION_PASSWORD: sessionPassword }, { dev: true })
    expect(dev.generatedSecrets).toEqual(['MOCKPAY_WEBHOOK_SECRET'])
    expect(signingKeyOf(dev.MOCKPAY_WEBHOOK_SECRET!)).toHaveLength(24)
  })

  it('has no mockpay secret while mockpay is off, and never the Standard Webhooks key', () => {
    expect(parseConfig(deploymentEnv()).MOCKPAY_WEBHOOK_SECRET).toBeUndefined()
    expect(parseConfig({ ...deploymentEnv(), MOCKPAY_WEBHOOK_SECRET: mockpaySecret }).MOCKPAY_WEBHOOK_SECRET).toBeUndefined()
    const sameKey = configErrorFor({ ...deploymentEnv(), MOCKPAY_ENABLED: 'true', MOCKPAY_WEBHOOK_SECRET: providedSecrets.WEBHOOK_STANDARD_SECRET })
    expect(problemsOf(sameKey)).toEqual({ MOCKPAY_WEBHOOK_SECRET: expect.stringMatching(/^must differ from WEBHOOK_STANDARD_SECRET/) })
    // The same key spelt without its padding is still the same key.
    const unpadded = `whsec_${Buffer.alloc(25, 3).toString('base64').replace(/=+$/, '')}`
    const padded = `whsec_${Buffer.alloc(25, 3).toString('base64')}`
    expect(configErrorFor({ ...deploymentEnv(), WEBHOOK_STANDARD_SECRET: padded, MOCKPAY_ENABLED: 'true', MOCKPAY_WEBHOOK_SECRET: unpadded }).message)
      .toMatch(/must differ/)
  })
})

describe('parseConfig: the payment provider', () => {
  const mockpaySecret = `whsec_${Buffer.alloc(32, 0x5A).toString('base64')}`
  const midtransKey = 'SB-Mid-server-provided0123456789'

  it('is mockpay by default when embedded or in development', () => {
    const embedded = parseConfig({})
    expect([embedded.PAYMENT_PROVIDER, embedded.MOCKPAY_ENABLED]).toEqual(['mockpay', true])
    expect(embedded.STRIPE_SECRET_KEY).toBeUndefined()
    const dev = parseConfig({ DATABASE_URL }, { dev: true })
    expect([dev.PAYMENT_PROVIDER, dev.MOCKPAY_ENABLED]).toEqual(['mockpay', true])
  })

  it('is required with DATABASE_URL, naming PAYMENT_PROVIDER and its choices', () => {
    const error = configErrorFor({ ...deploymentEnv(), PAYMENT_PROVIDER: undefined })
    expect(problemsOf(error)).toEqual({ PAYMENT_PROVIDER: expect.stringMatching(/^missing — where orders ask for their payments: stripe, midtrans, or mockpay .*; required with DATABASE_URL\b.*Example: PAYMENT_PROVIDER=stripe$/) })
    // Empty means unset.
    expect(Object.keys(problemsOf(configErrorFor({ ...deploymentEnv(), PAYMENT_PROVIDER: '' })))).toEqual(['PAYMENT_PROVIDER'])
  })

  it('is required by a standalone worker too, which asks the provider for payments', () => {
    expect(Object.keys(problemsOf(configErrorFor({ DATABASE_URL }, { secretsOptional: true })))).toEqual(['PAYMENT_PROVIDER'])
    const worker = parseConfig({ DATABASE_URL, PAYMENT_PROVIDER: 'midtrans', MIDTRANS_SERVER_KEY: midtransKey }, { secretsOptional: true })
    expect([worker.PAYMENT_PROVIDER, worker.MIDTRANS_SERVER_KEY, worker.MOCKPAY_ENABLED]).toEqual(['midtrans', midtransKey, false])
    expect(worker.generatedSecrets).toEqual(['OPS_TOKEN'])
  })

  it('takes each provider by name', () => {
    expect(parseConfig(deploymentEnv())).toMatchObject({ PAYMENT_PROVIDER: 'stripe', STRIPE_SECRET_KEY: stripeKey, MOCKPAY_ENABLED: false })
    expect(parseConfig({ ...deploymentEnv(), PAYMENT_PROVIDER: 'midtrans' })).toMatchObject({ PAYMENT_PROVIDER: 'midtrans', MIDTRANS_SERVER_KEY: providedSecrets.MIDTRANS_SERVER_KEY, MOCKPAY_ENABLED: false })
    expect(parseConfig({ ...deploymentEnv(), PAYMENT_PROVIDER: 'mockpay', MOCKPAY_WEBHOOK_SECRET: mockpaySecret }))
      .toMatchObject({ PAYMENT_PROVIDER: 'mockpay', MOCKPAY_ENABLED: true, MOCKPAY_WEBHOOK_SECRET: mockpaySecret })
    for (const key of ['sk_live_0123456789abcdef', 'rk_test_01234567', 'rk_live_0123_abcd_EFGH']) {
      expect(parseConfig({ ...deploymentEnv(), STRIPE_SECRET_KEY: key }).STRIPE_SECRET_KEY).toBe(key)
    }
  })

  it('needs STRIPE_SECRET_KEY with PAYMENT_PROVIDER=stripe, embedded too: it is never generated', () => {
    expect(problemsOf(configErrorFor({ ...deploymentEnv(), STRIPE_SECRET_KEY: undefined })))
      .toEqual({ STRIPE_SECRET_KEY: expect.stringMatching(/^missing — a Stripe secret key from the dashboard .*; required because PAYMENT_PROVIDER=stripe: it creates PaymentIntents with it\b.*Example: STRIPE_SECRET_KEY=sk_live_…$/) })
    // Embedded, in development and in a standalone worker, the webhook secret is not asked for (generated, or not needed).
    for (const [env, options] of [[{ PAYMENT_PROVIDER: 'stripe' }, {}], [{ DATABASE_URL, PAYMENT_PROVIDER: 'stripe' }, { dev: true }], [{ DATABASE_URL, PAYMENT_PROVIDER: 'stripe' }, { secretsOptional: true }]] as const) {
      expect(Object.keys(problemsOf(configErrorFor(env, options)))).toEqual(['STRIPE_SECRET_KEY'])
    }
    const embedded = parseConfig({ PAYMENT_PROVIDER: 'stripe', STRIPE_SECRET_KEY: stripeKey })
    expect(embedded.STRIPE_SECRET_KEY).toBe(stripeKey)
    expect(embedded.generatedSecrets).not.toContain('STRIPE_SECRET_KEY')
  })

  it('needs a provided MIDTRANS_SERVER_KEY with PAYMENT_PROVIDER=midtrans, embedded too: a generated one would only fail at Midtrans', () => {
    expect(problemsOf(configErrorFor({ ...deploymentEnv(), PAYMENT_PROVIDER: 'midtrans', MIDTRANS_SERVER_KEY: undefined })))
      .toEqual({ MIDTRANS_SERVER_KEY: expect.stringMatching(/^missing — the server key from the Midtrans dashboard .*; required because PAYMENT_PROVIDER=midtrans: it charges and checks transactions with it and verifies notifications\b/) })
    for (const [env, options] of [[{ PAYMENT_PROVIDER: 'midtrans' }, {}], [{ DATABASE_URL, PAYMENT_PROVIDER: 'midtrans' }, { dev: true }], [{ DATABASE_URL, PAYMENT_PROVIDER: 'midtrans' }, { secretsOptional: true }]] as const) {
      expect(Object.keys(problemsOf(configErrorFor(env, options)))).toEqual(['MIDTRANS_SERVER_KEY'])
    }
    const embedded = parseConfig({ PAYMENT_PROVIDER: 'midtrans', MIDTRANS_SERVER_KEY: midtransKey })
    expect(embedded.MIDTRANS_SERVER_KEY).toBe(midtransKey)
    expect(embedded.generatedSecrets).toEqual(['OPS_TOKEN', 'WEBHOOK_STANDARD_SECRET', 'WEBHOOK_STRIPE_SECRET'])
    // The other providers' keys are still generated when embedded: mockpay needs no Midtrans key.
    expect(parseConfig({}).generatedSecrets).toContain('MIDTRANS_SERVER_KEY')
  })

  it.each([
    ['PAYMENT_PROVIDER_TIMEOUT_MS', '100', 100],
    ['PAYMENT_PROVIDER_TIMEOUT_MS', '120000', 120_000],
    ['PAYMENT_RECONCILE_AFTER_SECONDS', '0', 0],
    ['PAYMENT_RECONCILE_AFTER_SECONDS', '2592000', 2_592_000],
    ['JOB_CLAIM_COALESCE_MS', '0', 0],
    ['JOB_CLAIM_COALESCE_MS', '1000', 1000],
  ] as const)('accepts %s=%s, at its bound', (name, value, parsed) => {
    expect(parseConfig({ ...deploymentEnv(), [name]: value })[name]).toBe(parsed)
  })

  it('turns MOCKPAY_ENABLED on by default only when mockpay is the provider', () => {
    expect(parseConfig({}).MOCKPAY_ENABLED).toBe(true)
    const embeddedStripe = parseConfig({ PAYMENT_PROVIDER: 'stripe', STRIPE_SECRET_KEY: stripeKey })
    expect([embeddedStripe.MOCKPAY_ENABLED, embeddedStripe.MOCKPAY_WEBHOOK_SECRET]).toEqual([false, undefined])
    expect(embeddedStripe.generatedSecrets).not.toContain('MOCKPAY_WEBHOOK_SECRET')
    expect(parseConfig({ PAYMENT_PROVIDER: 'midtrans', MIDTRANS_SERVER_KEY: midtransKey }).MOCKPAY_ENABLED).toBe(false)
    // A deployment on mockpay has it on by default, and so needs its signing secret.
    expect(Object.keys(problemsOf(configErrorFor({ ...deploymentEnv(), PAYMENT_PROVIDER: 'mockpay' })))).toEqual(['MOCKPAY_WEBHOOK_SECRET'])
  })

  it('lets MOCKPAY_ENABLED=true run beside stripe', () => {
    const embedded = parseConfig({ PAYMENT_PROVIDER: 'stripe', STRIPE_SECRET_KEY: stripeKey, MOCKPAY_ENABLED: 'true' })
    expect([embedded.PAYMENT_PROVIDER, embedded.MOCKPAY_ENABLED]).toEqual(['stripe', true])
    expect(embedded.MOCKPAY_WEBHOOK_SECRET).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/)
    const deployed = parseConfig({ ...deploymentEnv(), MOCKPAY_ENABLED: 'true', MOCKPAY_WEBHOOK_SECRET: mockpaySecret })
    expect([deployed.PAYMENT_PROVIDER, deployed.MOCKPAY_ENABLED, deployed.MOCKPAY_WEBHOOK_SECRET]).toEqual(['stripe', true, mockpaySecret])
  })

  it.each([
    ['embedded, the default provider', {}, undefined],
    ['embedded, named', { PAYMENT_PROVIDER: 'mockpay' }, undefined],
    ['in development', { DATABASE_URL }, { dev: true }],
    ['in a deployment', { ...deploymentEnv(), PAYMENT_PROVIDER: 'mockpay', MOCKPAY_WEBHOOK_SECRET: mockpaySecret }, undefined],
  ] as const)('refuses PAYMENT_PROVIDER=mockpay with MOCKPAY_ENABLED off (%s)', (_where, env, options) => {
    for (const off of ['false', '0']) {
      const error = configErrorFor({ ...env, MOCKPAY_ENABLED: off }, options)
      expect(problemsOf(error)).toEqual({ MOCKPAY_ENABLED: expect.stringMatching(/^is false, but PAYMENT_PROVIDER=mockpay needs MOCKPAY_ENABLED\b/) })
    }
  })
})

describe('parseConfig: warnings about test and demo features in a deployment', () => {
  const mockpaySecret = `whsec_${Buffer.alloc(32, 0x5A).toString('base64')}`

  it('lists none by default, in a deployment or embedded', () => {
    expect(parseConfig(deploymentEnv()).warnings).toEqual([])
    // Embedded and dev turn mockpay and the demo on by themselves: a laptop, not production.
    expect(parseConfig({ FAULTS_ENABLED: 'true' }).warnings).toEqual([])
    expect(parseConfig({ ...deploymentEnv(), FAULTS_ENABLED: 'true' }, { dev: true }).warnings).toEqual([])
  })

  it('names each of FAULTS_ENABLED, MOCKPAY_ENABLED and CHECKOUT_DEMO_ENABLED switched on with DATABASE_URL, and why it is unsafe', () => {
    const config = parseConfig({
      ...deploymentEnv(),
      FAULTS_ENABLED: 'true',
      MOCKPAY_ENABLED: 'true',
      MOCKPAY_WEBHOOK_SECRET: mockpaySecret,
      CHECKOUT_DEMO_ENABLED: 'true',
      SESSION_PASSWORD: 'a-session-password-of-32-chars-!',
    })
    expect(config.warnings).toEqual([
      { setting: 'FAULTS_ENABLED', detail: expect.stringMatching(/crash the process.*X-Fault.*production/) },
      { setting: 'MOCKPAY_ENABLED', detail: expect.stringMatching(/paid or refunded.*without paying.*production/) },
      { setting: 'CHECKOUT_DEMO_ENABLED', detail: expect.stringMatching(/demo tenant without a secret key.*production/) },
    ])
    expect(parseConfig({ ...deploymentEnv(), MOCKPAY_ENABLED: 'true', MOCKPAY_WEBHOOK_SECRET: mockpaySecret }).warnings.map(w => w.setting)).toEqual(['MOCKPAY_ENABLED'])
  })
})

describe('parseConfig: every problem of a start at once', () => {
  it('lists every missing and invalid setting in one error, in the order of .env.example, each with what it expects and an example', () => {
    const error = configErrorFor({ DATABASE_URL, PAYMENT_PROVIDER: 'stripe', IDEMPOTENCY_TTL_SECONDS: 'abc', LOG_LEVEL: 'loud', MIDTRANS_SERVER_KEY: 'short' })
    expect(error.problems.map(problem => problem.name)).toEqual(['OPS_TOKEN', 'WEBHOOK_STRIPE_SECRET', 'MIDTRANS_SERVER_KEY', 'IDEMPOTENCY_TTL_SECONDS', 'STRIPE_SECRET_KEY', 'LOG_LEVEL'])
    const lines = error.message.split('\n')
    expect(lines[0]).toBe('Invalid configuration (6 settings to fix):')
    expect(lines.slice(1, 7)).toEqual([
      expect.stringMatching(/^ {2}OPS_TOKEN: missing — .*; required in a deployment \(DATABASE_URL set\).*\. Example: OPS_TOKEN=ops_…$/),
      expect.stringMatching(/^ {2}WEBHOOK_STRIPE_SECRET: missing — Stripe's endpoint signing secret \(whsec_…\) from the dashboard's webhook endpoint.*; required because PAYMENT_PROVIDER=stripe\b.*\. Example: WEBHOOK_STRIPE_SECRET=whsec_…$/),
      expect.stringMatching(/^ {2}MIDTRANS_SERVER_KEY: must be at least 16 characters — should be the server key from the Midtrans dashboard.*\. Example: MIDTRANS_SERVER_KEY=SB-Mid-server-…$/),
      expect.stringMatching(/^ {2}IDEMPOTENCY_TTL_SECONDS: must be a whole number — should be .*\(a whole number, 60–2592000\)\. Example: IDEMPOTENCY_TTL_SECONDS=86400$/),
      expect.stringMatching(/^ {2}STRIPE_SECRET_KEY: missing — .*; required because PAYMENT_PROVIDER=stripe\b.*\. Example: STRIPE_SECRET_KEY=sk_live_…$/),
      expect.stringMatching(/^ {2}LOG_LEVEL: .* — should be debug, info, warn, error or silent\. Example: LOG_LEVEL=info$/),
    ])
    expect(lines[7]).toMatch(/\.env\.example.*`npm run secrets`/)
  })

  it('reports an invalid value once, never as missing too, and never the rules that depend on it', () => {
    // PAYMENT_PROVIDER is wrong, so which provider key is required is unknown: only it is listed (and OPS_TOKEN).
    expect(Object.keys(problemsOf(configErrorFor({ DATABASE_URL, PAYMENT_PROVIDER: 'paypal', OPS_TOKEN: 'x' })))).toEqual(['OPS_TOKEN', 'PAYMENT_PROVIDER'])
    expect(problemsOf(configErrorFor({ ...deploymentEnv(), OPS_TOKEN: 'x' })).OPS_TOKEN).toMatch(/^must be at least 16 characters — /)
  })

  it('never repeats a secret\'s value in the error', () => {
    const error = configErrorFor({ ...deploymentEnv(), OPS_TOKEN: 'hunter2-secret', WEBHOOK_STANDARD_SECRET: 'whsec_tooShortToBeAKey', SESSION_PASSWORD: 'password-too-short' })
    expect(Object.keys(problemsOf(error))).toEqual(['OPS_TOKEN', 'WEBHOOK_STANDARD_SECRET', 'SESSION_PASSWORD'])
    for (const value of ['hunter2-secret', 'tooShortToBeAKey', 'password-too-short']) expect(error.message).not.toContain(value)
  })

  it('points at a variable set under a name this app does not read', () => {
    const swapped = configErrorFor({ ...deploymentEnv(), WEBHOOK_STRIPE_SECRET: undefined, STRIPE_WEBHOOK_SECRET: 'whsec_from_the_dashboard_0123' })
    expect(problemsOf(swapped).WEBHOOK_STRIPE_SECRET).toMatch(/ \(STRIPE_WEBHOOK_SECRET is set, but this app reads WEBHOOK_STRIPE_SECRET\)$/)
    const typo = configErrorFor({ ...deploymentEnv(), OPS_TOKEN: undefined, OPS_TOKENS: 'ops_provided_token_0123456789' })
    expect(problemsOf(typo).OPS_TOKEN).toMatch(/ \(OPS_TOKENS is set, but this app reads OPS_TOKEN\)$/)
    expect(problemsOf(configErrorFor({ ...deploymentEnv(), OPS_TOKEN: undefined, PATH: '/usr/bin' })).OPS_TOKEN).not.toMatch(/is set, but/)
  })

  it('has what each variable expects and an example, and each example that is not a secret\'s placeholder is valid', () => {
    expect(Object.keys(settingHelp)).toEqual(configVariableNames)
    for (const name of configVariableNames) {
      const { expected, example } = settingHelp[name]
      expect(expected.length, name).toBeGreaterThan(5)
      if (!example.includes('…')) expect(settingProblem(name, example), `${name}=${example}`).toBeUndefined()
    }
  })
})

describe('parseConfig: a deployment is asked only for what it turns on', () => {
  const stripeOnly = { DATABASE_URL, PAYMENT_PROVIDER: 'stripe', STRIPE_SECRET_KEY: stripeKey, WEBHOOK_STRIPE_SECRET: providedSecrets.WEBHOOK_STRIPE_SECRET, OPS_TOKEN: providedSecrets.OPS_TOKEN }
  const mockpaySecret = `whsec_${Buffer.alloc(32, 0x5A).toString('base64')}`

  it('runs a Stripe-only shop without a Midtrans key or a Standard Webhooks secret; stripe is its only webhook', () => {
    const config = parseConfig(stripeOnly)
    expect(config.webhookProviders).toEqual(['stripe'])
    expect(config.webhookSecrets).toEqual({ stripe: providedSecrets.WEBHOOK_STRIPE_SECRET })
    expect([config.MIDTRANS_SERVER_KEY, config.WEBHOOK_STANDARD_SECRET, config.MOCKPAY_WEBHOOK_SECRET]).toEqual([undefined, undefined, undefined])
    expect(config.generatedSecrets).toEqual([])
  })

  it('turns on each other webhook by its secret alone', () => {
    expect(parseConfig({ ...stripeOnly, WEBHOOK_STANDARD_SECRET: providedSecrets.WEBHOOK_STANDARD_SECRET }).webhookProviders).toEqual(['standard', 'stripe'])
    expect(parseConfig({ ...stripeOnly, MOCKPAY_ENABLED: 'true', MOCKPAY_WEBHOOK_SECRET: mockpaySecret }).webhookSecrets).toEqual({ stripe: providedSecrets.WEBHOOK_STRIPE_SECRET, mockpay: mockpaySecret })
    // mockpay's secret while mockpay is off turns nothing on.
    expect(parseConfig({ ...stripeOnly, MOCKPAY_WEBHOOK_SECRET: mockpaySecret }).webhookProviders).toEqual(['stripe'])
  })

  it('serves Midtrans notifications only with PAYMENT_PROVIDER=midtrans, whose worker confirms each one: its server key alone turns nothing on', () => {
    const config = parseConfig({ ...stripeOnly, MIDTRANS_SERVER_KEY: providedSecrets.MIDTRANS_SERVER_KEY })
    expect(config.MIDTRANS_SERVER_KEY).toBe(providedSecrets.MIDTRANS_SERVER_KEY)
    expect(config.webhookProviders).toEqual(['stripe'])
    expect(config.webhookSecrets).toEqual({ stripe: providedSecrets.WEBHOOK_STRIPE_SECRET })
    expect(parseConfig({ DATABASE_URL, PAYMENT_PROVIDER: 'mockpay', MOCKPAY_WEBHOOK_SECRET: mockpaySecret, OPS_TOKEN: providedSecrets.OPS_TOKEN, MIDTRANS_SERVER_KEY: providedSecrets.MIDTRANS_SERVER_KEY }).webhookProviders).toEqual(['mockpay'])
  })

  it('runs a Midtrans-only shop on its server key, which also verifies its notifications', () => {
    const config = parseConfig({ DATABASE_URL, PAYMENT_PROVIDER: 'midtrans', MIDTRANS_SERVER_KEY: providedSecrets.MIDTRANS_SERVER_KEY, OPS_TOKEN: providedSecrets.OPS_TOKEN })
    expect(config.webhookSecrets).toEqual({ midtrans: providedSecrets.MIDTRANS_SERVER_KEY })
  })

  it('runs a mockpay deployment on mockpay\'s secret alone', () => {
    const config = parseConfig({ DATABASE_URL, PAYMENT_PROVIDER: 'mockpay', MOCKPAY_WEBHOOK_SECRET: mockpaySecret, OPS_TOKEN: providedSecrets.OPS_TOKEN })
    expect(config.webhookProviders).toEqual(['mockpay'])
  })

  it('serves every webhook but Midtrans\'s when embedded or in development, with generated secrets', () => {
    expect(parseConfig({}).webhookProviders).toEqual(['standard', 'stripe', 'mockpay'])
    expect(parseConfig({ DATABASE_URL, PAYMENT_PROVIDER: 'stripe', STRIPE_SECRET_KEY: stripeKey }, { dev: true }).webhookProviders).toEqual(['standard', 'stripe'])
    expect(parseConfig({ PAYMENT_PROVIDER: 'midtrans', MIDTRANS_SERVER_KEY: providedSecrets.MIDTRANS_SERVER_KEY }).webhookProviders).toEqual(['standard', 'stripe', 'midtrans'])
  })
})

describe('settingHelp: the ranges it states are the schema\'s', () => {
  const ranged = configVariableNames.flatMap((name) => {
    const range = /\(a whole number, (\d+)–(\d+)\)/.exec(settingHelp[name].expected)
    return range ? [[name, Number(range[1]), Number(range[2])] as const] : []
  })

  it.each(ranged)('%s takes %i to %i, and nothing beyond', (name, min, max) => {
    expect(settingProblem(name, String(min))).toBeUndefined()
    expect(settingProblem(name, String(max))).toBeUndefined()
    expect(settingProblem(name, String(max + 1))).toBeDefined()
    if (min > 0) expect(settingProblem(name, String(min - 1))).toBeDefined()
  })

  it('covers every whole-number setting', () => {
    expect(ranged.length).toBe(configVariableNames.filter(name => settingProblem(name, 'abc') === 'must be a whole number').length)
  })
})

describe('CA files', () => {
  it('a DATABASE_CA_FILE that cannot be read is reported with the rest at start-up, not at the first connection', () => {
    const error = configErrorFor({ ...deploymentEnv(), DATABASE_CA_FILE: '/nonexistent/postgres-ca.pem', WEBHOOK_STRIPE_SECRET: undefined })
    expect(error.problems.map(problem => problem.name)).toEqual(['DATABASE_CA_FILE', 'WEBHOOK_STRIPE_SECRET'])
    expect(error.message).toMatch(/DATABASE_CA_FILE: cannot be read \(ENOENT\): \/nonexistent\/postgres-ca\.pem/)
  })
})

describe('parseConfig: provider API bases over plain http only on loopback', () => {
  it.each(['STRIPE_API_BASE', 'MIDTRANS_API_BASE'] as const)('refuses an http:// %s on another host, in a deployment and locally, saying to use https', (name) => {
    for (const [env, options] of [[deploymentEnv(), {}], [{}, {}], [{ DATABASE_URL }, { dev: true }]] as const) {
      const error = configErrorFor({ ...env, [name]: 'http://payments-proxy.internal:8080' }, options)
      expect(problemsOf(error)[name]).toBe('is http:// on payments-proxy.internal: the provider\'s API key and answers would cross the network in the clear. Use https://, or plain http only on loopback (127.0.0.1, ::1, localhost) for a local stand-in.')
    }
  })

  it.each(['STRIPE_API_BASE', 'MIDTRANS_API_BASE'] as const)('accepts %s over https anywhere, and over http on 127.0.0.1, ::1 and localhost (the stand-ins)', (name) => {
    for (const base of ['https://payments-proxy.internal:8443/v2', 'http://127.0.0.1:12111', 'http://[::1]:12111', 'http://localhost:12111']) {
      expect(parseConfig({ ...deploymentEnv(), [name]: base })[name]).toBe(base)
    }
    // Names that only look local are not.
    for (const base of ['http://127.0.0.1.example.com', 'http://localhost.example.com:80', 'http://10.0.0.5']) {
      expect(Object.keys(problemsOf(configErrorFor({ ...deploymentEnv(), [name]: base })))).toEqual([name])
    }
  })
})

describe('parseConfig: REPLAY_CACHE_SECRET', () => {
  it('keeps a given secret verbatim and refuses one shorter than 32 characters', () => {
    const secret = 'a-replay-cache-secret-of-32-chars'
    expect(parseConfig({ ...deploymentEnv(), REPLAY_CACHE_SECRET: secret }).REPLAY_CACHE_SECRET).toBe(secret)
    expect(problemsOf(configErrorFor({ ...deploymentEnv(), REPLAY_CACHE_SECRET: 'x'.repeat(31) })).REPLAY_CACHE_SECRET).toMatch(/^must be at least 32 characters/)
  })

  it('when unset, derives one from OPS_TOKEN: the same on every instance of a deployment, never the token, another for another token', () => {
    const [first, second] = [parseConfig(deploymentEnv()), parseConfig(deploymentEnv())]
    expect(first.REPLAY_CACHE_SECRET).toMatch(/^[\w-]{43}$/)
    expect(second.REPLAY_CACHE_SECRET).toBe(first.REPLAY_CACHE_SECRET)
    expect(first.REPLAY_CACHE_SECRET).not.toContain(first.OPS_TOKEN)
    expect(parseConfig({ ...deploymentEnv(), OPS_TOKEN: 'another_ops_token_0123456789' }).REPLAY_CACHE_SECRET).not.toBe(first.REPLAY_CACHE_SECRET)
  })
})
