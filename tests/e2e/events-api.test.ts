import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { fastJobsEnv, stopAll } from '../support/app'
import { createTenant, request, type TestResponse } from '../support/http'
import { expectProblem, type OrdersStack, postOrder, startOrdersStack, type TenantCredentials, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { describeWithServices } from '../support/services'

// The events list and the orders list (docs/events.md, docs/api.md#list-orders) against the built
// server on Postgres and Redis: each change's one event with the object as GET answers it, tenants
// apart, bad queries refused, and both lists paged during a storm of orders without a gap or a repeat.

const calm = { duplicates: 0, maxDelayMs: 0 }
const auth = (tenant: TenantCredentials) => ({ authorization: `Bearer ${tenant.secretKey}` })

interface ListedEvent { id: string, object: 'event', type: string, created: number, sequence: number, data: { object: Record<string, any> } }

describeWithServices('events and orders lists, built server on Postgres and Redis', ['postgres', 'redis'], () => {
  let stack: OrdersStack

  beforeAll(async () => {
    stack = await startOrdersStack('events-api', { ...fastJobsEnv, MOCKPAY_DUPLICATES: '0', MOCKPAY_MAX_DELAY_MS: '0' })
  })

  afterAll(async () => {
    await stack?.close()
    await stopAll()
  })

  const url = () => stack.app.url
  const get = (tenant: TenantCredentials, path: string): Promise<TestResponse> => request(url(), path, { headers: auth(tenant) })

  async function readOrder(tenant: TenantCredentials, orderId: string): Promise<Record<string, any>> {
    const response = await get(tenant, `/api/orders/${orderId}`)
    expect(response.status, response.text).toBe(200)
    return response.json
  }

  async function orderWhen(tenant: TenantCredentials, orderId: string, what: string, condition: (order: Record<string, any>) => boolean) {
    let order: Record<string, any> = {}
    await pollUntil(`order ${orderId}: ${what} (last seen ${JSON.stringify(order.status)})`, async () => condition(order = await readOrder(tenant, orderId)), { timeoutMs: 20_000, intervalMs: 100 })
    return order
  }

  async function placeOrder(tenant: TenantCredentials): Promise<string> {
    const created = await postOrder(url(), { secretKey: tenant.secretKey, key: randomUUID(), body: validOrderBody({ cartId: `cart-${randomUUID()}` }) })
    expect(created.status, created.text).toBe(201)
    return created.json.id
  }

  async function payOrder(tenant: TenantCredentials, orderId: string): Promise<Record<string, any>> {
    const unpaid = await orderWhen(tenant, orderId, 'has a payment intent', order => order.paymentIntentId !== null)
    const confirmed = await request(url(), `/api/mockpay/intents/${unpaid.paymentIntentId}/confirm`, { method: 'POST', body: { outcome: 'succeed', chaos: calm } })
    expect(confirmed.status, confirmed.text).toBe(200)
    return orderWhen(tenant, orderId, 'is paid', order => order.status === 'paid')
  }

  /** Every event of the tenant, page by page from the oldest, until hasMore is false. */
  async function allEvents(tenant: TenantCredentials, query = '', after?: string): Promise<ListedEvent[]> {
    const listed: ListedEvent[] = []
    let cursor = after
    for (;;) {
      const page = await get(tenant, `/api/events?limit=100${query}${cursor ? `&after=${cursor}` : ''}`)
      expect(page.status, page.text).toBe(200)
      listed.push(...page.json.data)
      if (!page.json.hasMore) return listed
      cursor = page.json.data.at(-1).id
    }
  }

  describe('one event per change, the object as GET answers it', () => {
    it('order.created, order.paid, refund.created and refund.succeeded, in order, each with the object as it was right after its change', async () => {
      const tenant = await createTenant(url(), 'events-api lifecycle')
      const orderId = await placeOrder(tenant)
      const created = await readOrder(tenant, orderId)
      const paid = await payOrder(tenant, orderId)
      const refund = await request(url(), `/api/orders/${orderId}/refunds`, { method: 'POST', headers: { ...auth(tenant), 'idempotency-key': randomUUID() }, body: { amount: 1000 } })
      expect(refund.status, refund.text).toBe(201)
      const refunded = await orderWhen(tenant, orderId, 'has its refund settled', order => order.refunds[0]?.status === 'succeeded')

      let listed: ListedEvent[] = []
      await pollUntil('the refund\'s events are listed', async () => (listed = await allEvents(tenant)).length >= 4, { timeoutMs: 10_000, intervalMs: 100 })
      expect(listed.map(event => event.type)).toEqual(['order.created', 'order.paid', 'refund.created', 'refund.succeeded'])
      for (const event of listed) {
        expect(event).toEqual({ id: expect.stringMatching(/^evt_[\w-]+$/), object: 'event', type: event.type, created: expect.any(Number), sequence: expect.any(Number), data: { object: expect.any(Object) } })
        expect(Math.abs(event.created - Date.now() / 1000)).toBeLessThan(120)
      }
      expect(listed.map(event => event.sequence)).toEqual([...listed.map(event => event.sequence)].sort((a, b) => a - b))
      expect(new Set(listed.map(event => event.sequence)).size).toBe(4)

      // The order as GET answered it after creation (no payment yet) and once paid; the refund as it was then.
      expect(listed[0]!.data.object).toEqual({ ...created, payment: null, paymentIntentId: null })
      expect(listed[1]!.data.object).toEqual(paid)
      expect(listed[2]!.data.object).toEqual({ ...refunded.refunds[0], status: 'pending' })
      expect(listed[3]!.data.object).toEqual(refunded.refunds[0])
      expect(await stack.sql`select count(*)::int as n from events where tenant_id = ${tenant.tenantId}`).toEqual([{ n: 4 }])

      // type filters; after continues; a second tenant sees none of them.
      expect((await allEvents(tenant, '&type=order.paid')).map(event => event.id)).toEqual([listed[1]!.id])
      expect((await allEvents(tenant, '', listed[1]!.id)).map(event => event.id)).toEqual([listed[2]!.id, listed[3]!.id])
      const stranger = await createTenant(url(), 'events-api stranger')
      expect(await allEvents(stranger)).toEqual([])
      const foreignCursor = await get(stranger, `/api/events?after=${listed[0]!.id}`)
      expectProblem(foreignCursor, 'validation-failed')
    })

    it('order.canceled carries cancelReason; limit pages oldest first', async () => {
      const tenant = await createTenant(url(), 'events-api cancel')
      const orderId = await placeOrder(tenant)
      const cancel = await request(url(), `/api/orders/${orderId}/cancel`, { method: 'POST', headers: { ...auth(tenant), 'idempotency-key': randomUUID() } })
      expect(cancel.status, cancel.text).toBe(200)
      const canceled = await readOrder(tenant, orderId)
      let listed: ListedEvent[] = []
      await pollUntil('the cancel is listed', async () => (listed = await allEvents(tenant)).length >= 2, { timeoutMs: 10_000, intervalMs: 100 })
      expect(listed.map(event => event.type)).toEqual(['order.created', 'order.canceled'])
      expect(listed[1]!.data.object).toEqual({ ...canceled, payment: listed[1]!.data.object.payment, paymentIntentId: listed[1]!.data.object.paymentIntentId })
      expect(listed[1]!.data.object.cancelReason).toBe('requested')
      const first = await get(tenant, '/api/events?limit=1')
      expect([first.status, first.json.data.map((event: ListedEvent) => event.id), first.json.hasMore]).toEqual([200, [listed[0]!.id], true])
      const second = await get(tenant, `/api/events?limit=1&after=${listed[0]!.id}`)
      expect([second.json.data.map((event: ListedEvent) => event.id), second.json.hasMore]).toEqual([[listed[1]!.id], false])
    })

    it('a count set or adjusted by the shop is stock.updated with the counts', async () => {
      const tenant = await createTenant(url(), 'events-api stock')
      const sku = `EVT-${randomUUID().slice(0, 8)}`
      const set = await request(url(), `/api/inventory/${sku}`, { method: 'PUT', headers: auth(tenant), body: { onHand: 7 } })
      expect(set.status, set.text).toBe(200)
      let listed: ListedEvent[] = []
      await pollUntil('the count is listed', async () => (listed = await allEvents(tenant)).length >= 1, { timeoutMs: 10_000, intervalMs: 100 })
      expect(listed.map(event => [event.type, event.data.object])).toEqual([['stock.updated', set.json]])
    })
  })

  describe('bad queries change nothing and say what to do', () => {
    it.each([
      ['/api/events?limit=101', 'limit'],
      ['/api/events?limit=0', 'limit'],
      ['/api/events?type=order.shipped', 'type'],
      ['/api/events?after=ord_123', 'after'],
      ['/api/events?after=evt_unknown', 'after'],
      ['/api/events?cursor=x', '(query)'],
      ['/api/orders?limit=101', 'limit'],
      ['/api/orders?status=shipped', 'status'],
      ['/api/orders?created_gte=yesterday', 'created_gte'],
      ['/api/orders?created_lt=535939677264', 'created_lt'],
      ['/api/orders?created_gte=10000-01-01T00:00:00Z', 'created_gte'],
      ['/api/orders?starting_after=ord_unknown', 'starting_after'],
    ])('%s → 400 validation-failed naming %s', async (path, field) => {
      const response = await get(stack.tenant, path)
      expectProblem(response, 'validation-failed')
      expect(response.json.errors.map((error: { path: string }) => error.path)).toContain(field)
      expect(response.json.detail).toMatch(/\.$/)
    })

    it('lists need the shop\'s secret key: none is 401', async () => {
      expectProblem(await request(url(), '/api/events'), 'unauthorized')
      expectProblem(await request(url(), '/api/orders'), 'unauthorized')
    })
  })

  describe('GET /api/orders', () => {
    it('newest first, filtered by status and creation time, paged with starting_after', async () => {
      const tenant = await createTenant(url(), 'events-api orders')
      const before = new Date(Date.now() - 1000).toISOString()
      const ids: string[] = []
      for (let n = 0; n < 5; n++) ids.push(await placeOrder(tenant))
      await payOrder(tenant, ids[1]!)
      const all = await get(tenant, '/api/orders')
      expect(all.status, all.text).toBe(200)
      expect([all.json.object, all.json.data.map((order: { id: string }) => order.id), all.json.hasMore]).toEqual(['list', [...ids].reverse(), false])
      expect(all.json.data[3]).toEqual(await readOrder(tenant, ids[1]!))

      const paid = await get(tenant, '/api/orders?status=paid')
      expect(paid.json.data.map((order: { id: string }) => order.id)).toEqual([ids[1]])

      const page1 = await get(tenant, '/api/orders?limit=2')
      const page2 = await get(tenant, `/api/orders?limit=2&starting_after=${page1.json.data[1].id}`)
      const page3 = await get(tenant, `/api/orders?limit=2&starting_after=${page2.json.data[1].id}`)
      expect([page1, page2, page3].map(page => [page.json.data.map((order: { id: string }) => order.id), page.json.hasMore]))
        .toEqual([[[ids[4], ids[3]], true], [[ids[2], ids[1]], true], [[ids[0]], false]])

      const since = Math.floor(Date.now() / 1000) + 60
      expect((await get(tenant, `/api/orders?created_gte=${since}`)).json.data).toEqual([])
      expect((await get(tenant, `/api/orders?created_gte=${before}`)).json.data).toHaveLength(5)
      expect((await get(tenant, `/api/orders?created_lt=${before}`)).json.data).toEqual([])
      const stranger = await createTenant(url(), 'events-api orders stranger')
      expect((await get(stranger, '/api/orders')).json.data).toEqual([])
    })
  })

  describe('paging during a storm', () => {
    it('pagers of both lists running while 300 orders are placed on 16 connections miss none and repeat none', async () => {
      const tenant = await createTenant(url(), 'events-api storm')
      const ORDERS = 300
      let placing = true
      const placed: string[] = []
      const storm = (async () => {
        let next = 0
        await Promise.all(Array.from({ length: 16 }, async () => {
          while (next < ORDERS) {
            next++
            placed.push(await placeOrder(tenant))
          }
        }))
        placing = false
      })()

      // The events pager follows the stream from the start, as a receiver catching up would.
      const seenEvents: ListedEvent[] = []
      const eventsPager = (async () => {
        let cursor: string | undefined
        let stormOverAt: number | undefined
        for (;;) {
          const stormOver = !placing
          const page = await get(tenant, `/api/events?limit=25&type=order.created${cursor ? `&after=${cursor}` : ''}`)
          expect(page.status, page.text).toBe(200)
          seenEvents.push(...page.json.data)
          if (page.json.data.length > 0) cursor = page.json.data.at(-1).id
          // Caught up after the storm: done once all are seen, or (a gap) when 5 s more bring nothing.
          stormOverAt ??= stormOver ? Date.now() : undefined
          if (!page.json.hasMore && stormOverAt !== undefined && (seenEvents.length >= ORDERS || Date.now() - stormOverAt > 5000)) return
          if (!page.json.hasMore) await new Promise(resolve => setTimeout(resolve, 20))
        }
      })()

      // The orders pager walks newest to oldest, over and over: each walk must hold every order placed before it began, once.
      let walks = 0
      const ordersPager = (async () => {
        while (placing) {
          const committedBefore = new Set((await stack.sql<Array<{ id: string }>>`select id from orders where tenant_id = ${tenant.tenantId}`).map(row => row.id))
          const walked: string[] = []
          let cursor: string | undefined
          for (;;) {
            const page = await get(tenant, `/api/orders?limit=20${cursor ? `&starting_after=${cursor}` : ''}`)
            expect(page.status, page.text).toBe(200)
            walked.push(...page.json.data.map((order: { id: string }) => order.id))
            if (!page.json.hasMore) break
            cursor = page.json.data.at(-1).id
          }
          expect(new Set(walked).size, 'a repeat in one walk').toBe(walked.length)
          const walkedSet = new Set(walked)
          expect([...committedBefore].filter(id => !walkedSet.has(id)), 'orders committed before the walk and missing from it').toEqual([])
          walks++
        }
      })()

      await Promise.all([storm, eventsPager, ordersPager])
      expect(placed).toHaveLength(ORDERS)
      expect(walks).toBeGreaterThan(0)
      const ids = seenEvents.map(event => event.id)
      expect(new Set(ids).size, 'an event listed twice').toBe(ids.length)
      expect(seenEvents.map(event => event.data.object.id).sort()).toEqual([...placed].sort())
      const sequences = seenEvents.map(event => event.sequence)
      expect(sequences).toEqual([...sequences].sort((a, b) => a - b))
      expect(await stack.sql`select count(*)::int as n from events where tenant_id = ${tenant.tenantId} and type = 'order.created'`).toEqual([{ n: ORDERS }])
    })
  })
})
