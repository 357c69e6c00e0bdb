import postgres from 'postgres'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { type AppProcess, startApp, stopAll } from '../support/app'
import { createTenant, request } from '../support/http'
import { expectProblem, newIdempotencyKey, postOrder, type TenantCredentials, validOrderBody } from '../support/orders'
import { createTestDatabase, describeWithServices, redisUrl } from '../support/services'
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy'

// SPEC §3: with the idempotency store unreachable the API answers 503 + Retry-After and never
// executes unguarded; once Postgres is back, the client's retry with the same key executes once.

describeWithServices('Postgres unreachable', ['postgres', 'redis'], () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>
  let proxy: TcpProxy
  let app: AppProcess
  let tenant: TenantCredentials
  let sql: postgres.Sql

  beforeAll(async () => {
    database = await createTestDatabase('postgres-lost')
    const direct = new URL(database.url)
    proxy = await startTcpProxy({ host: direct.hostname, port: Number(direct.port || 5432) })
    const proxied = new URL(database.url)
    proxied.port = String(proxy.port)
    app = await startApp({ databaseUrl: proxied.toString(), redisUrl, label: 'postgres-lost' })
    tenant = await createTenant(app.url, 'postgres-lost')
    sql = postgres(database.url, { max: 1, onnotice: () => {} })
  })

  afterAll(async () => {
    await stopAll()
    await proxy?.close()
    await sql?.end()
    await database?.drop()
  })

  it('answers 503 service-unavailable with Retry-After, writes nothing, and the same key executes once Postgres is back', async () => {
    const key = newIdempotencyKey()
    const body = validOrderBody()
    await proxy.cut()

    const whileDown = await postOrder(app.url, { secretKey: tenant.secretKey, key, body })
    expectProblem(whileDown, 'service-unavailable')
    expect(Number(whileDown.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    expect((await request(app.url, '/api/ready')).status).toBe(503)
    expect((await request(app.url, '/api/health')).status).toBe(200)

    await proxy.restore()
    const [{ orders }] = await sql<[{ orders: number }]>`select count(*)::int as orders from orders`
    expect(orders).toBe(0)

    const afterRecovery = await postOrder(app.url, { secretKey: tenant.secretKey, key, body })
    expect(afterRecovery.status, afterRecovery.text).toBe(201)
    expect(afterRecovery.json.idempotency).toEqual({ key, replayed: false })
    const replay = await postOrder(app.url, { secretKey: tenant.secretKey, key, body })
    expect(replay.json).toEqual({ ...afterRecovery.json, idempotency: { key, replayed: true } })
    const rows = await sql`select id from orders where cart_id = ${body.cartId}`
    expect(rows.map(row => row.id)).toEqual([afterRecovery.json.id])
  })
})
