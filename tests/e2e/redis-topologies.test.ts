import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { tenantScope } from '../../shared/resources'
import { type AppProcess, startApp } from '../support/app'
import { type Stack, startStack } from '../support/cluster'
import { createTenant, request } from '../support/http'
import { processingLockKey } from '../support/in-flight'
import { openOrderRows, type OrderRows } from '../support/order-rows'
import { postOrder, problemSlug, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import {
  clusterEnv, command, describeWithRedisServer, keysByNode, type RedisClusterProcesses, redisHasTls, type RedisSentinelProcesses,
  sentinelEnv, startRedisCluster, startRedisSentinel, startTlsRedis, type TlsRedisProcess,
} from '../support/redis-topologies'
import { createTestDatabase, describeWithServices } from '../support/services'
import { describeAnswer, everyAnswer, expectIdenticalStormExactlyOnce, expectOnlyAnswerKinds, ordersPerCart, printStormFigures, runStorm, type StormKey } from '../support/storm'

// The built server on each Redis topology besides one node: a Redis Cluster of 3 masters
// (REDIS_CLUSTER_NODES only, no REDIS_URL), a master and a replica behind 3 Sentinels with a failover
// in the middle of a storm, and a Redis that speaks only TLS (rediss://, REDIS_CA_FILE). The Redis
// servers are this file's own child processes; Postgres is the shared test server.

const keyCount = 30
const requestsPerKey = 8
const tlsAvailable = await redisHasTls()

describeWithServices('Redis topologies', ['postgres'], () => {
  describeWithRedisServer('the built server on a Redis Cluster, behind Sentinel and over TLS', () => {
    let cluster: RedisClusterProcesses | undefined
    let sentinel: RedisSentinelProcesses | undefined
    let tls: TlsRedisProcess | undefined
    const stacks: Stack[] = []
    const apps: AppProcess[] = []
    const rows: OrderRows[] = []

    beforeAll(async () => {
      [cluster, sentinel, tls] = await Promise.all([startRedisCluster(), startRedisSentinel({ sentinels: 3 }), tlsAvailable ? startTlsRedis() : undefined])
    })

    afterAll(async () => {
      await Promise.all(rows.map(row => row.close()))
      await Promise.all([...stacks.map(stack => stack.close()), ...apps.map(app => app.stop())])
      await Promise.all([cluster?.stop(), sentinel?.stop(), tls?.stop()])
    })

    async function openStack(label: string, redisEnv: Record<string, string>): Promise<{ stack: Stack, rows: OrderRows }> {
      const stack = await startStack({ label, redisUrl: null, redisEnv, instances: 2 })
      stacks.push(stack)
      const stackRows = openOrderRows(stack.databaseUrl)
      rows.push(stackRows)
      return { stack, rows: stackRows }
    }

    async function expectReady(instance: AppProcess): Promise<void> {
      const ready = await request(instance.url, '/api/ready')
      expect(ready.status).toBe(200)
      expect(ready.json.checks.locks).toEqual({ backend: 'redis', ok: true, latencyMs: expect.any(Number) })
    }

    /** Where a key lives in the cluster: the value on the master that serves its slot. */
    async function clusterValue(key: string): Promise<string | null> {
      const owner = await cluster!.ownerOfSlot(await cluster!.keySlot(key))
      return await command(owner, ['GET', key]) as string | null
    }

    it(`Cluster: REDIS_CLUSTER_NODES alone; a key in flight holds its lock in the cluster; ${keyCount} keys × ${requestsPerKey} copies over two instances, one order each, no 5xx`, async () => {
      const { stack, rows } = await openStack('redis-cluster', clusterEnv(cluster!))
      const [first, second] = stack.instances as [AppProcess, AppProcess]
      for (const instance of stack.instances) await expectReady(instance)
      const { tenantId, secretKey } = await createTenant(first.url, 'redis-cluster')

      // One order held before its commit: its processing lock sits on the master of its slot, and a
      // duplicate at the other instance is told it is in progress.
      const key = `cluster-in-flight-${randomUUID()}`
      const body = validOrderBody()
      const held = postOrder(first.url, { secretKey, key, body, headers: { 'x-fault': 'delay-before-commit=2000' } })
      const lockKey = processingLockKey({ app: first, scope: tenantScope(tenantId), key })
      let lockValue: string | null = null
      await pollUntil(`the processing lock ${lockKey} is in the cluster`, async () => (lockValue = await clusterValue(lockKey)) !== null, { intervalMs: 20 })
      expect(lockValue).toMatch(/^[\w-]{36} \S+$/)
      const duplicate = await postOrder(second.url, { secretKey, key, body })
      expect([duplicate.status, problemSlug(duplicate)]).toEqual([409, 'request-in-progress'])
      expect((await held).status).toBe(201)
      expect(await clusterValue(lockKey)).toBeNull()
      const replayed = await postOrder(second.url, { secretKey, key, body })
      expect([replayed.status, replayed.json.idempotency.replayed]).toEqual([201, true])

      const storm = await runStorm({
        instances: stack.instances,
        secretKey,
        keyCount,
        requestsPerKey,
        label: 'cluster',
        plan: ({ requestIndex, cartId }) => ({ body: validOrderBody({ cartId }), headers: requestIndex % 2 === 1 ? { prefer: 'wait=5' } : undefined, variant: 0 }),
      })
      const stormOrders = new Map([...await ordersPerCart(rows, tenantId)].filter(([cartId]) => cartId !== body.cartId))
      printStormFigures('Storm on a Redis Cluster', storm, stack.instances, stormOrders)
      await expectStormExactlyOnce(storm, rows, tenantId, 1)

      // Every finished response is in the shared replay cache, spread over the masters; no lock is left.
      const prefix = first.redisKeyPrefix!
      const replays = await keysByNode(cluster!.ports, `${prefix}replay:*`)
      expect([...replays.values()].flat()).toHaveLength(keyCount + 1)
      expect([...replays.values()].filter(keys => keys.length > 0).length).toBeGreaterThanOrEqual(2)
      // The locks are released off the response path: gone soon after the last answer, well before
      // their TTL (IDEMPOTENCY_LOCK_TTL_MS, 5 s) could take them.
      await pollUntil('no processing lock is left in the cluster', async () =>
        [...(await keysByNode(cluster!.ports, `${prefix}idempotency:*`)).values()].flat().length === 0, { timeoutMs: 2_000, intervalMs: 50 })
    })

    it(`Sentinel: a failover (SENTINEL FAILOVER) in the middle of a storm of ${keyCount} keys × ${requestsPerKey} copies; one order each, no 5xx but 503 with Retry-After; then the new master holds the keys`, async () => {
      const { stack, rows } = await openStack('redis-sentinel', sentinelEnv(sentinel!))
      const [first, second] = stack.instances as [AppProcess, AppProcess]
      for (const instance of stack.instances) await expectReady(instance)
      const { tenantId, secretKey } = await createTenant(first.url, 'redis-sentinel')
      const before = await sentinel!.masterAddress()

      // Each key's executing request waits a little before its commit (key i: 60·i ms), so that the
      // storm lasts across the failover rather than ending before it.
      const startedAt = performance.now()
      const stormDone = runStorm({
        instances: stack.instances,
        secretKey,
        keyCount,
        requestsPerKey,
        label: 'sentinel',
        plan: ({ keyIndex, requestIndex, cartId }) => ({
          body: validOrderBody({ cartId }),
          headers: { 'x-fault': `delay-before-commit=${60 * keyIndex}`, ...(requestIndex % 2 === 1 ? { prefer: 'wait=5' } : {}) },
          variant: 0,
        }),
      }).then(result => ({ result, endedAt: performance.now() }))
      await sleep(300)
      const failoverStartedAt = performance.now()
      const { from, to } = await sentinel!.failover()
      const switchedAt = performance.now()
      const { result: storm, endedAt } = await stormDone
      console.log(`Sentinel failover 127.0.0.1:${from} → ${to}: asked ${(failoverStartedAt - startedAt).toFixed(0)} ms into the storm, every sentinel named the new master ${(switchedAt - startedAt).toFixed(0)} ms in, storm ended ${(endedAt - startedAt).toFixed(0)} ms in`)
      expect(from).toBe(before.port)
      expect(endedAt).toBeGreaterThan(switchedAt)
      printStormFigures('Storm across a Sentinel failover', storm, stack.instances, await ordersPerCart(rows, tenantId))
      await expectStormExactlyOnce(storm, rows, tenantId, 0, true)

      // Afterwards both instances work on the new master: a key in flight holds its lock there (not
      // on the former master), and its finished response is cached there.
      for (const instance of stack.instances) {
        await pollUntil(`${instance.url}/api/ready answers 200`, async () => (await request(instance.url, '/api/ready')).status === 200, { timeoutMs: 10_000, intervalMs: 200 })
      }
      const key = `sentinel-after-${randomUUID()}`
      const body = validOrderBody()
      const held = postOrder(second.url, { secretKey, key, body, headers: { 'x-fault': 'delay-before-commit=1500' } })
      const lockKey = processingLockKey({ app: second, scope: tenantScope(tenantId), key })
      await pollUntil(`the processing lock ${lockKey} is on the new master 127.0.0.1:${to}`, async () => await command(to, ['EXISTS', lockKey]) === 1, { intervalMs: 20 })
      const duplicate = await postOrder(first.url, { secretKey, key, body })
      expect([duplicate.status, problemSlug(duplicate)]).toEqual([409, 'request-in-progress'])
      expect((await held).status).toBe(201)
      await pollUntil('its response is in the replay cache on the new master', async () =>
        ((await keysByNode([to], `${second.redisKeyPrefix!}replay:*`)).get(to)?.length ?? 0) >= 1)
    })

    it.skipIf(!tlsAvailable)('TLS: rediss:// with REDIS_CA_FILE places an order and replays it; without the CA the server does not trust Redis and says so in readiness', async () => {
      const database = await createTestDatabase('redis-tls')
      const orderRows = openOrderRows(database.url)
      rows.push(orderRows)
      try {
        const [trusted, untrusted] = await Promise.all([
          startApp({ databaseUrl: database.url, redisUrl: tls!.url, redisEnv: { REDIS_CA_FILE: tls!.caFile }, label: 'redis-tls' }),
          startApp({ databaseUrl: database.url, redisUrl: tls!.url, label: 'redis-tls-untrusted', until: 'listening' }),
        ])
        apps.push(trusted, untrusted)
        await expectReady(trusted)
        const { tenantId, secretKey } = await createTenant(trusted.url, 'redis-tls')
        const order = { secretKey, key: `tls-${randomUUID()}`, body: validOrderBody() }
        const created = await postOrder(trusted.url, order)
        expect([created.status, created.json.idempotency.replayed]).toEqual([201, false])
        const replayed = await postOrder(trusted.url, order)
        expect([replayed.status, replayed.json.id, replayed.json.idempotency.replayed]).toEqual([201, created.json.id, true])
        expect(await orderRows.ordersForCart(tenantId, order.body.cartId)).toHaveLength(1)
        const ca = readFileSync(tls!.caFile)
        const cached = await command(tls!.port, ['KEYS', `${trusted.redisKeyPrefix!}replay:*`], { tls: { ca } })
        expect(cached).toHaveLength(1)

        // The certificate is verified: without REDIS_CA_FILE the connection is never made.
        const unready = await request(untrusted.url, '/api/ready')
        expect([unready.status, unready.json.checks.locks.ok]).toEqual([503, false])
      }
      finally {
        await database.drop().catch(() => {})
      }
    })

    it('settings that do not fit together stop start-up with the reason', async () => {
      // A database nobody listens on: start-up stops before it would be opened.
      const refused = await startApp({ databaseUrl: 'postgres://root@127.0.0.1:1/none', redisUrl: 'redis://127.0.0.1:1', redisEnv: clusterEnv(cluster!), label: 'redis-both' })
        .then(() => undefined, (error: Error) => error)
      expect(refused?.message).toMatch(/exited with code [1-9]\d* before it was ready/)
      expect(refused?.message).toContain('set only one of REDIS_URL (one node), REDIS_CLUSTER_NODES (a Redis Cluster) and REDIS_SENTINELS (Sentinel)')
    })
  })
})

/**
 * One order per key, every client holding it (201, the same id), one execution per key; nothing but
 * 201 and 409 in progress on the way, and with `allow503` also 503 service-unavailable, each with
 * Retry-After. `extraOrders`: orders of the tenant placed outside the storm.
 */
async function expectStormExactlyOnce(storm: StormKey[], rows: OrderRows, tenantId: string, extraOrders: number, allow503 = false): Promise<void> {
  if (!allow503 && extraOrders === 0) return expectIdenticalStormExactlyOnce(storm, rows, tenantId)
  expectOnlyAnswerKinds(storm, ['201 executed', '201 replayed', '409 request-in-progress', ...(allow503 ? ['503 service-unavailable'] : [])])
  for (const answer of everyAnswer(storm).filter(seen => describeAnswer(seen).startsWith('503'))) {
    expect(Number(answer.response!.headers.get('retry-after'))).toBeGreaterThan(0)
  }
  const allOrders = await rows.orders(tenantId)
  expect(allOrders).toHaveLength(storm.length + extraOrders)
  for (const { key, cartId, clients } of storm) {
    const cartOrders = allOrders.filter(order => order.cartId === cartId)
    expect(cartOrders, `orders for ${cartId}`).toHaveLength(1)
    expect(await rows.record(tenantId, key)).toEqual({ key, status: 'succeeded', attempts: 1, resourceId: cartOrders[0]!.id, responseStatus: 201, leased: false })
    const finals = clients.map(client => client.result.final)
    expect(finals.map(final => [final.status, final.json.id]), `final answers for ${key}`).toEqual(clients.map(() => [201, cartOrders[0]!.id]))
    expect(finals.filter(final => final.json.idempotency.replayed === false), `executions for ${key}`).toHaveLength(1)
  }
}
