import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest'
import { type AppProcess, stopAll } from '../support/app'
import { type Cluster, createCluster, postOrderUntilAnswered } from '../support/cluster'
import { createTenant, type TestResponse } from '../support/http'
import { openOrderRows, type OrderRows } from '../support/order-rows'
import { expectProblem, postOrder, type TenantCredentials, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { createTestDatabase, describeWithServices, redisUrl } from '../support/services'

// "The incident": the server committed (or died mid-flight), the client never heard, the client
// retried — possibly on another instance. Two instances share one database and one Redis prefix;
// a short lease lets an abandoned claim be taken over within the test.

const leaseMs = 1500

describeWithServices('incidents across two instances', ['postgres', 'redis'], () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>> | undefined
  let rows: OrderRows
  let cluster: Cluster
  let instanceA: AppProcess
  let instanceB: AppProcess
  let tenant: TenantCredentials

  beforeAll(async () => {
    database = await createTestDatabase('incidents')
    rows = openOrderRows(database.url)
    cluster = createCluster({ databaseUrl: database.url, redisUrl, label: 'incidents', env: { IDEMPOTENCY_LEASE_MS: String(leaseMs) } })
    ;[instanceA, instanceB] = await Promise.all([cluster.startInstance('A'), cluster.startInstance('B')])
    tenant = await createTenant(instanceB.url, 'incidents')
  })

  // Some incidents kill A; every test starts with a live A (a replacement, as an orchestrator would).
  beforeEach(async () => {
    const aHasExited = await Promise.race([instanceA.exited.then(() => true), new Promise<boolean>(resolve => setImmediate(() => resolve(false)))])
    if (aHasExited) instanceA = await cluster.startInstance('A-replacement')
  })

  afterAll(async () => {
    instanceA?.kill('SIGCONT')
    await stopAll()
    await rows?.close()
    await database?.drop()
  })

  function newOrder() {
    const body = validOrderBody()
    return { key: `incident-${randomUUID()}`, cartId: body.cartId, body }
  }

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

  it('fail-before-commit: 500 with nothing written, the key is released and the retry executes once', async () => {
    const order = newOrder()
    const failed = await send(instanceA.url, order, { 'x-fault': 'fail-before-commit' })
    expectProblem(failed, 'internal-error')
    expect(await rows.ordersForCart(tenant.tenantId, order.cartId)).toEqual([])
    expect(await rows.record(tenant.tenantId, order.key)).toMatchObject({ status: 'processing', attempts: 1, leaseExpired: true, resourceId: null })

    const retry = await retryUntilAnswered([instanceB.url], order)
    expect(retry.answers).toHaveLength(1)
    const orderId = await theOnlyOrderId(order.cartId)
    expectCreated(retry.final, orderId, false)
    expect(await rows.record(tenant.tenantId, order.key)).toMatchObject({ status: 'succeeded', attempts: 2, resourceId: orderId })
  })

  it('SIGKILL inside the transaction: 409 while the lease lives, then the retry takes over and executes once', async () => {
    const order = newOrder()
    const inFlight = send(instanceA.url, order, { 'x-fault': 'delay-before-commit=10000' }, 20_000)
      .then(() => 'answered', (error: Error) => error.message)
    // A is inside its fenced transaction (it holds the record row lock) and will not commit for 10 s.
    await pollUntil('A holds the record\'s row lock', () => rows.recordRowLocked(tenant.tenantId, order.key))
    instanceA.kill('SIGKILL')
    expect(await inFlight).toMatch(/got no response/)
    expect(await instanceA.exited).toBeNull()

    // Postgres rolled A's transaction back when its connection dropped; the claim itself is committed.
    expect(await rows.ordersForCart(tenant.tenantId, order.cartId)).toEqual([])
    expect(await rows.record(tenant.tenantId, order.key)).toMatchObject({ status: 'processing', attempts: 1, leaseExpired: false })

    const beforeExpiry = await send(instanceB.url, order)
    expectProblem(beforeExpiry, 'request-in-progress')
    // The lease has at most 1.5 s left, rounded up to whole seconds.
    expect(['1', '2']).toContain(beforeExpiry.headers.get('retry-after'))

    const retry = await retryUntilAnswered([instanceB.url], order)
    const orderId = await theOnlyOrderId(order.cartId)
    expectCreated(retry.final, orderId, false)
    expect(await rows.record(tenant.tenantId, order.key)).toMatchObject({ status: 'succeeded', attempts: 2, resourceId: orderId })
  })

  it('SIGSTOP inside the transaction: B cannot take over a row A still locks, and both end with one order', async () => {
    const order = newOrder()
    const answerOfA = send(instanceA.url, order, { 'x-fault': 'delay-before-commit=1000' }, 30_000)
    await pollUntil('A holds the record\'s row lock', () => rows.recordRowLocked(tenant.tenantId, order.key))
    instanceA.kill('SIGSTOP')
    try {
      // Frozen, A renews nothing: its lease runs out, yet it still holds the record's row lock.
      await pollUntil('the frozen owner\'s lease expired', async () => (await rows.record(tenant.tenantId, order.key))?.leaseExpired === true, { timeoutMs: leaseMs * 4 })
      expect(await rows.recordRowLocked(tenant.tenantId, order.key)).toBe(true)

      const whileFrozen = await send(instanceB.url, order)
      expectProblem(whileFrozen, 'request-in-progress')
      expect(whileFrozen.headers.get('retry-after')).toBe('1')
      expect(await rows.ordersForCart(tenant.tenantId, order.cartId)).toEqual([])
    }
    finally {
      instanceA.kill('SIGCONT')
    }

    const fromA = await answerOfA
    const orderId = await theOnlyOrderId(order.cartId)
    expectCreated(fromA, orderId, false)
    const fromB = await retryUntilAnswered([instanceB.url], order)
    expectCreated(fromB.final, orderId, true)
    expect(await theOnlyOrderId(order.cartId)).toBe(orderId)
    // Nobody took the claim over: A's one execution is the result.
    expect(await rows.record(tenant.tenantId, order.key)).toMatchObject({ status: 'succeeded', attempts: 1, resourceId: orderId })
  })
})
