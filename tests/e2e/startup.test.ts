import { execFile } from 'node:child_process'
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import postgres from 'postgres'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { MIGRATION_LOCK_ID } from '@idempotent-checkout/db-kit'
import { appEnv, startApp, stopAll } from '../support/app'
import { serverEntry } from '../support/build-once'
import { createTenant, request } from '../support/http'
import { expectProblem, newIdempotencyKey, postOrder, validOrderBody } from '../support/orders'
import { opsRequest } from '../support/ops'
import { spawnManaged } from '../support/processes'
import { createTestDatabase, describeWithServices, freePort, redisUrl } from '../support/services'
import { logLines } from '../support/worker'

// Start-up is part of the contract: a bad configuration, a failed migration or an unpatched
// database driver stops the process with a message, several instances migrate one database
// safely, dev secrets are printed, and test or demo features switched on in a deployment are
// warned about.

/**
 * PAYMENT_PROVIDER=stripe with mockpay off and a well-formed test key, its API base a port nothing
 * listens on: these instances run no worker, and nothing of theirs may reach the real Stripe.
 */
const stripeOff = {
  PAYMENT_PROVIDER: 'stripe',
  STRIPE_SECRET_KEY: 'sk_test_startup0123456789',
  STRIPE_API_BASE: 'http://127.0.0.1:9',
  MOCKPAY_ENABLED: 'false',
}

const migrationJournal = JSON.parse(readFileSync(new URL('../../drizzle/meta/_journal.json', import.meta.url), 'utf8')) as { entries: unknown[] }

