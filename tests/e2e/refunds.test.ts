import { randomUUID } from 'node:crypto'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type AppProcess, fastJobsEnv, startApp, testSecrets } from '../support/app'
import { createTenant, request, type TestResponse } from '../support/http'
import { expectCreatedRefund, expectProblem, postOrder, type TenantCredentials, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { type PrismProxy, startPrism } from '../support/prism'
import { createTestDatabase, describeWithServices, redisUrl } from '../support/services'

// Refunds and cancellation (docs/payments-and-refunds.md#refunds-and-cancellation) against two
// built instances on one Postgres and Redis, with the simulated provider (mockpay) as the payment
// provider: the API's answers, the refundable balance under concurrent requests on both instances,
// one provider refund per refund, the order's state, and a payment that arrives for a canceled
// order given back once. Each instance is reached through its own Prism, which checks every
// exchange against the OpenAPI document; requests the document itself calls invalid go to instance
// A directly (`directA`).

const ORDER_AMOUNT = 150_000
const calm = { duplicates: 0, maxDelayMs: 0 }

interface Stack { apps: AppProcess[], proxies: PrismProxy[], sql: postgres.Sql, tenant: TenantCredentials }

const auth = (tenant: TenantCredentials) => ({ authorization: `Bearer ${tenant.secretKey}` })

function postRefund(baseUrl: string, tenant: TenantCredentials, orderId: string, key: string, body?: unknown): Promise<TestResponse> {
  return request(baseUrl, `/api/orders/${orderId}/refunds`, { method: 'POST', headers: { ...auth(tenant), 'idempotency-key': key }, body })
}

function postCancel(baseUrl: string, tenant: TenantCredentials, orderId: string, key: string): Promise<TestResponse> {
  return request(baseUrl, `/api/orders/${orderId}/cancel`, { method: 'POST', headers: { ...auth(tenant), 'idempotency-key': key } })
}

async function readOrder(baseUrl: string, tenant: TenantCredentials, orderId: string) {
  const response = await request(baseUrl, `/api/orders/${orderId}`, { headers: auth(tenant) })
  expect(response.status, response.text).toBe(200)
  return response.json
}

async function orderWhen(baseUrl: string, tenant: TenantCredentials, orderId: string, what: string, condition: (order: Record<string, any>) => boolean) {
  let order: Record<string, any> = {}
  await pollUntil(`order ${orderId}: ${what} (last seen ${JSON.stringify(order.status)})`, async () => {
    order = await readOrder(baseUrl, tenant, orderId)
    return condition(order)
  }, { timeoutMs: 20_000, intervalMs: 100 })
  return order
}

/** An order with its mockpay intent (created by the worker), unpaid. */
async function unpaidOrder(baseUrl: string, tenant: TenantCredentials): Promise<{ orderId: string, intentId: string }> {
  const created = await postOrder(baseUrl, { secretKey: tenant.secretKey, key: randomUUID(), body: validOrderBody({ cartId: `cart-${randomUUID()}` }) })
  expect(created.status, created.text).toBe(201)
  const order = await orderWhen(baseUrl, tenant, created.json.id, 'has a payment intent', order => order.paymentIntentId !== null)
  return { orderId: created.json.id, intentId: order.paymentIntentId }
}

/** An order paid through mockpay's page, and applied from its webhook. */
async function paidOrder(baseUrl: string, tenant: TenantCredentials): Promise<{ orderId: string, intentId: string }> {
  const order = await unpaidOrder(baseUrl, tenant)
  const confirmed = await request(baseUrl, `/api/mockpay/intents/${order.intentId}/confirm`, { method: 'POST', body: { outcome: 'succeed', chaos: calm } })
  expect(confirmed.status, confirmed.text).toBe(200)
  await orderWhen(baseUrl, tenant, order.orderId, 'is paid', order => order.status === 'paid')
  return order
}

/** The simulated provider's refunds of an intent: one row per refund it made, with how often each key asked. */
function providerRefunds(sql: postgres.Sql, intentId: string) {
  return sql<Array<{ amount: number, token: string | null, requests: number }>>`
    select amount::int, idempotency_token as token, requests from payment_intent_refunds where intent_id = ${intentId} order by created_at, id`
}

async function providerRefundIdOf(sql: postgres.Sql, refundId: string): Promise<string> {
  const [row] = await sql<Array<{ id: string }>>`select provider_refund_id as id from refunds where id = ${refundId}`
  return row!.id
}

describeWithServices('refunds and cancellation, two instances on Postgres and Redis, mockpay', ['postgres', 'redis'], () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>> | undefined
  let stack: Stack

  beforeAll(async () => {
    database = await createTestDatabase('refunds')
    const env = { ...fastJobsEnv, MOCKPAY_ENABLED: 'true', MOCKPAY_DUPLICATES: '0', MOCKPAY_MAX_DELAY_MS: '0' }
    const apps = [
      await startApp({ databaseUrl: database.url, redisUrl, label: 'refunds-a', env }),
      await startApp({ databaseUrl: database.url, redisUrl, label: 'refunds-b', env }),
    ]
    const proxies = await Promise.all(apps.map((app, i) => startPrism({ upstream: app.url, label: `refunds-${i ? 'b' : 'a'} prism` })))
    stack = { apps, proxies, sql: postgres(database.url, { max: 2, onnotice: () => {} }), tenant: await createTenant(proxies[0]!.url, 'refunds') }
  })

  afterAll(async () => {
    await Promise.all(stack?.proxies.map(proxy => proxy.stop()) ?? [])
    await Promise.all(stack?.apps.map(app => app.stop()) ?? [])
    await stack?.sql.end()
    await database?.drop()
  })

  /** Instance A and B, each through its Prism. */
  const a = () => stack.proxies[0]!.url
  const b = () => stack.proxies[1]!.url
  /** Instance A past Prism, which would answer these requests itself. */
  const directA = () => stack.apps[0]!.url

  describe('POST /api/orders/:id/refunds', () => {
    it('refunds all that remains by default: 201, replayed under its key, the provider asked once, the order refunded with one notice', async () => {
      const { orderId, intentId } = await paidOrder(a(), stack.tenant)
      const key = randomUUID()
      const first = await postRefund(a(), stack.tenant, orderId, key, { reason: 'requested_by_customer' })
      expectCreatedRefund(first, { orderId, amount: ORDER_AMOUNT, key, reason: 'requested_by_customer' })
      const again = await postRefund(b(), stack.tenant, orderId, key, { reason: 'requested_by_customer' })
      expectCreatedRefund(again, { orderId, amount: ORDER_AMOUNT, key, reason: 'requested_by_customer', replayed: true })
      expect(again.json.id).toBe(first.json.id)

      const order = await orderWhen(a(), stack.tenant, orderId, 'is refunded', order => order.status === 'refunded')
      expect(order.amountRefunded).toBe(ORDER_AMOUNT)
      expect(order.refunds).toEqual([{ ...first.json, status: 'succeeded', idempotency: undefined }].map(({ idempotency: _, ...refund }) => refund))
      const single = await request(a(), `/api/orders/${orderId}/refunds/${first.json.id}`, { headers: auth(stack.tenant) })
      expect(single.status, single.text).toBe(200)
      expect(single.json).toEqual(order.refunds[0])
      expect(await providerRefunds(stack.sql, intentId)).toEqual([{ amount: ORDER_AMOUNT, token: `refund:${first.json.id}`, requests: 1 }])
      await pollUntil('the refund notice is sent', async () => (await stack.sql`select 1 from mailbox where order_id = ${orderId} and subject = ${`Order ${orderId} refunded`}`).length === 1)
      expect(await stack.sql`select effect from side_effects where order_id = ${orderId} order by effect`).toEqual([
        { effect: 'confirmation_email' }, { effect: 'invoice' }, { effect: `refund_notice:${first.json.id}` },
      ])

      // The evidence locker tells the refund's story: the refund, its job with the key the provider
      // was asked under, both requests under the shop's key, and the notice.
      const evidence = await request(a(), `/api/ops/evidence?orderId=${orderId}`, { headers: { authorization: `Bearer ${testSecrets.opsToken}` } })
      expect(evidence.status, evidence.text).toBe(200)
      const timeline = evidence.json.timeline as Array<{ kind: string, summary: string, detail: Record<string, unknown> }>
      expect(timeline.filter(entry => entry.kind === 'refund').map(entry => entry.summary)).toEqual([
        `Refund ${first.json.id} of order ${orderId} (IDR 150,000, requested_by_customer) asked for through the API; asked of the provider under the key refund:${first.json.id}; the provider's refund ${(await providerRefundIdOf(stack.sql, first.json.id))}; succeeded.`,
      ])
      expect(timeline.filter(entry => entry.kind === 'job' && entry.detail.kind === 'payment.refund').map(entry => entry.detail.providerKey)).toEqual([`refund:${first.json.id}`])
      expect(timeline.filter(entry => entry.kind === 'request' && entry.detail.key === key).map(entry => entry.detail.outcome)).toEqual(['miss', 'replay'])
    })

    it('partial refunds: 40 % twice makes the order partially_refunded; a third 40 % is 409 refund-exceeds-remaining with what remains, stored and replayed', async () => {
      const { orderId, intentId } = await paidOrder(a(), stack.tenant)
      const part = ORDER_AMOUNT * 0.4
      expectCreatedRefund(await postRefund(a(), stack.tenant, orderId, 'part-1', { amount: part }), { orderId, amount: part, key: 'part-1' })
      expectCreatedRefund(await postRefund(b(), stack.tenant, orderId, 'part-2', { amount: part }), { orderId, amount: part, key: 'part-2' })
      const tooMuch = await postRefund(a(), stack.tenant, orderId, 'part-3', { amount: part })
      expectProblem(tooMuch, 'refund-exceeds-remaining')
      expect(tooMuch.json.remaining).toBe(ORDER_AMOUNT - 2 * part)
      const replayed = await postRefund(b(), stack.tenant, orderId, 'part-3', { amount: part })
      expect(replayed.status).toBe(409)
      expect(replayed.headers.get('idempotent-replayed')).toBe('true')
      expect(replayed.json.remaining).toBe(ORDER_AMOUNT - 2 * part)

      const order = await orderWhen(a(), stack.tenant, orderId, 'two refunds succeeded', order => order.amountRefunded === 2 * part)
      expect(order.status).toBe('partially_refunded')
      expect(order.refunds.map((refund: { amount: number, status: string }) => [refund.amount, refund.status])).toEqual([[part, 'succeeded'], [part, 'succeeded']])
      expect((await providerRefunds(stack.sql, intentId)).map(refund => refund.amount)).toEqual([part, part])

      // What remains is refunded by default, and the order is refunded.
      expectCreatedRefund(await postRefund(a(), stack.tenant, orderId, 'rest'), { orderId, amount: ORDER_AMOUNT - 2 * part, key: 'rest' })
      await orderWhen(a(), stack.tenant, orderId, 'is refunded', order => order.status === 'refunded' && order.amountRefunded === ORDER_AMOUNT)
    })

    it('refuses what cannot be refunded, with problems that change nothing', async () => {
      const { orderId } = await unpaidOrder(a(), stack.tenant)
      const unpaid = await postRefund(a(), stack.tenant, orderId, randomUUID())
      expectProblem(unpaid, 'order-not-refundable')
      expect(unpaid.json.orderStatus).toBe('pending_payment')

      const paid = await paidOrder(a(), stack.tenant)
      for (const body of [{ amount: 0 }, { amount: -5 }, { amount: 1.5 }, { amount: '100' }, { reason: 'because' }, { amount: 10, extra: true }]) {
        expectProblem(await postRefund(directA(), stack.tenant, paid.orderId, randomUUID(), body), 'validation-failed')
      }
      expectProblem(await postRefund(a(), stack.tenant, paid.orderId, randomUUID(), { amount: ORDER_AMOUNT + 1 }), 'refund-exceeds-remaining')
      expectProblem(await request(directA(), `/api/orders/${paid.orderId}/refunds`, { method: 'POST', headers: auth(stack.tenant), body: {} }), 'idempotency-key-missing')

      const other = await createTenant(a(), 'refunds-other')
      expectProblem(await postRefund(a(), other, paid.orderId, randomUUID()), 'not-found')
      expectProblem(await postRefund(a(), stack.tenant, 'ord_missing', randomUUID()), 'not-found')
      expectProblem(await request(directA(), `/api/orders/${paid.orderId}/refunds`, { method: 'POST', headers: { 'idempotency-key': randomUUID() }, body: {} }), 'unauthorized')
      expect(await stack.sql`select count(*)::int as n from refunds where order_id = ${paid.orderId}`).toEqual([{ n: 0 }])
      expect((await readOrder(a(), stack.tenant, paid.orderId)).status).toBe('paid')
    })

    it('one key sent 8× at once across both instances makes one refund, and the provider is asked once', async () => {
      const { orderId, intentId } = await paidOrder(a(), stack.tenant)
      const key = randomUUID()
      const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => postRefund(i % 2 ? b() : a(), stack.tenant, orderId, key, { amount: 1000 })))
      const created = answers.filter(answer => answer.status === 201)
      expect(answers.every(answer => answer.status === 201 || (answer.status === 409 && answer.json.type === '/problems/request-in-progress')), answers.map(answer => answer.text).join('\n')).toBe(true)
      expect(new Set(created.map(answer => answer.json.id)).size).toBe(1)
      expect(created.filter(answer => answer.headers.get('idempotent-replayed') === null)).toHaveLength(1)
      await orderWhen(a(), stack.tenant, orderId, 'the refund succeeded', order => order.amountRefunded === 1000)
      expect(await stack.sql`select count(*)::int as n from refunds where order_id = ${orderId}`).toEqual([{ n: 1 }])
      expect((await providerRefunds(stack.sql, intentId)).map(refund => [refund.amount, refund.requests])).toEqual([[1000, 1]])
    })

    it('six keys each asking 40 % at once across both instances: exactly two refunds, four 409 refund-exceeds-remaining', async () => {
      const { orderId, intentId } = await paidOrder(a(), stack.tenant)
      const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => postRefund(i % 2 ? b() : a(), stack.tenant, orderId, `storm-${i}-${randomUUID()}`, { amount: ORDER_AMOUNT * 0.4 })))
      expect(answers.map(answer => answer.status).sort()).toEqual([201, 201, 409, 409, 409, 409])
      for (const refused of answers.filter(answer => answer.status === 409)) expect(refused.json.type).toBe('/problems/refund-exceeds-remaining')
      const order = await orderWhen(a(), stack.tenant, orderId, 'two refunds succeeded', order => order.amountRefunded === ORDER_AMOUNT * 0.8)
      expect(order.status).toBe('partially_refunded')
      expect(order.refunds).toHaveLength(2)
      expect(await providerRefunds(stack.sql, intentId)).toHaveLength(2)
    })

    it('a refund made in the provider\'s dashboard appears on the order with source provider', async () => {
      const { orderId, intentId } = await paidOrder(a(), stack.tenant)
      const dashboard = await request(a(), `/api/mockpay/intents/${intentId}/refund`, { method: 'POST', body: { amount: 30_000, chaos: calm } })
      expect(dashboard.status, dashboard.text).toBe(200)
      const order = await orderWhen(a(), stack.tenant, orderId, 'the dashboard refund appears', order => order.amountRefunded === 30_000)
      expect(order.status).toBe('partially_refunded')
      expect(order.refunds).toEqual([expect.objectContaining({ amount: 30_000, status: 'succeeded', source: 'provider', reason: null })])
      // What remains, through the API.
      expectCreatedRefund(await postRefund(a(), stack.tenant, orderId, randomUUID()), { orderId, amount: ORDER_AMOUNT - 30_000, key: expect.any(String) as unknown as string })
    })
  })

  describe('POST /api/orders/:id/cancel', () => {
    it('cancels an unpaid order (200, replayed under its key), and its mockpay intent is canceled through the outbox', async () => {
      const { orderId, intentId } = await unpaidOrder(a(), stack.tenant)
      const key = randomUUID()
      const canceled = await postCancel(a(), stack.tenant, orderId, key)
      expect(canceled.status, canceled.text).toBe(200)
      expect(canceled.json).toMatchObject({ id: orderId, status: 'canceled', cancelReason: 'requested', amountRefunded: 0, refunds: [], idempotency: { key, replayed: false } })
      const replay = await postCancel(b(), stack.tenant, orderId, key)
      expect(replay.status).toBe(200)
      expect(replay.headers.get('idempotent-replayed')).toBe('true')
      await pollUntil('the intent is canceled at mockpay', async () => (await stack.sql`select status from payment_intents where id = ${intentId}`)[0]?.status === 'canceled')
      const refused = await postRefund(a(), stack.tenant, orderId, randomUUID())
      expectProblem(refused, 'order-not-refundable')
      expect(refused.json.orderStatus).toBe('canceled')
    })

    it('a paid order is 409 order-not-cancelable', async () => {
      const { orderId } = await paidOrder(a(), stack.tenant)
      const refused = await postCancel(a(), stack.tenant, orderId, randomUUID())
      expectProblem(refused, 'order-not-cancelable')
      expect(refused.json.orderStatus).toBe('paid')
    })

    it('a shopper who paid while the cancel was on its way is refunded automatically, once', async () => {
      const { orderId, intentId } = await unpaidOrder(a(), stack.tenant)
      // The shopper paid at the provider; its webhook has not arrived when the shop cancels.
      await stack.sql`update payment_intents set status = 'succeeded' where id = ${intentId}`
      const canceled = await postCancel(a(), stack.tenant, orderId, randomUUID())
      expect(canceled.status, canceled.text).toBe(200)
      expect(canceled.json.status).toBe('canceled')
      const order = await orderWhen(a(), stack.tenant, orderId, 'is refunded', order => order.status === 'refunded')
      expect(order.refunds).toEqual([expect.objectContaining({ amount: ORDER_AMOUNT, status: 'succeeded', source: 'automatic', reason: 'order_canceled' })])
      expect(await providerRefunds(stack.sql, intentId)).toEqual([{ amount: ORDER_AMOUNT, token: `refund:${order.refunds[0].id}`, requests: 1 }])
      // The payment's own webhook comes late: nothing more happens.
      const late = await request(a(), `/api/mockpay/intents/${intentId}/confirm`, { method: 'POST', body: { outcome: 'succeed', chaos: calm } })
      expect(late.status).toBe(409)
      expect((await readOrder(a(), stack.tenant, orderId)).refunds).toHaveLength(1)
      const reasons = await stack.sql`select reason from order_status_history where order_id = ${orderId} and reason is not null order by id`
      // The refund's own webhook, when it came, told nothing new (no_refund).
      expect(reasons.map(row => row.reason).filter(reason => reason !== 'no_refund')).toEqual(['canceled', 'refund_for_canceled_order', 'refund_succeeded'])
      expect(await stack.sql`select effect from side_effects where order_id = ${orderId} order by effect`).toEqual([{ effect: `refund_notice:${order.refunds[0].id}` }])
    })
  })
})
