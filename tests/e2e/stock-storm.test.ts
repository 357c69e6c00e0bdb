import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { AppProcess } from '../support/app'
import { type Stack, startStack } from '../support/cluster'
import { createTenant, request } from '../support/http'
import { opsRequest } from '../support/ops'
import { validOrderBody } from '../support/orders'
import { startRedisServer, type TestRedisServer } from '../support/redis-server'
import { describeWithServices } from '../support/services'
import { describeAnswer, expectOnlyAnswerKinds, runStorm, type StormKey } from '../support/storm'

// Stock reserved exactly once under a retry storm (docs/inventory.md#reservations): ten units of one
// SKU, a hundred shoppers' keys each sent as four concurrent copies over two instances on one
// database. Exactly ten keys get the order, the other ninety the stored 409 insufficient-stock, and
// every copy of a key the same answer; the counts are the ledger's sums. The same storm again with
// every execution's answer dropped after its commit (the client retries into the replay), and with
// Redis gone (Postgres alone decides). A test-owned redis-server is stopped for the last storm.

const units = 10
const keyCount = 100
const copiesPerKey = 4
const unitPrice = 75_000

describeWithServices('stock under a retry storm over two instances', ['postgres'], () => {
  let stack: Stack | undefined
  let redisServer: TestRedisServer | undefined
  let sql: postgres.Sql | undefined
  let instances: AppProcess[]

  beforeAll(async () => {
    redisServer = await startRedisServer()
    stack = await startStack({ label: 'stock-storm', redisUrl: redisServer.url, instances: 2 })
    instances = stack.instances
    sql = postgres(stack.databaseUrl, { max: 2, onnotice: () => {} })
  })

  afterAll(async () => {
    await sql?.end()
    await stack?.close()
    await redisServer?.stop()
  })

  /**
   * A tenant whose one SKU has `units` on hand, and the storm on it: each key one shopper's cart of
   * one unit, its copies concurrent and spread over both instances; half ask to wait for the first.
   */
  async function stockStorm(label: string, headers: Record<string, string> = {}): Promise<{ tenantId: string, sku: string, secretKey: string, storm: StormKey[] }> {
    const { tenantId, secretKey } = await createTenant(instances[0]!.url, `stock-${label}`)
    const sku = `STORM-${label.toUpperCase()}`
    const set = await request(instances[1]!.url, `/api/inventory/${sku}`, { method: 'PUT', headers: { authorization: `Bearer ${secretKey}` }, body: { onHand: units } })
    expect(set.status, set.text).toBe(200)
    const storm = await runStorm({
      instances,
      secretKey,
      keyCount,
      requestsPerKey: copiesPerKey,
      label: `stock-${label}`,
      plan: ({ requestIndex, cartId }) => ({
        body: validOrderBody({ cartId, amount: unitPrice, items: [{ sku, quantity: 1, unitPrice }] }),
        headers: { ...headers, ...(requestIndex % 2 === 1 && { prefer: 'wait=5' }) },
        variant: 0,
      }),
    })
    return { tenantId, sku, secretKey, storm }
  }

  /**
   * Exactly `units` keys ordered, every other key refused for stock; each key one answer for all its
   * copies, of which `executionsHeard` (0 when the execution's answer was dropped) the execution's own
   * and the others replays; one order row per ordered key and none for the others; the counts full
   * and the ledger's sums.
   */
  async function expectSoldOutOnce({ tenantId, sku, secretKey, storm }: Awaited<ReturnType<typeof stockStorm>>, executionsHeard: 0 | 1): Promise<void> {
    const refusal = { type: '/problems/insufficient-stock', status: 409, items: [{ sku, requested: 1, available: 0 }] }
    const ordered: Array<{ key: string, cartId: string, orderId: string }> = []
    for (const { key, cartId, clients } of storm) {
      const finals = clients.map(client => client.result.final)
      expect(finals.filter(final => final.json.idempotency?.replayed === false), `executions heard for ${key}`).toHaveLength(executionsHeard)
      if (finals[0]!.status === 201) {
        const orderId: string = finals[0]!.json.id
        expect(finals.map(final => [final.status, final.json.id]), `answers for ${key}`).toEqual(finals.map(() => [201, orderId]))
        ordered.push({ key, cartId, orderId })
        continue
      }
      // The refusal was stored under the key: every copy is told the same thing, word for word.
      expect(finals[0]!.json, `answer for ${key}`).toMatchObject(refusal)
      const told = (final: typeof finals[number]) => [final.status, { ...final.json, idempotency: { key: final.json.idempotency.key } }]
      expect(finals.map(told), `answers for ${key}`).toEqual(finals.map(() => told(finals[0]!)))
    }
    expect(ordered).toHaveLength(units)

    const orderRows = await sql!<Array<{ id: string, key: string, cartId: string }>>`
      select id, idempotency_key as key, cart_id as "cartId" from orders where tenant_id = ${tenantId}`
    const byId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : 1)
    expect(orderRows.sort(byId)).toEqual(ordered.map(({ key, cartId, orderId }) => ({ id: orderId, key, cartId })).sort(byId))

    const read = await request(instances[0]!.url, `/api/inventory/${sku}`, { headers: { authorization: `Bearer ${secretKey}` } })
    expect(read.status, read.text).toBe(200)
    expect(read.json).toEqual({ object: 'stock', sku, onHand: units, reserved: units, available: 0, updatedAt: expect.any(String) })

    const movements = await sql!<Array<{ kind: string, orderId: string | null, quantity: number }>>`
      select kind, order_id as "orderId", quantity::int as quantity from stock_movements where tenant_id = ${tenantId} order by id`
    expect(movements.filter(movement => movement.kind !== 'reserve')).toEqual([{ kind: 'set', orderId: null, quantity: units }])
    const reserves = movements.filter(movement => movement.kind === 'reserve')
    expect(reserves.map(movement => movement.orderId).sort()).toEqual(ordered.map(order => order.orderId).sort())
    expect(reserves.map(movement => movement.quantity)).toEqual(reserves.map(() => 1))
    const [sums] = await sql!<[{ onHand: number, reserved: number }]>`
      select sum(on_hand_delta)::int as "onHand", sum(reserved_delta)::int as reserved from stock_movements where tenant_id = ${tenantId} and sku = ${sku}`
    expect(sums).toEqual({ onHand: units, reserved: units })
  }

  /** What every response of the storm was, totalled: the figures the test prints. */
  function printAnswers(title: string, storm: StormKey[]): void {
    const kinds: Record<string, number> = {}
    for (const answer of storm.flatMap(key => key.clients.flatMap(client => client.result.answers))) kinds[describeAnswer(answer)] = (kinds[describeAnswer(answer)] ?? 0) + 1
    console.log(`\n${title}: ${keyCount} keys × ${copiesPerKey} copies for ${units} units — every response:`)
    console.table(kinds)
  }

  it(`${keyCount} keys × ${copiesPerKey} concurrent copies for ${units} units: ${units} orders, ${keyCount - units} stored refusals, never oversold`, async () => {
    const result = await stockStorm('plain')
    printAnswers('Stock storm', result.storm)
    expectOnlyAnswerKinds(result.storm, ['201 executed', '201 replayed', '409 request-in-progress', '409 insufficient-stock'])
    await expectSoldOutOnce(result, 1)
  })

  it('the same storm with every execution\'s answer dropped after its commit: the retries are replayed, still exactly ten', async () => {
    const result = await stockStorm('dropped', { 'x-fault': 'drop-after-commit' })
    printAnswers('Stock storm, answers dropped after commit', result.storm)
    // Nobody heard an execution: each key's first answer was lost, its copies got the replay.
    expectOnlyAnswerKinds(result.storm, ['network error', '201 replayed', '409 request-in-progress', '409 insufficient-stock'])
    for (const { key, clients } of result.storm) {
      expect(clients.flatMap(client => client.result.answers).filter(answer => !answer.response), `dropped answers for ${key}`).toHaveLength(1)
    }
    await expectSoldOutOnce(result, 0)
  })

  describe('with Redis gone', () => {
    beforeAll(async () => {
      await redisServer!.stop()
    })

    it('the same storm without Redis: Postgres alone decides, still exactly ten', async () => {
      for (const instance of instances) expect((await opsRequest(instance.url, '/api/ready')).json.checks.locks).toMatchObject({ backend: 'redis', ok: false })
      const result = await stockStorm('no-redis')
      printAnswers('Stock storm without Redis', result.storm)
      expectOnlyAnswerKinds(result.storm, ['201 executed', '201 replayed', '409 request-in-progress', '409 insufficient-stock'])
      await expectSoldOutOnce(result, 1)
    })
  })
})
