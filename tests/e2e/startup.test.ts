import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { MIGRATION_LOCK_ID } from '../../server/db/client'
import { startApp, stopAll } from '../support/app'
import { request } from '../support/http'
import { createTestDatabase, describeWithServices, redisUrl } from '../support/services'

// Start-up is part of the contract: a bad configuration or a failed migration stops the process
// with a message, several instances migrate one database safely, and dev secrets are printed.

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
    await expect(start).rejects.toThrow(/exited with code 1 before it was ready[\s\S]*Invalid configuration:[\s\S]*IDEMPOTENCY_TTL_SECONDS: must be a whole number/)
  })

  it('refuses to default a secret when DATABASE_URL is set (a deployment)', async () => {
    const start = startApp({ databaseUrl: database.url, redisUrl, env: { OPS_TOKEN: '', MIDTRANS_SERVER_KEY: '' } })
    await expect(start).rejects.toThrow(/exited with code 1 before it was ready[\s\S]*Missing required secrets: OPS_TOKEN, MIDTRANS_SERVER_KEY/)
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
      expect(tables.map(t => t.name).sort()).toEqual(['api_keys', 'idempotency_records', 'invoices', 'jobs', 'mailbox', 'order_status_history', 'orders', 'payment_intents', 'request_log', 'side_effects', 'tenants', 'webhook_events'])
    }
    finally {
      await sql.end()
    }
    for (const instance of instances) expect((await request(instance.url, '/api/ready')).status).toBe(200)
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

  it('embedded: generates the missing secrets, prints them, and they work', async () => {
    const app = await startApp({
      redisUrl: null,
      env: { PGLITE_DIR: pgliteDir, OPS_TOKEN: '', WEBHOOK_STANDARD_SECRET: '', WEBHOOK_STRIPE_SECRET: '', MIDTRANS_SERVER_KEY: '' },
    })
    const printed = /Generated development secrets[\s\S]*?OPS_TOKEN=(\S+)/.exec(app.output())
    expect(printed, app.output()).not.toBeNull()
    expect(app.output()).toMatch(/WEBHOOK_STANDARD_SECRET=whsec_\S{20,}/)
    const opsToken = printed![1]!
    const created = await request(app.url, '/api/ops/tenants', { method: 'POST', headers: { authorization: `Bearer ${opsToken}` }, body: { name: 'embedded' } })
    expect(created.status).toBe(201)
    expect(created.json.secretKey).toMatch(/^sk_/)
  })
})
