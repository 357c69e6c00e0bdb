import postgres from 'postgres'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { type AppProcess, fastJobsEnv, startApp, stopAll } from '../support/app'
import { createTenant } from '../support/http'
import { newIdempotencyKey, postOrder, validOrderBody } from '../support/orders'
import { type Pgbouncer, startPgbouncer } from '../support/pgbouncer.mjs'
import { pollUntil } from '../support/poll'
import { throughPooler } from '../support/postgres-topology'
import { createTestDatabase, describeWithServices, postgresAdminUrl, redisUrl } from '../support/services'

// The built server as a team on a pooled URL runs it: DATABASE_URL is PgBouncer in transaction mode
// with its usual settings (ignore_startup_parameters = extra_float_digits only), no direct URL, two
// instances with their workers on. Start-up becomes ready; every order is answered 201; every job
// completes although no LISTEN survives the pooler (the workers poll).

const orderCount = 1_500
const concurrency = 32
const jobsSettleMs = 30_000

describeWithServices('the built server behind PgBouncer in transaction mode, no direct URL', ['postgres', 'redis'], () => {
  let pooler: Pgbouncer
  let database: Awaited<ReturnType<typeof createTestDatabase>>
  let sql: postgres.Sql
  let instances: AppProcess[]

  beforeAll(async () => {
    pooler = await startPgbouncer({ serverUrl: postgresAdminUrl })
    database = await createTestDatabase('pooled-e2e')
    sql = postgres(database.url, { max: 2, onnotice: () => {} })
    const env = {
      ...fastJobsEnv,
      JOB_POLL_INTERVAL_MS: '1000',
      // Overrides what the run's topology would choose: this suite owns its pooler.
      DATABASE_URL: throughPooler(database.url, `postgres://127.0.0.1:${pooler.port}`),
      DATABASE_POOL_MODE: 'transaction',
      DATABASE_DIRECT_URL: '',
      LOG_LEVEL: 'info',
    }
    instances = await Promise.all(['a', 'b'].map(name => startApp({ redisUrl, label: `pooled-${name}`, env })))
  })

  afterAll(async () => {
    await stopAll()
    await sql?.end()
    await database?.drop()
    await pooler?.destroy()
  })

  it('start-up is ready, says it runs behind a transaction pooler and polls for jobs', async () => {
    const ready = await fetch(`${instances[0]!.url}/api/ready`)
    expect(ready.status).toBe(200)
    expect((await ready.json()).checks.database).toMatchObject({ driver: 'postgres', poolMode: 'transaction', ok: true })
    const startLine = instances[0]!.output().split('\n').find(line => line.includes('"database ready"'))
    expect(JSON.parse(startLine!)).toMatchObject({ poolMode: 'transaction', jobWakeUps: 'poll every 1000 ms' })
  })

  it(`${orderCount} new orders at ${concurrency} concurrent: every one 201, no 5xx, and every job completed within ${jobsSettleMs / 1000} s of the last`, async () => {
    const { tenantId, secretKey } = await createTenant(instances[0]!.url, 'pooled')
    const statuses = new Map<number, number>()
    let next = 0
    const client = async () => {
      for (let index = next++; index < orderCount; index = next++) {
        const instance = instances[index % instances.length]!
        const response = await postOrder(instance.url, { secretKey, key: newIdempotencyKey(), body: validOrderBody() })
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1)
      }
    }
    await Promise.all(Array.from({ length: concurrency }, client))
    expect(Object.fromEntries(statuses)).toEqual({ 201: orderCount })

    const [placed] = await sql<Array<{ orders: number }>>`select count(*)::int as orders from orders where tenant_id = ${tenantId}`
    expect(placed!.orders).toBe(orderCount)
    const unfinished = async () => (await sql<Array<{ count: number }>>`select count(*)::int as count from jobs where status <> 'completed'`)[0]!.count
    await pollUntil('every job completed', async () => (await unfinished()) === 0, { timeoutMs: jobsSettleMs, intervalMs: 250 })
    const [jobs] = await sql<Array<{ completed: number }>>`select count(*)::int as completed from jobs where status = 'completed'`
    expect(jobs!.completed).toBeGreaterThanOrEqual(orderCount)
    // The SQLSTATE as the logger writes it (its code, or the message it puts in the driver's place):
    // a bare 26000 also turns up inside request ids and keys, which are hex.
    for (const instance of instances) expect(instance.output()).not.toMatch(/"code":"26000"|database error 26000|prepared statement .* does not exist|reading 'length'/)
  })
})
