import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import postgres from 'postgres'
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest'
import { LOCK_TIMEOUT_MS } from '@idempotent-checkout/db-kit'
import type { AppProcess } from '../support/app'
import { type Cluster, postOrderUntilAnswered, type Stack, startStack } from '../support/cluster'
import { createTenant, type TestResponse } from '../support/http'
import { openIdempotentTransactions, processingLockKey, untilRequestInFlight } from '../support/in-flight'
import { openOrderRows, type OrderRows } from '../support/order-rows'
import { expectProblem, postOrder, type TenantCredentials, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { describeWithServices, redisUrl } from '../support/services'

// "The incident": the server committed (or died mid-flight), the client never heard, the client
// retried — possibly on another instance. Two instances share one database and one Redis prefix;
// a short processing-lock TTL lets the key of a dead owner come free within the test.

const lockTtlMs = 3000

describeWithServices('incidents across two instances', ['postgres', 'redis'], () => {
  let stack: Stack | undefined
  let rows: OrderRows
  let cluster: Cluster
  let instanceA: AppProcess
  let instanceB: AppProcess
  let tenant: TenantCredentials
  let sql: postgres.Sql
  let redis: Redis

  beforeAll(async () => {
    stack = await startStack({ label: 'incidents', redisUrl, env: { IDEMPOTENCY_LOCK_TTL_MS: String(lockTtlMs) }, instances: [{ name: 'A' }, { name: 'B' }] })
    cluster = stack.cluster
    ;[instanceA, instanceB] = stack.instances as [AppProcess, AppProcess]
    rows = openOrderRows(stack.databaseUrl)
    sql = postgres(stack.databaseUrl, { max: 1, onnotice: () => {} })
    redis = new Redis(redisUrl)
    tenant = await createTenant(instanceB.url, 'incidents')
  })

  // Some incidents kill A; every test starts with a live A (a replacement, as an orchestrator would).
  beforeEach(async () => {
    const aHasExited = await Promise.race([instanceA.exited.then(() => true), new Promise<boolean>(resolve => setImmediate(() => resolve(false)))])
    if (aHasExited) instanceA = await cluster.startInstance('A-replacement')
  })

  afterAll(async () => {
    instanceA?.kill('SIGCONT')
    await rows?.close()
    await sql?.end()
    redis?.disconnect()
    await stack?.close()
  })

  function newOrder() {
    const body = validOrderBody()
    return { key: `incident-${randomUUID()}`, cartId: body.cartId, body }
  }

  /** The order's request as any instance runs it: its processing lock lives under the cluster's prefix. */
  const requestOf = (order: ReturnType<typeof newOrder>) => ({ app: { redisKeyPrefix: cluster.redisKeyPrefix }, scope: `tenant:${tenant.tenantId}`, key: order.key })
  const lockKeyOf = (order: ReturnType<typeof newOrder>) => processingLockKey(requestOf(order))

  const send = (baseUrl: string, order: ReturnType<typeof newOrder>, headers?: Record<string, string>, timeoutMs?: number) =>
    postOrder(baseUrl, { secretKey: tenant.secretKey, key: order.key, body: order.body, headers, timeoutMs })

  const retryUntilAnswered = (baseUrls: string[], order: ReturnType<typeof newOrder>) =>
    postOrderUntilAnswered({ baseUrls, secretKey: tenant.secretKey, key: order.key, body: order.body, deadlineMs: 20_000 })

  async function theOnlyOrderId(cartId: string): Promise<string> {
    const orders = await rows.ordersForCart(tenant.tenantId, cartId)
    expect(orders, `orders for ${cartId}`).toHaveLength(1)
    return orders[0]!.id
  }

  function expectCreated(response: TestResponse, orderId: string, replayed: boolean): void {
    expect(response.status).toBe(201)
    expect(response.json.id).toBe(orderId)
    expect(response.json.idempotency.replayed).toBe(replayed)
    expect(response.headers.get('location')).toBe(`/api/orders/${orderId}`)
    expect(response.headers.get('idempotent-replayed')).toBe(replayed ? 'true' : null)
  }

  it('drop-after-commit: the client hears nothing, its retry on A or B replays the committed order', async () => {
    const order = newOrder()
    await expect(send(instanceA.url, order, { 'x-fault': 'drop-after-commit' })).rejects.toThrow(/got no response/)
    const orderId = await theOnlyOrderId(order.cartId)

    for (const instance of [instanceA, instanceB]) {
      const retry = await retryUntilAnswered([instance.url], order)
      expect(retry.answers).toHaveLength(1)
      expectCreated(retry.final, orderId, true)
    }
    expect(await theOnlyOrderId(order.cartId)).toBe(orderId)
    expect(await rows.record(tenant.tenantId, order.key)).toMatchObject({ status: 'succeeded', attempts: 1, resourceId: orderId })
    // The evidence: the first attempt committed but its answer never left (499), the retries replayed.
    await pollUntil('three request_log rows exist', async () => (await rows.requestLog(order.key)).length === 3)
    expect(await rows.requestLog(order.key)).toEqual([
      { outcome: 'miss', status: 499 },
      { outcome: 'replay', status: 201 },
      { outcome: 'replay', status: 201 },
    ])
  })

  it('crash-after-commit: A dies without answering, the retry on B replays the committed order', async () => {
    const order = newOrder()
    await expect(send(instanceA.url, order, { 'x-fault': 'crash-after-commit' })).rejects.toThrow(/got no response/)
    expect(await instanceA.exited).toBeNull() // killed by a signal, not a clean exit
    const orderId = await theOnlyOrderId(order.cartId)

    const retry = await retryUntilAnswered([instanceB.url], order)
    expect(retry.answers).toHaveLength(1)
    expectCreated(retry.final, orderId, true)
    expect(await theOnlyOrderId(order.cartId)).toBe(orderId)
    expect(await rows.record(tenant.tenantId, order.key)).toMatchObject({ status: 'succeeded', attempts: 1, resourceId: orderId })
  })

  it('fail-before-commit: the 500 commits nothing, no record either, and frees the key at once; the retry on B executes once', async () => {
    const order = newOrder()
    const failed = await send(instanceA.url, order, { 'x-fault': 'fail-before-commit' })
    expectProblem(failed, 'internal-error')
    // One statement, rolled back: no order and no record, and A gave its processing lock back.
    expect(await openIdempotentTransactions(sql)).toBe(0)
    expect(await rows.ordersForCart(tenant.tenantId, order.cartId)).toEqual([])
    expect(await rows.record(tenant.tenantId, order.key)).toBeUndefined()
    await pollUntil('A released its processing lock', async () => await redis.exists(lockKeyOf(order)) === 0)

    // Nothing to wait for or take over: the first retry executes.
    const retry = await retryUntilAnswered([instanceB.url], order)
    expect(retry.answers).toHaveLength(1)
    const orderId = await theOnlyOrderId(order.cartId)
    expectCreated(retry.final, orderId, false)
    expect(await rows.record(tenant.tenantId, order.key)).toEqual({ key: order.key, status: 'succeeded', attempts: 1, resourceId: orderId, responseStatus: 201, leased: false })
  })

  it('SIGKILL inside the transaction: Postgres rolls it all back; the dead owner\'s lock answers 409 (Retry-After: 1) until its TTL, then the retry executes once', async () => {
    const order = newOrder()
    const inFlight = send(instanceA.url, order, { 'x-fault': 'delay-before-commit=10000' }, 20_000)
      .then(() => 'answered', (error: Error) => error.message)
    // A sent its statement (record, order, job) and holds it uncommitted for 10 s.
    await untilRequestInFlight(sql, requestOf(order))
    const lockOfA = await redis.get(lockKeyOf(order))
    expect(lockOfA).toMatch(/^\S+ [0-9a-f]{64}$/)
    instanceA.kill('SIGKILL')
    expect(await inFlight).toMatch(/got no response/)
    expect(await instanceA.exited).toBeNull()

    // A's connection closed, Postgres ended its transaction: nothing of it was committed.
    await pollUntil('Postgres ended the dead owner\'s transaction', async () => await openIdempotentTransactions(sql) === 0)
    expect(await rows.ordersForCart(tenant.tenantId, order.cartId)).toEqual([])
    expect(await rows.record(tenant.tenantId, order.key)).toBeUndefined()

    // A's processing lock outlives A until its TTL: a retry meanwhile is told to come back in 1 s.
    expect(await redis.get(lockKeyOf(order))).toBe(lockOfA)
    const beforeExpiry = await send(instanceB.url, order)
    expectProblem(beforeExpiry, 'request-in-progress')
    expect(beforeExpiry.headers.get('retry-after')).toBe('1')
    expect(await rows.record(tenant.tenantId, order.key)).toBeUndefined()

    // The client keeps retrying: 409s while the lock lives, then one execution once it expired.
    const retry = await retryUntilAnswered([instanceB.url], order)
    for (const { response } of retry.answers.slice(0, -1)) {
      expectProblem(response!, 'request-in-progress')
      expect(response!.headers.get('retry-after')).toBe('1')
    }
    const orderId = await theOnlyOrderId(order.cartId)
    expectCreated(retry.final, orderId, false)
    expect(await rows.record(tenant.tenantId, order.key)).toEqual({ key: order.key, status: 'succeeded', attempts: 1, resourceId: orderId, responseStatus: 201, leased: false })
  })

  it('SIGSTOP inside the transaction: A\'s lock expires, yet its uncommitted record holds the key — B waits out the lock_timeout and answers 409; after SIGCONT A commits and B replays: one order', async () => {
    const order = newOrder()
    const answerOfA = send(instanceA.url, order, { 'x-fault': 'delay-before-commit=1000' }, 30_000)
    await untilRequestInFlight(sql, requestOf(order))
    instanceA.kill('SIGSTOP')
    try {
      // Frozen, A renews nothing: its Redis lock expires, while its statement stays uncommitted.
      await pollUntil('the frozen owner\'s lock expired', async () => await redis.exists(lockKeyOf(order)) === 0, { timeoutMs: lockTtlMs * 4 })
      expect(await openIdempotentTransactions(sql)).toBe(1)

      // B takes the lock; its statement waits on A's uncommitted record for the pool's lock_timeout, then gives up.
      const sentAt = performance.now()
      const whileFrozen = await send(instanceB.url, order)
      const waitedMs = performance.now() - sentAt
      expectProblem(whileFrozen, 'request-in-progress')
      expect(whileFrozen.headers.get('retry-after')).toBe('1')
      expect(waitedMs).toBeGreaterThanOrEqual(LOCK_TIMEOUT_MS - 250)
      expect(await rows.ordersForCart(tenant.tenantId, order.cartId)).toEqual([])
      expect(await rows.record(tenant.tenantId, order.key)).toBeUndefined()
      expect(await openIdempotentTransactions(sql)).toBe(1)
    }
    finally {
      instanceA.kill('SIGCONT')
    }

    // Thawed, A commits its one execution and answers; B's retry replays it.
    const fromA = await answerOfA
    const orderId = await theOnlyOrderId(order.cartId)
    expectCreated(fromA, orderId, false)
    const fromB = await retryUntilAnswered([instanceB.url], order)
    expectCreated(fromB.final, orderId, true)
    expect(await theOnlyOrderId(order.cartId)).toBe(orderId)
    expect(await rows.record(tenant.tenantId, order.key)).toEqual({ key: order.key, status: 'succeeded', attempts: 1, resourceId: orderId, responseStatus: 201, leased: false })
  })
})