describeWithServices('start-up', ['postgres', 'redis'], () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>
  const pgliteDir = mkdtempSync(join(tmpdir(), 'ic-startup-'))

  beforeAll(async () => {
    database = await createTestDatabase('startup')
  })

  afterAll(async () => {
    await stopAll()
    await database?.drop()
    rmSync(pgliteDir, { recursive: true, force: true })
  })

  it('refuses a bad value, naming the variable, and exits 1', async () => {
    const start = startApp({ databaseUrl: database.url, redisUrl, env: { IDEMPOTENCY_TTL_SECONDS: 'abc' } })
    await expect(start).rejects.toThrow(/exited with code 1 before it was ready[\s\S]*Invalid configuration \(1 setting to fix\):\n {2}IDEMPOTENCY_TTL_SECONDS: must be a whole number — should be /)
  })

  it('refuses to default a secret when DATABASE_URL is set (a deployment)', async () => {
    const start = startApp({ databaseUrl: database.url, redisUrl, env: { OPS_TOKEN: '' } })
    await expect(start).rejects.toThrow(/exited with code 1 before it was ready[\s\S]*Invalid configuration \(1 setting to fix\):\n {2}OPS_TOKEN: missing — /)
  })

  it('lists every missing and invalid setting of a first start at once, on stderr, each with an example, and exits 1', async () => {
    // A new team's first try: the database, Redis and the provider named, nothing else yet, and one typo'd value.
    const port = await freePort()
    const env = { PATH: process.env.PATH, HOST: '127.0.0.1', PORT: String(port), NODE_ENV: 'production', DATABASE_URL: database.url, REDIS_URL: redisUrl, PAYMENT_PROVIDER: 'stripe', STRIPE_WEBHOOK_SECRET: 'whsec_copied_under_another_name', WORKER_CONCURRENCY: 'four' }
    const exit = await promisify(execFile)(process.execPath, [serverEntry], { env, timeout: 30_000 }).then(
      ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
      (error: { code?: number, stdout?: string, stderr?: string }) => ({ code: error.code, stdout: error.stdout ?? '', stderr: error.stderr ?? '' }),
    )
    expect(exit.code, exit.stdout + exit.stderr).toBe(1)
    const listed = exit.stderr.split('\n').filter(line => /^ {2}[A-Z_]+: /.test(line))
    expect(exit.stderr).toContain('Invalid configuration (4 settings to fix):')
    expect(listed).toEqual([
      expect.stringMatching(/^ {2}OPS_TOKEN: missing — .*; required in a deployment \(DATABASE_URL set\).*\. Example: OPS_TOKEN=ops_…$/),
      expect.stringMatching(/^ {2}WEBHOOK_STRIPE_SECRET: missing — Stripe's endpoint signing secret \(whsec_…\) from the dashboard's webhook endpoint .*; required because PAYMENT_PROVIDER=stripe\b.*\. Example: WEBHOOK_STRIPE_SECRET=whsec_… \(STRIPE_WEBHOOK_SECRET is set, but this app reads WEBHOOK_STRIPE_SECRET\)$/),
      expect.stringMatching(/^ {2}WORKER_CONCURRENCY: must be a whole number — should be .*\(a whole number, 1–64\)\. Example: WORKER_CONCURRENCY=4$/),
      expect.stringMatching(/^ {2}STRIPE_SECRET_KEY: missing — a Stripe secret key .*; required because PAYMENT_PROVIDER=stripe\b.*\. Example: STRIPE_SECRET_KEY=sk_live_…$/),
    ])
    // A Stripe shop is not asked for another provider's secret.
    expect(exit.stderr).not.toMatch(/MIDTRANS_SERVER_KEY|WEBHOOK_STANDARD_SECRET|MOCKPAY_WEBHOOK_SECRET|SESSION_PASSWORD/)
    expect(exit.stderr).toContain('`npm run secrets`')
  })

  it('refuses Redis settings that do not fit together in the same list as every other setting to fix, no stack trace, and exits 1', async () => {
    const start = startApp({ databaseUrl: database.url, redisUrl: null, label: 'startup-redis-settings', env: { REDIS_SENTINELS: '127.0.0.1:26379', WORKER_CONCURRENCY: 'many' } })
    const failed = await start.then(() => '', (error: Error) => error.message)
    expect(failed).toMatch(/exited with code 1 before it was ready[\s\S]*Invalid configuration \(2 settings to fix\):\n {2}REDIS_SENTINEL_NAME: missing — REDIS_SENTINELS needs REDIS_SENTINEL_NAME[^\n]*\n {2}WORKER_CONCURRENCY: must be a whole number/)
    expect(failed).not.toMatch(/at redisTopology|ConfigError:/)
  })

  it('runs a Stripe-only deployment without a Midtrans key or a Standard Webhooks secret: /api/ready lists only stripe, the other webhooks answer 404', async () => {
    const fresh = await createTestDatabase('startup-stripe-only')
    try {
      // Every setting of another provider, mockpay, the demo or the faults left unset.
      const unset = Object.fromEntries(['WEBHOOK_STANDARD_SECRET', 'MIDTRANS_SERVER_KEY', 'MOCKPAY_ENABLED', 'MOCKPAY_WEBHOOK_SECRET', 'SESSION_PASSWORD', 'FAULTS_ENABLED', 'CHECKOUT_DEMO_ENABLED'].map(name => [name, '']))
      const app = await startApp({ databaseUrl: fresh.url, redisUrl, label: 'startup-stripe-only', env: { ...unset, PAYMENT_PROVIDER: 'stripe', STRIPE_SECRET_KEY: 'sk_test_startup0123456789', STRIPE_API_BASE: 'http://127.0.0.1:9' } })
      const ready = await opsRequest(app.url, '/api/ready')
      expect(ready.status, ready.text).toBe(200)
      expect(ready.json.webhooks).toEqual({ providers: ['stripe'] })
      expect(ready.json.warnings).toEqual([])
      expect(app.output()).not.toMatch(/Generated development secrets/)

      for (const provider of ['midtrans', 'standard', 'mockpay']) {
        const answer = await request(app.url, `/api/webhooks/${provider}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
        expectProblem(answer, 'not-found')
        expect(answer.json.detail).toBe(`No webhook provider "${provider}" here. Point the provider at /api/webhooks/stripe.`)
      }
      // Stripe's endpoint is on: an unsigned delivery is refused for its signature, not its route.
      expectProblem(await request(app.url, '/api/webhooks/stripe', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }), 'webhook-signature-invalid')
      await app.stop()
    }
    finally {
      await stopAll()
      await fresh.drop()
    }
  })

  it('exits 1 when the migrations cannot be applied, before serving anything', async () => {
    const start = startApp({ databaseUrl: database.url, redisUrl, env: { MIGRATIONS_DIR: join(pgliteDir, 'no-such-folder') } })
    await expect(start).rejects.toThrow(/exited with code 1 before it was ready[\s\S]*could not open or migrate the database/)
  })

  it('lets three instances start on one fresh database at once: each migration applied exactly once', async () => {
    const instances = await Promise.all([1, 2, 3].map(n => startApp({ databaseUrl: database.url, redisUrl, label: `startup-${n}` })))
    const sql = postgres(database.url, { max: 1, onnotice: () => {} })
    try {
      const [{ applied }] = await sql<[{ applied: number }]>`select count(*)::int as applied from drizzle.__drizzle_migrations`
      expect(applied).toBe(migrationJournal.entries.length)
      const tables = await sql<Array<{ name: string }>>`select table_name as name from information_schema.tables where table_schema = 'public' order by 1`
      expect(tables.map(t => t.name).sort()).toEqual(['api_keys', 'events', 'idempotency_records', 'invoices', 'jobs', 'ledger_checks', 'ledger_discrepancies', 'mailbox', 'operator_actions', 'order_status_history', 'orders', 'payment_intent_refunds', 'payment_intents', 'refunds', 'request_log', 'request_log_replays', 'side_effects', 'stock', 'stock_movements', 'tenants', 'webhook_attempts', 'webhook_endpoints', 'webhook_events'])
    }
    finally {
      await sql.end()
    }
    for (const instance of instances) expect((await request(instance.url, '/api/ready')).status).toBe(200)
  })

  it('keeps at most DATABASE_POOL_SIZE connections to Postgres (and its LISTEN) however many requests wait for one', async () => {
    const own = await createTestDatabase('pool-size')
    const sql = postgres(own.url, { max: 1, onnotice: () => {} })
    let instance: Awaited<ReturnType<typeof startApp>> | undefined
    try {
      const app = await startApp({ databaseUrl: own.url, redisUrl, label: 'pool-size', env: { DATABASE_POOL_SIZE: '2' } })
      instance = app
      const connections = async () => (await sql<[{ count: number }]>`select count(*)::int as count from pg_stat_activity where datname = current_database() and application_name = 'idempotent-checkout'`)[0].count
      const { secretKey } = await createTenant(app.url, 'pool-size')
      let most = 0
      let sending = true
      const sampling = (async () => {
        while (sending) {
          most = Math.max(most, await connections())
          await sleep(5)
        }
      })()
      const statuses = await Promise.all(Array.from({ length: 60 }, () => postOrder(app.url, { secretKey, key: newIdempotencyKey(), body: validOrderBody() }).then(response => response.status)))
      sending = false
      await sampling
      expect(statuses.filter(status => status === 201)).toHaveLength(60)
      expect(most).toBeGreaterThan(0)
      expect(most).toBeLessThanOrEqual(3)
    }
    finally {
      await instance?.stop()
      await sql.end()
      await own.drop()
    }
  })

  it('serves no API request before the migrations finished (another instance holds the migration lock)', async () => {
    const fresh = await createTestDatabase('startup-gate')
    const otherInstance = postgres(fresh.url, { max: 1, onnotice: () => {} })
    try {
      await otherInstance`select pg_advisory_lock(${MIGRATION_LOCK_ID})`
      const app = await startApp({ databaseUrl: fresh.url, redisUrl, label: 'startup-gate', until: 'listening' })
      const readiness = request(app.url, '/api/ready', { timeoutMs: 20_000 })
      const early = await Promise.race([readiness.then(() => 'answered'), sleep(1_000).then(() => 'still waiting')])
      expect(early).toBe('still waiting')
      const [{ tables }] = await otherInstance<[{ tables: number }]>`select count(*)::int as tables from information_schema.tables where table_schema = 'public'`
      expect(tables).toBe(0)

      await otherInstance`select pg_advisory_unlock(${MIGRATION_LOCK_ID})`
      expect((await readiness).status).toBe(200)
    }
    finally {
      await otherInstance.end()
      await stopAll()
      await fresh.drop()
    }
  })

  it('refuses a signing secret that is no key (Node would decode whsec_!!!!… to an empty HMAC key), naming it', async () => {
    const start = startApp({ databaseUrl: database.url, redisUrl, label: 'startup-empty-key', env: { WEBHOOK_STANDARD_SECRET: 'whsec_!!!!!!!!!!!!!!!!!!!!' } })
    await expect(start).rejects.toThrow(/exited with code 1 before it was ready[\s\S]*Invalid configuration \(1 setting to fix\):\n {2}WEBHOOK_STANDARD_SECRET: must be "whsec_" followed by the canonical base64 of a key of at least 24 random bytes/)
  })

  it('refuses a deployment that names no PAYMENT_PROVIDER, exiting 1', async () => {
    const start = startApp({ databaseUrl: database.url, redisUrl, label: 'startup-no-provider', env: { PAYMENT_PROVIDER: '' } })
    await expect(start).rejects.toThrow(/exited with code 1 before it was ready[\s\S]*\n {2}PAYMENT_PROVIDER: missing — where orders ask for their payments: stripe, midtrans, or mockpay .*; required with DATABASE_URL\b/)
  })

  it('refuses PAYMENT_PROVIDER=stripe without STRIPE_SECRET_KEY, naming it, and exits 1', async () => {
    const start = startApp({ databaseUrl: database.url, redisUrl, label: 'startup-stripe-no-key', env: { ...stripeOff, STRIPE_SECRET_KEY: '' } })
    await expect(start).rejects.toThrow(/exited with code 1 before it was ready[\s\S]*\n {2}STRIPE_SECRET_KEY: missing — .*; required because PAYMENT_PROVIDER=stripe: it creates PaymentIntents with it\b/)
  })

  it('refuses PAYMENT_PROVIDER=mockpay with MOCKPAY_ENABLED=false (orders would ask a provider that is off), exiting 1', async () => {
    const start = startApp({ databaseUrl: database.url, redisUrl, label: 'startup-mockpay-off', env: { PAYMENT_PROVIDER: 'mockpay', MOCKPAY_ENABLED: 'false' } })
    await expect(start).rejects.toThrow(/exited with code 1 before it was ready[\s\S]*\n {2}MOCKPAY_ENABLED: is false, but PAYMENT_PROVIDER=mockpay needs MOCKPAY_ENABLED: the simulated provider is the one orders would ask\./)
  })

  it('refuses mockpay without its own secret in a deployment, naming MOCKPAY_WEBHOOK_SECRET', async () => {
    const start = startApp({ databaseUrl: database.url, redisUrl, label: 'startup-mockpay-secret', env: { MOCKPAY_ENABLED: 'true', MOCKPAY_WEBHOOK_SECRET: '' } })
    await expect(start).rejects.toThrow(/exited with code 1 before it was ready[\s\S]*\n {2}MOCKPAY_WEBHOOK_SECRET: missing — /)
  })

  it('warns in the log and, to the ops token only, in /api/ready about each of FAULTS_ENABLED, MOCKPAY_ENABLED, CHECKOUT_DEMO_ENABLED and WEBHOOK_ENDPOINTS_ALLOW_PRIVATE on with DATABASE_URL', async () => {
    const app = await startApp({ databaseUrl: database.url, redisUrl, label: 'startup-warnings', env: { FAULTS_ENABLED: 'true', MOCKPAY_ENABLED: 'true', CHECKOUT_DEMO_ENABLED: 'true', WEBHOOK_ENDPOINTS_ALLOW_PRIVATE: 'true' } })
    // Anyone (a load balancer) learns whether the instance is ready, never which unsafe switches are on.
    for (const headers of [{}, { authorization: 'Bearer not-the-ops-token' }] as Array<Record<string, string>>) {
      const anonymous = await request(app.url, '/api/ready', { headers })
      expect(anonymous.status, anonymous.text).toBe(200)
      expect(Object.keys(anonymous.json).sort()).toEqual(['checks', 'status'])
      expect(anonymous.json.status).toBe('ready')
      expect(anonymous.text).not.toMatch(/FAULTS_ENABLED|MOCKPAY|CHECKOUT_DEMO|ALLOW_PRIVATE|webhooks|payments/)
    }
    const ready = await opsRequest(app.url, '/api/ready')
    expect(ready.status, ready.text).toBe(200)
    expect(ready.json.warnings).toEqual([
      { setting: 'FAULTS_ENABLED', detail: expect.stringMatching(/X-Fault header\. Tests only: unset it in production\.$/) },
      { setting: 'MOCKPAY_ENABLED', detail: expect.stringMatching(/paid or refunded .* without paying.*set MOCKPAY_ENABLED=false in production\.$/) },
      { setting: 'CHECKOUT_DEMO_ENABLED', detail: expect.stringMatching(/as the demo tenant without a secret key\. Demo only: set CHECKOUT_DEMO_ENABLED=false in production\.$/) },
      { setting: 'WEBHOOK_ENDPOINTS_ALLOW_PRIVATE', detail: expect.stringMatching(/loopback, private and link-local addresses.*unset it in production\.$/) },
    ])
    // One warn line each, at start-up, with the same setting and detail.
    const lines = ['FAULTS_ENABLED', 'MOCKPAY_ENABLED', 'CHECKOUT_DEMO_ENABLED', 'WEBHOOK_ENDPOINTS_ALLOW_PRIVATE'].flatMap(setting => logLines(app, `${setting} is on: unsafe in production`))
    expect(lines.map(({ level, setting, detail }) => ({ level, setting, detail }))).toEqual(ready.json.warnings.map((warning: object) => ({ level: 'warn', ...warning })))
  })

  it('lists no warnings when none of them is on', async () => {
    // MOCKPAY_ENABLED=false (in stripeOff) needs another provider than mockpay.
    const app = await startApp({ databaseUrl: database.url, redisUrl, label: 'startup-no-warnings', env: { FAULTS_ENABLED: 'false', CHECKOUT_DEMO_ENABLED: 'false', ...stripeOff } })
    const ready = await opsRequest(app.url, '/api/ready')
    expect(ready.status, ready.text).toBe(200)
    expect(ready.json.warnings).toEqual([])
    expect(app.output()).not.toMatch(/unsafe in production/)
  })

  it('starts on the patched postgres.js it was built with; a copy of the build without the patch\'s marker exits 1 saying what to run', async () => {
    // The normal case: the build's driver carries the marker.
    const app = await startApp({ databaseUrl: database.url, redisUrl, label: 'startup-patched-driver' })
    expect((await request(app.url, '/api/ready')).status).toBe(200)
    await app.stop()

    // Wherever the build put the driver (bundled into a chunk or traced into .output/server/node_modules), take its marker out.
    const copy = mkdtempSync(join(tmpdir(), 'ic-unpatched-build-'))
    try {
      const output = dirname(dirname(serverEntry))
      cpSync(output, join(copy, '.output'), { recursive: true })
      // The patch's statement that sets the marker (the app's own check names the same symbol: left alone).
      const setsMarker = /Object\.defineProperty\(\w+, Symbol\.for\((["'])idempotent-checkout\.postgres\.deferred-write-fix\1\), \{ value: true \}\)/g
      const patchedFiles = readdirSync(join(copy, '.output/server'), { recursive: true, encoding: 'utf8' })
        .filter(file => /\.[cm]?js$/.test(file))
        .map(file => join(copy, '.output/server', file))
        .filter(path => new RegExp(setsMarker.source).test(readFileSync(path, 'utf8')))
      expect(patchedFiles.length).toBeGreaterThan(0)
      for (const path of patchedFiles) writeFileSync(path, readFileSync(path, 'utf8').replace(setsMarker, 'undefined'))
      const port = await freePort()
      const unpatched = spawnManaged({
        label: 'startup-unpatched-driver',
        args: [join(copy, '.output/server/index.mjs')],
        env: { ...appEnv({ databaseUrl: database.url, redisUrl, label: 'startup-unpatched-driver' }), PORT: String(port) },
      })
      expect(await unpatched.exited).toBe(1)
      expect(unpatched.output()).toContain('postgres.js is missing the fix in patches/postgres+3.4.9.patch')
      expect(unpatched.output()).toContain('Did `npm ci` run with --ignore-scripts? Run `npx patch-package`, rebuild, and start again.')
    }
    finally {
      rmSync(copy, { recursive: true, force: true })
    }
  })

  it('embedded: generates the missing secrets, prints them, and they work', async () => {
    const app = await startApp({
      redisUrl: null,
      env: { PGLITE_DIR: pgliteDir, OPS_TOKEN: '', WEBHOOK_STANDARD_SECRET: '', WEBHOOK_STRIPE_SECRET: '', MIDTRANS_SERVER_KEY: '', MOCKPAY_WEBHOOK_SECRET: '' },
    })
    const printed = /Generated development secrets[\s\S]*?OPS_TOKEN=(\S+)/.exec(app.output())
    expect(printed, app.output()).not.toBeNull()
    expect(app.output()).toMatch(/WEBHOOK_STANDARD_SECRET=whsec_\S{20,}/)
    expect(app.output()).toMatch(/MOCKPAY_WEBHOOK_SECRET=whsec_\S{20,}/)
    const opsToken = printed![1]!
    const created = await opsRequest(app.url, '/api/ops/tenants', { method: 'POST', token: opsToken, body: { name: 'embedded' } })
    expect(created.status).toBe(201)
    expect(created.json.secretKey).toMatch(/^sk_/)
  })
})
