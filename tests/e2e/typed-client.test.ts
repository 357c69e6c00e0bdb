import { randomUUID } from 'node:crypto'
import createClient from 'openapi-fetch'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { fastJobsEnv, stopAll } from '../support/app'
import type { components, paths } from '../support/api-types'
import { request } from '../support/http'
import { type OrdersStack, startOrdersStack, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { type PrismProxy, startPrism } from '../support/prism'
import { describeWithServices } from '../support/services'

// The order's life through a client typed from the OpenAPI document (tests/support/api-types.ts,
// `npm run openapi:types`) with openapi-fetch, through Prism: create → read → pay (mockpay) →
// refund → read the refund, cancel another order, then list the orders and the events. Paths, parameters, bodies and answers are
// the document's types, so `npm run typecheck` fails when the document and this use part ways.

type Order = components['schemas']['Order']
type OrderRequest = NonNullable<paths['/api/orders']['post']['requestBody']>['content']['application/json']

/** The example order of docs/api.md on a fresh cart, as the document types it. */
const orderRequest = (): OrderRequest => ({ ...validOrderBody(), paymentMethod: 'bank_transfer' })

describeWithServices('a client typed from the OpenAPI document (openapi-fetch)', ['postgres', 'redis'], () => {
  let stack: OrdersStack
  let prism: PrismProxy
  let client: ReturnType<typeof createClient<paths>>

  beforeAll(async () => {
    stack = await startOrdersStack('typed-client', fastJobsEnv)
    prism = await startPrism({ upstream: stack.app.url, label: 'typed-client prism' })
    client = createClient<paths>({ baseUrl: prism.url, headers: { authorization: `Bearer ${stack.tenant.secretKey}` } })
  })

  afterAll(async () => {
    await prism?.stop()
    await stack?.close()
    await stopAll()
  })

  async function orderWhen(id: string, what: string, condition: (order: Order) => boolean): Promise<Order> {
    let order: Order | undefined
    await pollUntil(`order ${id} ${what}`, async () => {
      const { data } = await client.GET('/api/orders/{id}', { params: { path: { id } } })
      order = data
      return data !== undefined && condition(data)
    }, { timeoutMs: 20_000, intervalMs: 100 })
    return order!
  }

  it('creates an order, reads it, refunds part of it once paid, reads the refund; cancels another', async () => {
    const body = orderRequest()
    const key = randomUUID()
    const created = await client.POST('/api/orders', { params: { header: { 'Idempotency-Key': key } }, body })
    expect(created.response.status, JSON.stringify(created.error)).toBe(201)
    const order = created.data!
    expect(order).toMatchObject({ object: 'order', status: 'pending_payment', amount: body.amount, idempotency: { key, replayed: false } })
    expect(created.response.headers.get('location')).toBe(`/api/orders/${order.id}`)

    const replayed = await client.POST('/api/orders', { params: { header: { 'Idempotency-Key': key } }, body })
    expect(replayed.data).toEqual({ ...order, idempotency: { key, replayed: true } })

    const withIntent = await orderWhen(order.id, 'has a payment intent', read => read.paymentIntentId !== null)
    expect(withIntent).toMatchObject({ id: order.id, status: 'pending_payment', amountRefunded: 0, refunds: [] })

    // The shopper pays at the simulated provider; its webhook marks the order paid.
    const paid = await request(stack.app.url, `/api/mockpay/intents/${withIntent.paymentIntentId}/confirm`, { method: 'POST', body: { outcome: 'succeed', chaos: { duplicates: 0, maxDelayMs: 0 } } })
    expect(paid.status, paid.text).toBe(200)
    await orderWhen(order.id, 'is paid', read => read.status === 'paid')

    const refundKey = randomUUID()
    const refunded = await client.POST('/api/orders/{id}/refunds', {
      params: { path: { id: order.id }, header: { 'Idempotency-Key': refundKey } },
      body: { amount: 50_000, reason: 'requested_by_customer' },
    })
    expect(refunded.response.status, JSON.stringify(refunded.error)).toBe(201)
    const refund = refunded.data!
    expect(refund).toMatchObject({ object: 'refund', orderId: order.id, amount: 50_000, status: 'pending', source: 'api', idempotency: { key: refundKey, replayed: false } })

    const readRefund = await client.GET('/api/orders/{id}/refunds/{refundId}', { params: { path: { id: order.id, refundId: refund.id } } })
    expect(readRefund.response.status, JSON.stringify(readRefund.error)).toBe(200)
    expect(readRefund.data).toMatchObject({ id: refund.id, amount: 50_000, reason: 'requested_by_customer' })
    const settled = await orderWhen(order.id, 'is partially refunded', read => read.amountRefunded === 50_000)
    expect(settled.status).toBe('partially_refunded')

    // A paid order is refunded, not canceled: the document's 409, typed.
    const notCancelable = await client.POST('/api/orders/{id}/cancel', { params: { path: { id: order.id }, header: { 'Idempotency-Key': randomUUID() } } })
    expect(notCancelable.response.status).toBe(409)
    expect(notCancelable.error).toMatchObject({ type: '/problems/order-not-cancelable', orderStatus: 'partially_refunded' })

    const other = await client.POST('/api/orders', { params: { header: { 'Idempotency-Key': randomUUID() } }, body: orderRequest() })
    expect(other.response.status, JSON.stringify(other.error)).toBe(201)
    const canceled = await client.POST('/api/orders/{id}/cancel', { params: { path: { id: other.data!.id }, header: { 'Idempotency-Key': randomUUID() } } })
    expect(canceled.response.status, JSON.stringify(canceled.error)).toBe(200)
    expect(canceled.data).toMatchObject({ id: other.data!.id, status: 'canceled' })

    // The lists, typed: the two orders newest first, and the tenant's events oldest first, paged by their ids.
    const listed = await client.GET('/api/orders', { params: { query: { limit: 10 } } })
    expect(listed.response.status, JSON.stringify(listed.error)).toBe(200)
    expect(listed.data!.data.map(read => [read.id, read.status])).toEqual([[other.data!.id, 'canceled'], [order.id, 'partially_refunded']])
    const canceledOnly = await client.GET('/api/orders', { params: { query: { status: 'canceled', limit: 10 } } })
    expect(canceledOnly.data!.data.map(read => read.id)).toEqual([other.data!.id])
    const firstEvent = await client.GET('/api/events', { params: { query: { limit: 1 } } })
    expect(firstEvent.response.status, JSON.stringify(firstEvent.error)).toBe(200)
    expect(firstEvent.data).toMatchObject({ object: 'list', hasMore: true, data: [{ type: 'order.created', data: { object: { id: order.id } } }] })
    const paidEvents = await client.GET('/api/events', { params: { query: { after: firstEvent.data!.data[0]!.id, type: 'order.paid' } } })
    expect(paidEvents.data!.data.map(event => [event.type, event.data.object.id])).toEqual([['order.paid', order.id]])
  })
})
