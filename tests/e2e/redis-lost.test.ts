import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { AppProcess } from '../support/app'
import { type Stack, startStack } from '../support/cluster'
import { createTenant, request } from '../support/http'
import { opsRequest } from '../support/ops'
import { openOrderRows, type OrderRows } from '../support/order-rows'
import { appDatabase } from '../support/postgres-topology'
import { postOrder, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { startRedisServer, type TestRedisServer } from '../support/redis-server'
import { describeWithServices } from '../support/services'
import { expectIdenticalStormExactlyOnce, ordersPerCart, printStormFigures, runStorm } from '../support/storm'

// Postgres alone decides who executes a key: with Redis gone the instances keep taking orders
// exactly once and only readiness reports the loss. A test-owned redis-server is killed and brought
// back (empty) mid-file.

describeWithServices('Redis lost and back', ['postgres'], () => {
  let stack: Stack | undefined
  let redisServer: TestRedisServer | undefined
  let rows: OrderRows
  let instances: AppProcess[]

  beforeAll(async () => {
    redisServer = await startRedisServer()
    stack = await startStack({ label: 'redis-lost', redisUrl: redisServer.url, instances: 2 })
    instances = stack.instances
    rows = openOrderRows(stack.databaseUrl)
  })

  afterAll(async () => {
    await rows?.close()
    await stack?.close()
    await redisServer?.stop()
  })

  async function createAndReplayOrder(baseUrl: string, tenantName: string): Promise<void> {
    const { tenantId, secretKey } = await createTenant(baseUrl, tenantName)
    const order = { secretKey, key: `redis-lost-${randomUUID()}`, body: validOrderBody() }
    const { cartId } = order.body

    const created = await postOrder(baseUrl, order)
    expect(created.status).toBe(201)
    expect(created.json.idempotency.replayed).toBe(false)
    const orders = await rows.ordersForCart(tenantId, cartId)
    expect(orders).toHaveLength(1)
    expect(created.json.id).toBe(orders[0]!.id)

    const replayed = await postOrder(baseUrl, order)
    expect(replayed.status).toBe(201)
    expect(replayed.json.id).toBe(created.json.id)
    expect(replayed.json.idempotency.replayed).toBe(true)
    expect(replayed.headers.get('idempotent-replayed')).toBe('true')
    expect(await rows.ordersForCart(tenantId, cartId)).toHaveLength(1)
  }

  describe('while Redis is down', () => {
    beforeAll(async () => {
      await redisServer!.stop()
    })

    it('a new order succeeds and its replay works', async () => {
      await createAndReplayOrder(instances[0]!.url, 'redis-down-single')
    })

    it('a storm of 20 keys × 6 concurrent requests over both instances executes each key once', async () => {
      const { tenantId, secretKey } = await createTenant(instances[1]!.url, 'redis-down-storm')
      const storm = await runStorm({
        instances,
        secretKey,
        keyCount: 20,
        requestsPerKey: 6,
        label: 'redis-down',
        plan: ({ requestIndex, cartId }) => ({
          body: validOrderBody({ cartId }),
          // Pairs alternate, so both instances get clients that wait and clients that take a 409.
          headers: requestIndex % 4 >= 2 ? { prefer: 'wait=5' } : undefined,
          variant: 0,
        }),
      })
      printStormFigures('Storm without Redis', storm, instances, await ordersPerCart(rows, tenantId))
      await expectIdenticalStormExactlyOnce(storm, rows, tenantId)
    })

    it('/api/ready answers 503 naming the unreachable lock backend', async () => {
      for (const instance of instances) {
        const ready = await opsRequest(instance.url, '/api/ready')
        expect(ready.status).toBe(503)
        expect(ready.headers.get('retry-after')).toBe('2')
        expect(ready.json).toEqual({
          status: 'unavailable',
          checks: {
            database: { driver: 'postgres', poolMode: appDatabase(stack!.databaseUrl).poolMode, ok: true, latencyMs: expect.any(Number) },
            locks: { backend: 'redis', ok: false, latencyMs: expect.any(Number) },
          },
          // The test environment (DATABASE_URL, FAULTS_ENABLED and MOCKPAY_ENABLED on) is one to warn about.
          warnings: [{ setting: 'FAULTS_ENABLED', detail: expect.any(String) }, { setting: 'MOCKPAY_ENABLED', detail: expect.any(String) }],
          // Every provider's secret is set for test instances; Midtrans is served only by a Midtrans deployment.
          webhooks: { providers: ['standard', 'stripe', 'mockpay'] },
          payments: expect.objectContaining({ provider: 'mockpay' }),
        })
      }
    })
  })

  describe('after Redis is back', () => {
    beforeAll(async () => {
      await redisServer!.start()
    })

    it('/api/ready returns to 200 within a few seconds and orders still work', async () => {
      for (const instance of instances) {
        await pollUntil(`${instance.url}/api/ready answers 200`, async () => (await request(instance.url, '/api/ready')).status === 200, { timeoutMs: 8_000, intervalMs: 200 })
        const ready = await opsRequest(instance.url, '/api/ready')
        expect(ready.json).toEqual({
          status: 'ready',
          checks: {
            database: { driver: 'postgres', poolMode: appDatabase(stack!.databaseUrl).poolMode, ok: true, latencyMs: expect.any(Number) },
            locks: { backend: 'redis', ok: true, latencyMs: expect.any(Number) },
          },
          warnings: [{ setting: 'FAULTS_ENABLED', detail: expect.any(String) }, { setting: 'MOCKPAY_ENABLED', detail: expect.any(String) }],
          // Every provider's secret is set for test instances; Midtrans is served only by a Midtrans deployment.
          webhooks: { providers: ['standard', 'stripe', 'mockpay'] },
          payments: expect.objectContaining({ provider: 'mockpay' }),
        })
      }
      await createAndReplayOrder(instances[1]!.url, 'redis-back')
    })
  })
})
