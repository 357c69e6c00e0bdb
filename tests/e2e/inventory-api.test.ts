import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { fastJobsEnv, stopAll } from '../support/app'
import { createTenant, request, requestAsSent } from '../support/http'
import { expectProblem, type OrderItem, type OrdersStack, postOrder, startOrdersStack, type TenantCredentials, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { describeWithServices } from '../support/services'

// The inventory API (docs/api.md#inventory, docs/inventory.md) against the built server on Postgres
// and Redis, black-box: counts set, read and listed, adjustments counted once per key, orders
// reserving tracked SKUs (or refused, nothing reserved), the checkout session reading but never
// writing, tenants apart, a paid order's refund putting units back once, and paths that would name
// another SKU or route once resolved answering 404.

const DEMO_TENANT_ID = 'ten_demo_store'
const UNIT_PRICE = 10_000
const calm = { duplicates: 0, maxDelayMs: 0 }

const auth = (tenant: TenantCredentials) => ({ authorization: `Bearer ${tenant.secretKey}` })
const sku = (label: string) => `${label}-${randomUUID().slice(0, 8)}`
const isoTime = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
const stockBody = (sku: string, onHand: number, reserved = 0) => ({ object: 'stock', sku, onHand, reserved, available: onHand - reserved, updatedAt: isoTime })

/** An order of these items, its amount their sum. */
const orderOf = (items: Array<Omit<OrderItem, 'unitPrice'>>) => {
  const priced = items.map(item => ({ ...item, unitPrice: UNIT_PRICE }))
  return validOrderBody({ items: priced, amount: priced.reduce((sum, item) => sum + item.quantity * item.unitPrice, 0) })
}

describeWithServices('inventory API, built server on Postgres and Redis', ['postgres', 'redis'], () => {
  let stack: OrdersStack
  /** A second tenant on the same server. */
  let other: TenantCredentials

  beforeAll(async () => {
    stack = await startOrdersStack('inventory-api', { ...fastJobsEnv, CHECKOUT_DEMO_ENABLED: 'true', MOCKPAY_DUPLICATES: '0', MOCKPAY_MAX_DELAY_MS: '0' })
    other = await createTenant(stack.app.url, 'inventory-api other')
  })

  afterAll(async () => {
    await stack?.close()
    await stopAll()
  })

  const url = () => stack.app.url
  const put = (tenant: TenantCredentials, name: string, body: unknown) => request(url(), `/api/inventory/${name}`, { method: 'PUT', headers: auth(tenant), body })
  const get = (tenant: TenantCredentials, path: string) => request(url(), path, { headers: auth(tenant) })
  const adjust = (tenant: TenantCredentials, name: string, key: string, body: unknown) =>
    request(url(), `/api/inventory/${name}/adjustments`, { method: 'POST', headers: { ...auth(tenant), 'idempotency-key': key }, body })

  /** The SKU's ledger rows, oldest first. */
  const movements = (tenantId: string, name: string) => stack.sql<Array<{ kind: string, onHandDelta: number, reservedDelta: number, reason: string | null }>>`
    select kind, on_hand_delta::int as "onHandDelta", reserved_delta::int as "reservedDelta", reason
    from stock_movements where tenant_id = ${tenantId} and sku = ${name} order by id`

  async function readOrder(orderId: string): Promise<Record<string, any>> {
    const response = await get(stack.tenant, `/api/orders/${orderId}`)
    expect(response.status, response.text).toBe(200)
    return response.json
  }

  async function orderWhen(orderId: string, what: string, condition: (order: Record<string, any>) => boolean): Promise<Record<string, any>> {
    let order: Record<string, any> = {}
    await pollUntil(`order ${orderId} ${what} (last seen ${JSON.stringify(order.status)})`, async () => condition(order = await readOrder(orderId)), { timeoutMs: 20_000, intervalMs: 100 })
    return order
  }

  describe('set, read and list counts', () => {
    it('PUT sets the count (200), GET reads it, the same count again writes no ledger row, a lower one writes the difference', async () => {
      const name = sku('SET')
      const created = await put(stack.tenant, name, { onHand: 5 })
      expect(created.status, created.text).toBe(200)
      expect(created.headers.get('content-type')).toMatch(/^application\/json\b/)
      expect(created.json).toEqual(stockBody(name, 5))
      expect((await get(stack.tenant, `/api/inventory/${name}`)).json).toEqual(created.json)

      expect((await put(stack.tenant, name, { onHand: 5 })).json).toEqual(stockBody(name, 5))
      const lowered = await put(stack.tenant, name, { onHand: 3 })
      expect([lowered.status, lowered.json]).toEqual([200, stockBody(name, 3)])
      expect(await movements(stack.tenant.tenantId, name)).toEqual([
        { kind: 'set', onHandDelta: 5, reservedDelta: 0, reason: null },
        { kind: 'set', onHandDelta: -2, reservedDelta: 0, reason: null },
      ])
    })

    it('lists the tenant\'s SKUs by SKU, `limit` at a time, the next page after `startingAfter` while hasMore', async () => {
      const tenant = await createTenant(url(), 'inventory-api list')
      const names = ['LIST-A', 'LIST-B', 'LIST-C']
      for (const [index, name] of names.entries()) expect((await put(tenant, name, { onHand: index })).status).toBe(200)
      const first = await get(tenant, '/api/inventory?limit=2')
      expect([first.status, first.json]).toEqual([200, { object: 'list', data: [stockBody('LIST-A', 0), stockBody('LIST-B', 1)], hasMore: true }])
      const second = await get(tenant, '/api/inventory?limit=2&startingAfter=LIST-B')
      expect(second.json).toEqual({ object: 'list', data: [stockBody('LIST-C', 2)], hasMore: false })
      expect((await get(tenant, '/api/inventory')).json).toEqual({ object: 'list', data: names.map((name, index) => stockBody(name, index)), hasMore: false })
      const bad = await get(tenant, '/api/inventory?limit=0&startingAfter=a%2Fb')
      expectProblem(bad, 'validation-failed')
      expect(bad.json).toEqual({
        type: '/problems/validation-failed', title: 'Validation failed', status: 400,
        detail: 'The query has 2 invalid fields; see errors. Fix them and send the request again.',
        errors: [
          { path: 'limit', message: 'must be 1 or more' },
          { path: 'startingAfter', message: 'must be 1–64 letters, digits or any of - . _ ~ : @ ! $ & \' ( ) * + , ; =' },
        ],
      })
    })

    it('answers 404 for a SKU with no count, and for a path segment that is no SKU', async () => {
      const unknown = await get(stack.tenant, '/api/inventory/NEVER-SET')
      expectProblem(unknown, 'not-found')
      expect(unknown.json).toEqual({
        type: '/problems/not-found', title: 'Not found', status: 404,
        detail: 'No stock is set for SKU "NEVER-SET". Set its count first: PUT /api/inventory/NEVER-SET with {"onHand": …}.',
      })
      const notSku = await put(stack.tenant, 'A%2FB', { onHand: 1 })
      expectProblem(notSku, 'not-found')
      expect(notSku.json.detail).toBe('No stock exists for SKU "A%2FB": a SKU is 1–64 letters, digits or - . _ ~ : @ ! $ & \' ( ) * + , ; =. List the tracked ones with GET /api/inventory.')
    })

    it.each([
      [{ onHand: -1 }, [{ path: 'onHand', message: 'must be 0 or more' }]],
      [{ onHand: 1.5 }, [{ path: 'onHand', message: 'must be an integer' }]],
      [{ onHand: '4' }, [{ path: 'onHand', message: 'Invalid input: expected number, received string' }]],
      [{}, [{ path: 'onHand', message: 'Invalid input: expected number, received undefined' }]],
      [{ onHand: 1, reserved: 0 }, [{ path: '(body)', message: 'Unrecognized key: "reserved"' }]],
    ])('PUT %j is 400 validation-failed naming each field, and sets nothing', async (body, errors) => {
      const name = sku('BAD')
      const response = await put(stack.tenant, name, body)
      expectProblem(response, 'validation-failed')
      expect(response.json).toEqual({
        type: '/problems/validation-failed', title: 'Validation failed', status: 400,
        detail: 'The body has 1 invalid field; see errors. Nothing was stored: fix them and send the request again with the same Idempotency-Key.',
        errors,
      })
      expectProblem(await get(stack.tenant, `/api/inventory/${name}`), 'not-found')
    })

    it.each([
      ['GET', '/api/inventory/%2E%2E'],
      ['GET', '/api/inventory/.'],
      ['PUT', '/api/inventory/..'],
      ['PUT', '/api/inventory/.%2e'],
      ['POST', '/api/inventory/%2E%2E/adjustments'],
      ['POST', '/api/inventory/SKU-1/%2E%2E/%2E%2E/inventory/SKU-1/adjustments'],
      ['GET', '/api/orders/%2E%2E'],
    ])('answers %s %s, a path with a dot segment sent as it is, 404 as no route, and touches no stock', async (method, path) => {
      const before = await stack.sql`select count(*)::int as n from stock_movements`
      const body = method === 'GET' ? undefined : { onHand: 1, delta: 1, reason: 'received' }
      const answer = await requestAsSent(url(), path, { method, headers: { ...auth(stack.tenant), 'idempotency-key': randomUUID() }, body })
      expectProblem(answer, 'not-found')
      expect(answer.json.detail).toBe(`No API route matches ${method} ${path}. The routes are described at GET /api/openapi.json and rendered at /docs.`)
      expect(await stack.sql`select count(*)::int as n from stock_movements`).toEqual(before)
    })
  })

  describe('adjustments, once per Idempotency-Key', () => {
    it('counts a retried adjustment once: the second answer replayed with Idempotent-Replayed, one ledger row', async () => {
      const name = sku('ADJ')
      await put(stack.tenant, name, { onHand: 5 })
      const key = randomUUID()
      const first = await adjust(stack.tenant, name, key, { delta: 4, reason: 'received' })
      expect(first.status, first.text).toBe(201)
      expect(first.json).toEqual({ ...stockBody(name, 9), idempotency: { key, replayed: false } })
      expect(first.headers.get('idempotent-replayed')).toBeNull()
      const again = await adjust(stack.tenant, name, key, { delta: 4, reason: 'received' })
      expect(again.status, again.text).toBe(201)
      expect(again.json).toEqual({ ...first.json, idempotency: { key, replayed: true } })
      expect(again.headers.get('idempotent-replayed')).toBe('true')
      expect((await get(stack.tenant, `/api/inventory/${name}`)).json).toEqual(stockBody(name, 9))
      expect((await movements(stack.tenant.tenantId, name)).filter(row => row.kind === 'adjust')).toEqual([{ kind: 'adjust', onHandDelta: 4, reservedDelta: 0, reason: 'received' }])

      const reused = await adjust(stack.tenant, name, key, { delta: 5, reason: 'received' })
      expectProblem(reused, 'idempotency-key-reused')
      const elsewhere = await adjust(stack.tenant, sku('ADJ-OTHER'), key, { delta: 4, reason: 'received' })
      expectProblem(elsewhere, 'idempotency-key-reused')
      expect((await get(stack.tenant, `/api/inventory/${name}`)).json).toEqual(stockBody(name, 9))
    })

    it.each([
      [{ delta: 0, reason: 'received' }, [{ path: 'delta', message: 'must not be 0: send the units received (positive) or lost (negative)' }]],
      [{ delta: 2, reason: 'found' }, [{ path: 'reason', message: 'Invalid option: expected one of "received"|"counted"|"damaged"|"returned"|"other"' }]],
      [{ delta: 2 }, [{ path: 'reason', message: 'Invalid option: expected one of "received"|"counted"|"damaged"|"returned"|"other"' }]],
    ])('POST %j is 400 validation-failed, stores nothing, and leaves the key free', async (body, errors) => {
      const name = sku('ADJ-BAD')
      await put(stack.tenant, name, { onHand: 5 })
      const key = randomUUID()
      const response = await adjust(stack.tenant, name, key, body)
      expectProblem(response, 'validation-failed')
      expect(response.json).toEqual({
        type: '/problems/validation-failed', title: 'Validation failed', status: 400,
        detail: 'The body has 1 invalid field; see errors. Nothing was stored: fix them and send the request again with the same Idempotency-Key.',
        errors,
      })
      const corrected = await adjust(stack.tenant, name, key, { delta: 1, reason: 'counted' })
      expect([corrected.status, corrected.json]).toEqual([201, { ...stockBody(name, 6), idempotency: { key, replayed: false } }])
    })

    it('answers 404 for a SKU with no count, stored under the key', async () => {
      const name = sku('ADJ-UNSET')
      const key = randomUUID()
      const first = await adjust(stack.tenant, name, key, { delta: 1, reason: 'received' })
      const detail = `No stock is set for SKU "${name}". Set its count first: PUT /api/inventory/${name} with {"onHand": …}.`
      expect(first.json).toEqual({ type: '/problems/not-found', title: 'Not found', status: 404, detail, idempotency: { key, replayed: false } })
      await put(stack.tenant, name, { onHand: 1 })
      const again = await adjust(stack.tenant, name, key, { delta: 1, reason: 'received' })
      expect([again.status, again.headers.get('idempotent-replayed'), again.json]).toEqual([404, 'true', { ...first.json, idempotency: { key, replayed: true } }])
      expect((await get(stack.tenant, `/api/inventory/${name}`)).json).toEqual(stockBody(name, 1))
    })
  })

  describe('orders reserve tracked SKUs', () => {
    it('an order holds its tracked SKUs (reservations on GET, reserved counts); an adjustment or count below them is 409 stock-below-reserved, the adjustment\'s stored and replayed; a cancel releases them', async () => {
      const tracked = sku('RES')
      await put(stack.tenant, tracked, { onHand: 5 })
      const created = await postOrder(url(), { secretKey: stack.tenant.secretKey, key: randomUUID(), body: orderOf([{ sku: tracked, quantity: 2 }, { sku: 'UNTRACKED-1', quantity: 1 }, { sku: tracked, quantity: 1 }]) })
      expect(created.status, created.text).toBe(201)
      const order = await readOrder(created.json.id)
      expect([order.status, order.cancelReason, order.reservations]).toEqual(['pending_payment', null, [{ sku: tracked, quantity: 3, status: 'reserved' }]])
      expect((await get(stack.tenant, `/api/inventory/${tracked}`)).json).toEqual(stockBody(tracked, 5, 3))

      const key = randomUUID()
      const below = await adjust(stack.tenant, tracked, key, { delta: -3, reason: 'damaged' })
      expect(below.json).toEqual({
        type: '/problems/stock-below-reserved', title: 'Stock below reserved', status: 409,
        detail: `SKU "${tracked}" would have 2 on hand, below the 3 unpaid orders hold. Count again, or wait until they are paid, canceled or expire: onHand may not go below 3.`,
        onHand: 5, reserved: 3, idempotency: { key, replayed: false },
      })
      const replayed = await adjust(stack.tenant, tracked, key, { delta: -3, reason: 'damaged' })
      expect([replayed.status, replayed.headers.get('idempotent-replayed'), replayed.json]).toEqual([409, 'true', { ...below.json, idempotency: { key, replayed: true } }])
      const count = await put(stack.tenant, tracked, { onHand: 2 })
      expectProblem(count, 'stock-below-reserved')
      expect(count.json).toEqual({ ...below.json, idempotency: undefined })
      expect(count.json).not.toHaveProperty('idempotency')
      expect((await movements(stack.tenant.tenantId, tracked)).map(row => row.kind)).toEqual(['set', 'reserve'])

      const cancel = await request(url(), `/api/orders/${created.json.id}/cancel`, { method: 'POST', headers: { ...auth(stack.tenant), 'idempotency-key': randomUUID() } })
      expect(cancel.status, cancel.text).toBe(200)
      expect([cancel.json.cancelReason, cancel.json.reservations]).toEqual(['requested', [{ sku: tracked, quantity: 3, status: 'released' }]])
      expect((await get(stack.tenant, `/api/inventory/${tracked}`)).json).toEqual(stockBody(tracked, 5))
    })

    it('an order short of stock is 409 insufficient-stock, replayed under its key with the same body; no order made, nothing reserved', async () => {
      const short = sku('SHORT')
      const plenty = sku('PLENTY')
      await put(stack.tenant, short, { onHand: 2 })
      await put(stack.tenant, plenty, { onHand: 9 })
      const key = randomUUID()
      const body = orderOf([{ sku: plenty, quantity: 1 }, { sku: short, quantity: 2 }, { sku: short, quantity: 1 }])
      const refused = await postOrder(url(), { secretKey: stack.tenant.secretKey, key, body })
      expectProblem(refused, 'insufficient-stock')
      expect(refused.json).toEqual({
        type: '/problems/insufficient-stock', title: 'Insufficient stock', status: 409,
        detail: `Not enough stock for ${short} (3 asked, 2 available). Nothing was reserved: order fewer units or other items, under a new Idempotency-Key.`,
        items: [{ sku: short, requested: 3, available: 2 }],
        idempotency: { key, replayed: false },
      })
      expect(refused.headers.get('idempotent-replayed')).toBeNull()
      const replayed = await postOrder(url(), { secretKey: stack.tenant.secretKey, key, body })
      expect([replayed.status, replayed.headers.get('idempotent-replayed'), replayed.json]).toEqual([409, 'true', { ...refused.json, idempotency: { key, replayed: true } }])

      expect(await stack.sql`select id from orders where cart_id = ${body.cartId}`).toEqual([])
      expect(await stack.sql`select sku from stock_movements where tenant_id = ${stack.tenant.tenantId} and sku in (${short}, ${plenty}) and kind = 'reserve'`).toEqual([])
      expect((await get(stack.tenant, `/api/inventory/${short}`)).json).toEqual(stockBody(short, 2))
      expect((await get(stack.tenant, `/api/inventory/${plenty}`)).json).toEqual(stockBody(plenty, 9))
    })
  })

  describe('who reads and writes', () => {
    it('the checkout session reads the demo store\'s stock but may not set or adjust it (401)', async () => {
      const started = await request(url(), '/api/checkout/session')
      expect(started.status, started.text).toBe(200)
      const cookie = { cookie: started.headers.getSetCookie().find(header => header.startsWith('ic_checkout='))!.split(';')[0]! }
      // The demo store has no secret key: its count is arranged the way PUT writes one, a stock row moved by a ledger row.
      const name = sku('TEE')
      await stack.sql`insert into stock (tenant_id, sku, on_hand) values (${DEMO_TENANT_ID}, ${name}, 0)`
      await stack.sql`insert into stock_movements (tenant_id, sku, kind, source_type, source_id, quantity, on_hand_delta, reserved_delta)
        values (${DEMO_TENANT_ID}, ${name}, 'set', 'count', ${`cnt_${randomUUID()}`}, 7, 7, 0)`

      const read = await request(url(), `/api/inventory/${name}`, { headers: cookie })
      expect([read.status, read.json]).toEqual([200, stockBody(name, 7)])
      const list = await request(url(), `/api/inventory?startingAfter=${name.slice(0, -1)}`, { headers: cookie })
      expect(list.json.data).toContainEqual(stockBody(name, 7))
      expectProblem(await request(url(), '/api/inventory/SKU-1', { headers: cookie }), 'not-found')

      const denied = {
        type: '/problems/unauthorized', title: 'Unauthorized', status: 401,
        detail: 'This is the shop\'s act: send your secret key as "Authorization: Bearer sk_…" (the checkout page\'s session cannot do it).',
      }
      const set = await request(url(), `/api/inventory/${name}`, { method: 'PUT', headers: cookie, body: { onHand: 100 } })
      expect([set.status, set.json]).toEqual([401, denied])
      const adjusted = await request(url(), `/api/inventory/${name}/adjustments`, { method: 'POST', headers: { ...cookie, 'idempotency-key': randomUUID() }, body: { delta: 100, reason: 'received' } })
      expect([adjusted.status, adjusted.json]).toEqual([401, denied])
      expectProblem(await request(url(), `/api/inventory/${name}`), 'unauthorized')
      expect((await request(url(), `/api/inventory/${name}`, { headers: cookie })).json).toEqual(stockBody(name, 7))
    })

    it('one tenant never sees or changes another\'s stock: 404, and the same SKU name is its own count', async () => {
      const name = sku('MINE')
      await put(stack.tenant, name, { onHand: 4 })
      const unseen = await get(other, `/api/inventory/${name}`)
      expect([unseen.status, unseen.json.detail]).toEqual([404, `No stock is set for SKU "${name}". Set its count first: PUT /api/inventory/${name} with {"onHand": …}.`])
      expectProblem(await adjust(other, name, randomUUID(), { delta: 1, reason: 'received' }), 'not-found')
      expect((await get(other, `/api/inventory?startingAfter=${name.slice(0, -1)}`)).json.data.map((stock: { sku: string }) => stock.sku)).not.toContain(name)

      expect((await put(other, name, { onHand: 1 })).json).toEqual(stockBody(name, 1))
      expect((await get(stack.tenant, `/api/inventory/${name}`)).json).toEqual(stockBody(name, 4))
      expect((await get(other, `/api/inventory/${name}`)).json).toEqual(stockBody(name, 1))
    })
  })

  describe('refunds put units back', () => {
    it('a paid order\'s units are committed; a refund with restock puts the named units back once, its replay restocks nothing more; more than is left is 409 restock-exceeds-committed, stored', async () => {
      const name = sku('PAID')
      await put(stack.tenant, name, { onHand: 10 })
      const created = await postOrder(url(), { secretKey: stack.tenant.secretKey, key: randomUUID(), body: orderOf([{ sku: name, quantity: 3 }]) })
      expect(created.status, created.text).toBe(201)
      const orderId: string = created.json.id
      const { paymentIntentId } = await orderWhen(orderId, 'has a payment intent', order => order.paymentIntentId !== null)
      const confirmed = await request(url(), `/api/mockpay/intents/${paymentIntentId}/confirm`, { method: 'POST', body: { outcome: 'succeed', chaos: calm } })
      expect(confirmed.status, confirmed.text).toBe(200)
      const paid = await orderWhen(orderId, 'is paid', order => order.status === 'paid')
      expect(paid.reservations).toEqual([{ sku: name, quantity: 3, status: 'committed' }])
      expect((await get(stack.tenant, `/api/inventory/${name}`)).json).toEqual(stockBody(name, 7))

      const refund = (key: string, body: unknown) => request(url(), `/api/orders/${orderId}/refunds`, { method: 'POST', headers: { ...auth(stack.tenant), 'idempotency-key': key }, body })
      const key = randomUUID()
      const body = { amount: UNIT_PRICE, restock: true, items: [{ sku: name, quantity: 2 }] }
      const first = await refund(key, body)
      expect(first.status, first.text).toBe(201)
      expect((await get(stack.tenant, `/api/inventory/${name}`)).json).toEqual(stockBody(name, 9))
      const again = await refund(key, body)
      expect([again.status, again.headers.get('idempotent-replayed'), again.json]).toEqual([201, 'true', { ...first.json, idempotency: { key, replayed: true } }])
      expect((await get(stack.tenant, `/api/inventory/${name}`)).json).toEqual(stockBody(name, 9))
      expect((await movements(stack.tenant.tenantId, name)).map(({ kind, onHandDelta }) => [kind, onHandDelta])).toEqual([['set', 10], ['reserve', 0], ['commit', -3], ['restock', 2]])

      const tooMuchKey = randomUUID()
      const tooMuch = await refund(tooMuchKey, body)
      expect(tooMuch.json).toEqual({
        type: '/problems/restock-exceeds-committed', title: 'Restock exceeds what was sold', status: 409,
        detail: `Order ${orderId} cannot put back 2 × ${name}: at most 1 × ${name} can be restocked. Name at most that in "items", under a new Idempotency-Key.`,
        restockable: [{ sku: name, quantity: 1 }],
        idempotency: { key: tooMuchKey, replayed: false },
      })
      const tooMuchAgain = await refund(tooMuchKey, body)
      expect([tooMuchAgain.status, tooMuchAgain.headers.get('idempotent-replayed'), tooMuchAgain.json]).toEqual([409, 'true', { ...tooMuch.json, idempotency: { key: tooMuchKey, replayed: true } }])
      expect((await readOrder(orderId)).refunds).toHaveLength(1)
      expect((await get(stack.tenant, `/api/inventory/${name}`)).json).toEqual(stockBody(name, 9))
    })
  })
})
