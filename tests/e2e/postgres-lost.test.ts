import postgres from 'postgres'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { type AppProcess, fastJobsEnv, startApp, stopAll } from '../support/app'
import { createTenant, request } from '../support/http'
import { expectProblem, newIdempotencyKey, postOrder, type TenantCredentials, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { createTestDatabase, describeWithServices, redisUrl } from '../support/services'
import { proxyDatabase, type TcpProxy } from '../support/tcp-proxy'
import { deliver, newWebhookId, nowSeconds, standardBody, standardDelivery, webhookRowCounts } from '../support/webhooks'

// docs/api.md#create-an-order--exactly-once and docs/webhooks.md: with the idempotency store
// unreachable the API answers 503 + Retry-After and never executes unguarded (a request this
// instance finished still replays from its memory); once Postgres is back, the client's retry with
// the same key executes once, and a provider's redelivery (same webhook-id, new timestamp and
// signature) is processed once.

describeWithServices('Postgres unreachable', ['postgres', 'redis'], () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>
  let proxy: TcpProxy
  let app: AppProcess
  let tenant: TenantCredentials
  let sql: postgres.Sql

  beforeAll(async () => {
    database = await createTestDatabase('postgres-lost')
    const proxied = await proxyDatabase(database.url)
    proxy = proxied.proxy
    app = await startApp({
      databaseUrl: proxied.url,
      redisUrl,
      label: 'postgres-lost',
      // The in-app worker applies a webhook's event once the database is back.
      env: fastJobsEnv,
    })
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

  it('a longer outage: request after request is answered 503 at once, none kept waiting by the pool\'s reconnect attempts', async () => {
    await proxy.cut()
    const statuses: Array<number | string> = []
    try {
      // Each request makes the pool try (and fail) to reconnect. A client that gives up after 5 s
      // sees a network error if a request was parked behind a growing reconnect delay.
      for (let attempt = 0; attempt < 20; attempt++) {
        const answer = await postOrder(app.url, { secretKey: tenant.secretKey, key: newIdempotencyKey(), body: validOrderBody(), timeoutMs: 5_000 })
          .then(response => `${response.status} ${response.json?.type} Retry-After ${response.headers.get('retry-after')}`, (error: Error) => error.message)
        statuses.push(answer)
      }
    }
    finally {
      await proxy.restore()
    }
    expect(statuses).toEqual(Array.from({ length: 20 }, () => '503 /problems/service-unavailable Retry-After 2'))
    const after = await postOrder(app.url, { secretKey: tenant.secretKey, key: newIdempotencyKey(), body: validOrderBody(), timeoutMs: 10_000 })
    expect(after.status, after.text).toBe(201)
  })

  it('a request this instance finished replays from its memory while Postgres is down; a new key gets 503', async () => {
    // A key this instance has just read, so that it is still known (SECRET_KEY_CACHE_MS, 10 s) when
    // Postgres goes: one read long before would have expired by then on a slow machine.
    const shop = await createTenant(app.url, 'postgres-lost replay')
    const key = newIdempotencyKey()
    const body = validOrderBody()
    const created = await postOrder(app.url, { secretKey: shop.secretKey, key, body })
    expect(created.status, created.text).toBe(201)

    await proxy.cut()
    try {
      // A finished record cannot change before it expires: replaying it needs no database.
      const replay = await postOrder(app.url, { secretKey: shop.secretKey, key, body })
      expect(replay.status).toBe(201)
      expect(replay.headers.get('idempotent-replayed')).toBe('true')
      expect(replay.json).toEqual({ ...created.json, idempotency: { key, replayed: true } })
      expectProblem(await postOrder(app.url, { secretKey: shop.secretKey, key, body: validOrderBody() }), 'idempotency-key-reused')
      const fresh = await postOrder(app.url, { secretKey: shop.secretKey, key: newIdempotencyKey(), body: validOrderBody() })
      expectProblem(fresh, 'service-unavailable')
      expect(Number(fresh.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    }
    finally {
      await proxy.restore()
    }
    expect((await sql`select id from orders where cart_id = ${body.cartId}`).map(row => row.id)).toEqual([created.json.id])
  })

  it('a webhook gets 503 with Retry-After and nothing is stored; the provider\'s redelivery after recovery is processed once, the next one replayed', async () => {
    const created = await postOrder(app.url, { secretKey: tenant.secretKey, key: newIdempotencyKey(), body: validOrderBody() })
    expect(created.status, created.text).toBe(201)
    const orderId: string = created.json.id
    // The order's own job done first, so no row below is the worker's.
    await pollUntil(`the create_intent job of ${orderId} completed`, async () => {
      const rows = await sql`select status from jobs where resource_id = ${`order:${orderId}`}`
      return rows.length === 1 && rows[0]!.status === 'completed'
    }, { timeoutMs: 20_000, intervalMs: 100 })

    const webhookId = newWebhookId()
    const body = standardBody('payment.succeeded', { orderId, paymentId: 'pay_outage', amount: 150_000, currency: 'IDR' }, new Date().toISOString())
    const firstAt = nowSeconds()
    const before = await webhookRowCounts(sql)

    await proxy.cut()
    const whileDown = await deliver(app.url, standardDelivery(webhookId, body, { at: firstAt }))
    expectProblem(whileDown, 'service-unavailable')
    expect(Number(whileDown.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    await proxy.restore()

    expect(await webhookRowCounts(sql)).toEqual(before)
    expect(await sql`select id from webhook_events where event_id = ${webhookId}`).toEqual([])
    expect(await sql`select id from idempotency_records where key = ${webhookId}`).toEqual([])
    expect(await sql`select id from jobs where idempotency_key = ${webhookId}`).toEqual([])

    // The provider's redelivery: same id and body, a later timestamp, so another signature.
    const redelivery = standardDelivery(webhookId, body, { at: firstAt + 5 })
    expect(redelivery.headers['webhook-signature']).not.toBe(standardDelivery(webhookId, body, { at: firstAt }).headers['webhook-signature'])
    const accepted = await deliver(app.url, redelivery)
    expect(accepted.status, accepted.text).toBe(200)
    expect(accepted.json).toEqual({ received: true, eventId: webhookId, idempotency: { key: webhookId, replayed: false } })

    await pollUntil(`order ${orderId} is paid`, async () => {
      const [order] = await sql`select status from orders where id = ${orderId}`
      return order!.status === 'paid'
    }, { timeoutMs: 20_000, intervalMs: 100 })
    const fetched = await request(app.url, `/api/orders/${orderId}`, { headers: { authorization: `Bearer ${tenant.secretKey}` } })
    expect(fetched.json).toMatchObject({ id: orderId, status: 'paid' })

    const events = await sql`select id, status from webhook_events where event_id = ${webhookId}`
    expect(events).toEqual([{ id: expect.stringMatching(/^whe_/), status: 'applied' }])
    await pollUntil('the webhook.apply job completed', async () => {
      const jobs = await sql`select status from jobs where kind = 'webhook.apply' and idempotency_key = ${webhookId}`
      return jobs.length === 1 && jobs[0]!.status === 'completed'
    }, { timeoutMs: 20_000, intervalMs: 100 })
    expect(await sql`select kind, dedupe_key from jobs where idempotency_key = ${webhookId}`).toEqual([{ kind: 'webhook.apply', dedupe_key: events[0]!.id }])
    expect(await sql`select status, response_status from idempotency_records where scope = 'provider:standard' and key = ${webhookId}`)
      .toEqual([{ status: 'succeeded', response_status: 200 }])
    // The event, its record, its job, the paid order's two effects, one history row.
    const processed = await webhookRowCounts(sql)
    expect(processed).toEqual({
      webhookEvents: before.webhookEvents + 1,
      idempotencyRecords: before.idempotencyRecords + 1,
      jobs: before.jobs + 3,
      history: before.history + 1,
    })

    const again = await deliver(app.url, standardDelivery(webhookId, body, { at: firstAt + 10 }))
    expect(again.status, again.text).toBe(200)
    expect(again.headers.get('idempotent-replayed')).toBe('true')
    expect(again.json).toEqual({ ...accepted.json, idempotency: { key: webhookId, replayed: true } })
    expect(await webhookRowCounts(sql)).toEqual(processed)
  })
})
