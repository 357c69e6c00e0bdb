import postgres from 'postgres'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { type AppProcess, stopAll } from '../support/app'
import { createCluster } from '../support/cluster'
import { createTenant } from '../support/http'
import { openOrderRows, type OrderRows } from '../support/order-rows'
import { expectProblem, orderBodyVariant, validOrderBody } from '../support/orders'
import { createTestDatabase, describeWithServices, redisUrl } from '../support/services'
import { expectIdenticalStormExactlyOnce, expectOnlyAnswerKinds, ordersPerCart, printStormFigures, runStorm } from '../support/storm'
import { deliver, newWebhookId, nowSeconds, standardBody, standardDelivery } from '../support/webhooks'

// Three instances on one database and one Redis prefix, hit by a retry storm: every key must be
// executed once and every client must end up holding that one order. The printed tables are the
// figures quoted in the release notes.

const keyCount = 30
const requestsPerKey = 8

describeWithServices('retry storm over three instances', ['postgres', 'redis'], () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>> | undefined
  let rows: OrderRows
  let instances: AppProcess[]

  beforeAll(async () => {
    database = await createTestDatabase('storm')
    rows = openOrderRows(database.url)
    instances = await createCluster({ databaseUrl: database.url, redisUrl, label: 'storm' }).startInstances(3)
  })

  afterAll(async () => {
    await stopAll()
    await rows?.close()
    await database?.drop()
  })

  it(`${keyCount} keys × ${requestsPerKey} identical concurrent requests: one order and one execution per key`, async () => {
    const { tenantId, secretKey } = await createTenant(instances[0]!.url, 'storm-identical')
    const storm = await runStorm({
      instances,
      secretKey,
      keyCount,
      requestsPerKey,
      label: 'identical',
      // Half the clients ask the server to wait for the first request instead of answering 409 at once.
      plan: ({ requestIndex, cartId }) => ({
        body: validOrderBody({ cartId }),
        headers: requestIndex % 2 === 1 ? { prefer: 'wait=5' } : undefined,
        variant: 0,
      }),
    })

    printStormFigures('Identical storm', storm, instances, await ordersPerCart(rows, tenantId))
    await expectIdenticalStormExactlyOnce(storm, rows, tenantId)
  })

  it(`${keyCount} keys × ${requestsPerKey} concurrent requests, half with another body: the winner's 201 or 422 reused`, async () => {
    const { tenantId, secretKey } = await createTenant(instances[0]!.url, 'storm-mixed')
    const storm = await runStorm({
      instances,
      secretKey,
      keyCount,
      requestsPerKey,
      label: 'mixed',
      plan: ({ requestIndex, cartId }) => ({
        body: orderBodyVariant(requestIndex % 2, { cartId }),
        headers: requestIndex % 4 < 2 ? { prefer: 'wait=5' } : undefined,
        variant: requestIndex % 2,
      }),
    })

    printStormFigures('Mixed-body storm', storm, instances, await ordersPerCart(rows, tenantId))
    expectOnlyAnswerKinds(storm, ['201 executed', '201 replayed', '409 request-in-progress', '422 idempotency-key-reused'])

    const allOrders = await rows.orders(tenantId)
    expect(allOrders).toHaveLength(keyCount)
    for (const { key, cartId, clients } of storm) {
      const cartOrders = allOrders.filter(order => order.cartId === cartId)
      expect(cartOrders, `orders for ${cartId}`).toHaveLength(1)
      const orderId = cartOrders[0]!.id
      expect(await rows.record(tenantId, key)).toEqual({ key, status: 'succeeded', attempts: 1, resourceId: orderId, responseStatus: 201, leased: false })

      // Whichever body won, all its clients hold its order and all the others were told the key is taken.
      const winners = clients.filter(client => client.result.final.status === 201)
      const losers = clients.filter(client => client.result.final.status !== 201)
      const winningVariant = winners[0]?.variant
      expect(winners.map(client => client.variant), `winners of ${key}`).toEqual([winningVariant, winningVariant, winningVariant, winningVariant])
      expect(winners.map(client => client.result.final.json.id)).toEqual(winners.map(() => orderId))
      expect(winners.map(client => client.result.final.json.items[0].quantity)).toEqual(winners.map(() => 2 + winningVariant!))
      expect(winners.filter(client => client.result.final.json.idempotency.replayed === false), `executions for ${key}`).toHaveLength(1)
      expect(losers.map(client => client.variant), `losers of ${key}`).toEqual(losers.map(() => 1 - winningVariant!))
      for (const { result: { final } } of losers) expectProblem(final, 'idempotency-key-reused')
    }
  })

  it('20 webhook events × 6 redeliveries at once over the three instances: each event stored once with one job, every answer 200', async () => {
    const eventCount = 20
    const copies = 6
    const events = Array.from({ length: eventCount }, (_, index) => ({
      webhookId: newWebhookId(),
      body: standardBody('payment.succeeded', { orderId: `ord_storm_${index}`, paymentId: `pay_storm_${index}`, amount: 1000, currency: 'IDR' }),
    }))
    // Each copy is signed anew with its own timestamp, as a provider's redelivery is.
    const at = nowSeconds()
    const answers = await Promise.all(events.flatMap(({ webhookId, body }, eventIndex) =>
      Array.from({ length: copies }, (_, copy) =>
        deliver(instances[(eventIndex + copy) % instances.length]!.url, standardDelivery(webhookId, body, { at: at - copy }))
          .then(response => ({ webhookId, status: response.status, replayed: response.json?.idempotency?.replayed as boolean | undefined })))))

    expect(answers.filter(answer => answer.status !== 200)).toEqual([])
    for (const { webhookId } of events) {
      const ofEvent = answers.filter(answer => answer.webhookId === webhookId)
      expect(ofEvent.map(answer => answer.replayed).sort(), webhookId).toEqual([false, ...Array.from({ length: copies - 1 }, () => true)])
    }
    const sql = postgres(database!.url, { max: 1, onnotice: () => {} })
    try {
      const ids = events.map(event => event.webhookId)
      const [counts] = await sql<[{ events: number, jobs: number, records: number }]>`
        select (select count(*)::int from webhook_events where event_id = any(${ids})) as events,
               (select count(*)::int from jobs where kind = 'webhook.apply' and idempotency_key = any(${ids})) as jobs,
               (select count(*)::int from idempotency_records where scope = 'provider:standard' and key = any(${ids})) as records`
      expect(counts).toEqual({ events: eventCount, jobs: eventCount, records: eventCount })
    }
    finally {
      await sql.end()
    }
  })
})
