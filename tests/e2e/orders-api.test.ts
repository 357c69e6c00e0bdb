import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { problemCatalog } from '../../server/problems/catalog'
import { stopAll, testSecrets } from '../support/app'
import { createTenant, request } from '../support/http'
import { untilRequestInFlight } from '../support/in-flight'
import {
  countRows,
  expectCreatedOrder,
  expectProblem,
  newIdempotencyKey,
  type OrderBody,
  type OrdersStack,
  postOrder,
  requestIdPattern,
  startOrdersStack,
  type TenantCredentials,
  validOrderBody,
} from '../support/orders'
import { pollUntil } from '../support/poll'
import { type PrismProxy, startPrism } from '../support/prism'
import { describeWithServices } from '../support/services'

// docs/api.md: every row of the idempotency table for POST /api/orders, plus GET, auth and problem
// pages, against the built server on real Postgres and Redis. Requests go through Prism, which
// checks each exchange against the OpenAPI document; only those the document itself calls invalid
// (or that Prism would alter, or routes outside it) go to the server directly, through `direct`.

interface IdempotencyRow {
  status: string
  attempts: number
  fingerprint: string
  responseStatus: number | null
}

/** The raw replay text must be the first response's bytes with only the replayed flag flipped. */
const asReplayedText = (firstText: string) => firstText.replace('"replayed":false', '"replayed":true')

/** A JSON text meaning the same order: keys reversed at every level, spaced out, plus an unknown field. */
function reorderedWithUnknownField(body: OrderBody): string {
  const reversed = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(reversed)
    if (value === null || typeof value !== 'object') return value
    return Object.fromEntries(Object.entries(value).reverse().map(([k, v]) => [k, reversed(v)]))
  }
  return JSON.stringify({ giftWrap: true, ...(reversed(body) as object) }, null, 3)
}

describeWithServices('POST /api/orders idempotency contract', ['postgres', 'redis'], () => {
  let stack: OrdersStack
  let tenant: TenantCredentials
  let prism: PrismProxy

  beforeAll(async () => {
    stack = await startOrdersStack('orders-api')
    tenant = stack.tenant
    prism = await startPrism({ upstream: stack.app.url, label: 'orders-api prism' })
  })

  afterAll(async () => {
    await prism?.stop()
    await stack?.close()
    await stopAll()
  })

  /** Checked by Prism against the document. */
  const api = () => prism.url
  /** Past Prism, for requests it would refuse or alter before the server saw them. */
  const direct = () => stack.app.url

  const post = (key: string | undefined, body: unknown, headers: Record<string, string> = {}) =>
    postOrder(api(), { secretKey: tenant.secretKey, key, body, headers })
  const postDirect = (key: string | undefined, body: unknown, headers: Record<string, string> = {}) =>
    postOrder(direct(), { secretKey: tenant.secretKey, key, body, headers })

  async function recordsForKey(key: string): Promise<IdempotencyRow[]> {
    return stack.sql<IdempotencyRow[]>`
      select status, attempts, fingerprint, response_status as "responseStatus"
      from idempotency_records where key = ${key}`
  }

  /**
   * Resolves once the first request holds its processing lock and its statement is uncommitted (no
   * record exists before the commit), so a duplicate is sure to find it in flight.
   */
  const untilInFlight = (key: string) => untilRequestInFlight(stack.sql, { app: stack.app, scope: `tenant:${tenant.tenantId}`, key })

  describe('first execution and replay', () => {
    it('creates the order once: 201, the order with idempotency {key, replayed:false}, Location, one order and one succeeded record', async () => {
      const before = await countRows(stack.sql)
      const key = newIdempotencyKey()
      const body = validOrderBody()

      const created = await post(key, body)

      expectCreatedOrder(created, body, key, false)
      expect(await countRows(stack.sql)).toEqual({ ...before, orders: before.orders + 1, idempotencyRecords: before.idempotencyRecords + 1 })
      const [order] = await stack.sql`select tenant_id, cart_id, idempotency_key from orders where id = ${created.json.id}`
      expect(order).toEqual({ tenant_id: tenant.tenantId, cart_id: body.cartId, idempotency_key: key })
      expect(await recordsForKey(key)).toEqual([{ status: 'succeeded', attempts: 1, fingerprint: expect.stringMatching(/^[0-9a-f]{64}$/), responseStatus: 201 }])
    })

    it('replays the same key and same payload (other key order, whitespace, unknown field) byte for byte with replayed:true', async () => {
      const key = newIdempotencyKey()
      const body = validOrderBody()
      const first = await post(key, body)
      expectCreatedOrder(first, body, key, false)
      const before = await countRows(stack.sql)

      // Direct: Prism would forward its own re-serialization of the JSON, without this text's whitespace.
      const replay = await postDirect(key, reorderedWithUnknownField(body))

      expectCreatedOrder(replay, body, key, true)
      expect(replay.text).toBe(asReplayedText(first.text))
      expect(replay.headers.get('location')).toBe(first.headers.get('location'))
      expect(await countRows(stack.sql)).toEqual(before)
    })

    it('answers 422 idempotency-key-reused for the same key with a different body, and writes nothing', async () => {
      const key = newIdempotencyKey()
      const first = await post(key, validOrderBody())
      expect(first.status).toBe(201)
      const before = await countRows(stack.sql)

      const reused = await post(key, validOrderBody())

      expectProblem(reused, 'idempotency-key-reused')
      expect(reused.headers.get('idempotent-replayed')).toBeNull()
      expect(reused.headers.get('location')).toBeNull()
      expect(await countRows(stack.sql)).toEqual(before)
    })
  })

  describe('while the first request is still running', () => {
    it('answers a duplicate 409 request-in-progress with Retry-After: 1, then replays it once the first finished', async () => {
      const key = newIdempotencyKey()
      const body = validOrderBody()
      const firstPending = post(key, body, { 'x-fault': 'delay-before-commit=2000' })
      await untilInFlight(key)

      const duplicate = await post(key, body)

      expectProblem(duplicate, 'request-in-progress')
      // A short hint, however long the first request may still take.
      expect(duplicate.headers.get('retry-after')).toBe('1')
      expect(duplicate.headers.get('idempotent-replayed')).toBeNull()
      expect(await recordsForKey(key)).toEqual([])

      const first = await firstPending
      expectCreatedOrder(first, body, key, false)
      const later = await post(key, body)
      expectCreatedOrder(later, body, key, true)
      expect(later.text).toBe(asReplayedText(first.text))
      const [orders] = await stack.sql`select count(*)::int as count from orders where cart_id = ${body.cartId}`
      expect(orders?.count).toBe(1)
    })

    it('answers 422 at once for a different body under a key that is still running', async () => {
      const key = newIdempotencyKey()
      const firstPending = post(key, validOrderBody(), { 'x-fault': 'delay-before-commit=1500' })
      await untilInFlight(key)

      const reused = await post(key, validOrderBody())

      expectProblem(reused, 'idempotency-key-reused')
      // Answered while the first was still uncommitted, not after it finished.
      expect(await recordsForKey(key)).toEqual([])
      expect((await firstPending).status).toBe(201)
      expect(await recordsForKey(key)).toHaveLength(1)
    })

    it('with Prefer: wait=5, waits for the first and replays its result', async () => {
      const key = newIdempotencyKey()
      const body = validOrderBody()
      const firstPending = post(key, body, { 'x-fault': 'delay-before-commit=1500' })
      await untilInFlight(key)

      const waited = await post(key, body, { prefer: 'wait=5' })
      const first = await firstPending

      expectCreatedOrder(first, body, key, false)
      expectCreatedOrder(waited, body, key, true)
      expect(waited.json.id).toBe(first.json.id)
      expect(waited.text).toBe(asReplayedText(first.text))
    })

    it('with Prefer: wait=1, answers 409 request-in-progress when the first outlasts the wait', async () => {
      const key = newIdempotencyKey()
      const body = validOrderBody()
      const firstPending = post(key, body, { 'x-fault': 'delay-before-commit=3000' })
      await untilInFlight(key)

      const waited = await post(key, body, { prefer: 'wait=1' })

      expectProblem(waited, 'request-in-progress')
      expect(waited.headers.get('retry-after')).toBe('1')
      expectCreatedOrder(await firstPending, body, key, false)
    })
  })

  describe('keys and bodies that are refused before anything is stored', () => {
    it('answers 400 idempotency-key-missing without the header', async () => {
      const before = await countRows(stack.sql)
      expectProblem(await postDirect(undefined, validOrderBody()), 'idempotency-key-missing')
      expect(await countRows(stack.sql)).toEqual(before)
    })

    it.each([
      ['256 characters', 'k'.repeat(256)],
      ['a space inside', 'order key'],
    ])('answers 400 idempotency-key-invalid for a key with %s', async (_, key) => {
      const before = await countRows(stack.sql)
      expectProblem(await postDirect(key, validOrderBody()), 'idempotency-key-invalid')
      expect(await countRows(stack.sql)).toEqual(before)
    })

    it('answers 400 validation-failed with errors [{path, message}] and keeps the key free for a valid body', async () => {
      const key = newIdempotencyKey()
      const body = validOrderBody()
      const before = await countRows(stack.sql)

      const invalid = await post(key, { ...body, amount: body.amount + 1 })

      expectProblem(invalid, 'validation-failed')
      expect(invalid.json.errors).toEqual([{ path: 'amount', message: expect.stringMatching(/\S/) }])
      expect(await countRows(stack.sql)).toEqual(before)
      expect(await recordsForKey(key)).toEqual([])

      expectCreatedOrder(await post(key, body), body, key, false)
    })
  })

  describe('stored outcomes', () => {
    it('stores and replays a deterministic 409 cart-already-ordered for another key on an ordered cart', async () => {
      const body = validOrderBody()
      const keyA = newIdempotencyKey()
      const keyB = newIdempotencyKey()
      const ordered = await post(keyA, body)
      expect(ordered.status).toBe(201)

      const conflict = await post(keyB, body)

      expectProblem(conflict, 'cart-already-ordered')
      expect(conflict.json).toMatchObject({ orderId: ordered.json.id, idempotency: { key: keyB, replayed: false } })
      expect(conflict.headers.get('idempotent-replayed')).toBeNull()
      expect(conflict.headers.get('location')).toBeNull()

      const repeated = await post(keyB, body)

      expectProblem(repeated, 'cart-already-ordered')
      expect(repeated.headers.get('idempotent-replayed')).toBe('true')
      expect(repeated.text).toBe(asReplayedText(conflict.text))
      expect(await recordsForKey(keyB)).toEqual([expect.objectContaining({ status: 'failed', responseStatus: 409 })])
      const [orders] = await stack.sql`select count(*)::int as count from orders where cart_id = ${body.cartId}`
      expect(orders?.count).toBe(1)
    })

    it('rolls back an unexpected failure (500 internal-error) entirely, record included, so the same key executes afresh', async () => {
      const key = newIdempotencyKey()
      const body = validOrderBody()
      const before = await countRows(stack.sql)

      const failed = await post(key, body, { 'x-fault': 'fail-before-commit' })

      expectProblem(failed, 'internal-error')
      expect(failed.headers.get('location')).toBeNull()
      expect(failed.headers.get('idempotent-replayed')).toBeNull()
      // Nothing committed at all: no order, no record, so the key is free.
      expect(await countRows(stack.sql)).toEqual(before)
      expect(await recordsForKey(key)).toEqual([])

      const retried = await post(key, body)

      expectCreatedOrder(retried, body, key, false)
      expect(await countRows(stack.sql)).toEqual({ ...before, orders: before.orders + 1, idempotencyRecords: before.idempotencyRecords + 1 })
      expect(await recordsForKey(key)).toEqual([expect.objectContaining({ status: 'succeeded', attempts: 1, responseStatus: 201 })])
    })

    it('treats a key whose record is past expires_at as new, even for a different cart', async () => {
      const firstKey = newIdempotencyKey()
      const first = await post(firstKey, validOrderBody())
      expect(first.status).toBe(201)
      // A finished record whose time ran out, as if stored a day ago: a copy of the first one under
      // another key, past expires_at. (Backdating the first record itself would go behind the
      // instance's memory of finished records, which trusts expires_at as it was stored.)
      const key = newIdempotencyKey()
      await stack.sql`
        insert into idempotency_records (scope, key, route, fingerprint, status, attempts, request_id, response_status, response_body, response_headers, resource_type, resource_id, expires_at)
        select scope, ${key}, route, fingerprint, status, attempts, request_id, response_status, response_body, response_headers, resource_type, resource_id, now() - interval '1 second'
        from idempotency_records where key = ${firstKey}`
      const [{ fingerprint: firstFingerprint }] = await recordsForKey(key) as [IdempotencyRow]
      const before = await countRows(stack.sql)

      const body = validOrderBody()
      const fresh = await post(key, body)

      expectCreatedOrder(fresh, body, key, false)
      expect(fresh.json.id).not.toBe(first.json.id)
      expect(await countRows(stack.sql)).toEqual({ ...before, orders: before.orders + 1 })
      const [record] = await recordsForKey(key)
      expect(record).toMatchObject({ status: 'succeeded', attempts: 1, responseStatus: 201 })
      expect(record?.fingerprint).not.toBe(firstFingerprint)
      expect((await post(key, body)).json).toMatchObject({ id: fresh.json.id, idempotency: { key, replayed: true } })
    })
  })

  describe('X-Request-Id', () => {
    const clientRequestId = 'client-req-0123456789'
    const oversizedRequestId = 'r'.repeat(300)

    it('echoes a valid client id on success and on problem responses', async () => {
      const created = await post(newIdempotencyKey(), validOrderBody(), { 'x-request-id': clientRequestId })
      expect(created.status).toBe(201)
      expect(created.headers.get('x-request-id')).toBe(clientRequestId)

      const missingKey = await postDirect(undefined, validOrderBody(), { 'x-request-id': clientRequestId })
      expectProblem(missingKey, 'idempotency-key-missing')
      expect(missingKey.headers.get('x-request-id')).toBe(clientRequestId)
    })

    it('replaces an invalid (300 character) id with a generated one on success and on problem responses', async () => {
      const created = await post(newIdempotencyKey(), validOrderBody(), { 'x-request-id': oversizedRequestId })
      expect(created.status).toBe(201)
      const missingKey = await postDirect(undefined, validOrderBody(), { 'x-request-id': oversizedRequestId })
      expectProblem(missingKey, 'idempotency-key-missing')

      const generated = [created.headers.get('x-request-id'), missingKey.headers.get('x-request-id')]
      for (const id of generated) {
        expect(id).toMatch(requestIdPattern)
        expect(id).not.toBe(oversizedRequestId)
      }
      expect(generated[0]).not.toBe(generated[1])
    })
  })

  describe('request log (the evidence of every attempt)', () => {
    it('records each request with its key, outcome, status and request id', async () => {
      const key = newIdempotencyKey()
      const body = validOrderBody()
      const first = await post(key, body, { 'x-request-id': `first-${key}` })
      const replay = await post(key, body, { 'x-request-id': `replay-${key}` })
      const conflict = await post(key, validOrderBody(), { 'x-request-id': `conflict-${key}` })
      expect(first.status).toBe(201)
      // The server's own ids: the client's X-Request-Id is kept beside them, never in their place.
      const [firstId, replayId, conflictId] = [first, replay, conflict].map(response => response.headers.get('x-server-request-id'))
      for (const id of [firstId, replayId, conflictId]) expect(id).toMatch(/^req_[0-9a-f-]{36}$/)

      type LogRow = { requestId: string, clientRequestId: string, method: string, path: string, tenantId: string, scope: string, outcome: string, status: number }
      const logged = () => stack.sql<LogRow[]>`
        select request_id as "requestId", client_request_id as "clientRequestId", method, path, tenant_id as "tenantId", scope, outcome, status
        from request_log where idempotency_key = ${key} order by id`
      // Rows are written in batches after the responses went out.
      await pollUntil('three request_log rows exist', async () => (await logged()).length === 3)
      const common = { method: 'POST', path: '/api/orders', tenantId: tenant.tenantId, scope: `tenant:${tenant.tenantId}` }
      expect(await logged()).toEqual([
        { ...common, requestId: firstId, clientRequestId: `first-${key}`, outcome: 'miss', status: 201 },
        { ...common, requestId: replayId, clientRequestId: `replay-${key}`, outcome: 'replay', status: 201 },
        { ...common, requestId: conflictId, clientRequestId: `conflict-${key}`, outcome: 'conflict', status: 422 },
      ])
    })
  })

  describe('GET /api/orders/:id and tenant isolation', () => {
    let tenantB: TenantCredentials
    beforeAll(async () => {
      tenantB = await createTenant(api(), 'orders-api tenant B')
    })
    const getOrder = (secretKey: string, id: string) =>
      request(api(), `/api/orders/${id}`, { headers: { authorization: `Bearer ${secretKey}` } })

    it('returns the order to its tenant and 404 not-found to another tenant', async () => {
      const created = await post(newIdempotencyKey(), validOrderBody())
      expect(created.status).toBe(201)

      const fetched = await getOrder(tenant.secretKey, created.json.id)
      expect(fetched.status).toBe(200)
      expect(fetched.headers.get('content-type')).toMatch(/^application\/json\b/)
      // The stored creation response, plus the intent the worker attaches later (no worker runs here).
      const { idempotency: _, ...order } = created.json
      expect(fetched.json).toEqual({ ...order, paymentIntentId: null, payment: null, cancelReason: null, amountRefunded: 0, refunds: [], reservations: [] })

      expectProblem(await getOrder(tenantB.secretKey, created.json.id), 'not-found')
      expectProblem(await getOrder(tenant.secretKey, 'ord_doesnotexist'), 'not-found')
    })

    it('keeps the same key and body in two tenants as two independent orders', async () => {
      const key = newIdempotencyKey()
      const body = validOrderBody()
      const before = await countRows(stack.sql)

      const inA = await post(key, body)
      const inB = await postOrder(api(), { secretKey: tenantB.secretKey, key, body })

      expectCreatedOrder(inA, body, key, false)
      expectCreatedOrder(inB, body, key, false)
      expect(inB.json.id).not.toBe(inA.json.id)
      expect(await countRows(stack.sql)).toEqual({ ...before, orders: before.orders + 2, idempotencyRecords: before.idempotencyRecords + 2 })
      expect((await getOrder(tenantB.secretKey, inB.json.id)).json.id).toBe(inB.json.id)
      expect((await getOrder(tenantB.secretKey, inA.json.id)).status).toBe(404)
    })
  })

  describe('authentication', () => {
    // Prism answers a request without the document's Bearer scheme itself: those go direct. An unknown
    // key has the scheme, so the server's 401 for it is checked against the document.
    const badAuthorizations: Array<[string, Record<string, string>, () => string]> = [
      ['no Authorization header', {}, direct],
      ['an unknown secret key', { authorization: 'Bearer sk_unknown_0123456789abcdefghij' }, api],
      ['a malformed header (Basic x)', { authorization: 'Basic x' }, direct],
    ]

    it.each(badAuthorizations)('answers POST with %s 401 unauthorized and writes nothing', async (_, headers, baseUrl) => {
      const before = await countRows(stack.sql)
      const response = await request(baseUrl(), '/api/orders', {
        method: 'POST',
        headers: { 'idempotency-key': newIdempotencyKey(), ...headers },
        body: validOrderBody(),
      })
      expectProblem(response, 'unauthorized')
      expect(await countRows(stack.sql)).toEqual(before)
    })

    it.each(badAuthorizations)('answers GET with %s 401 unauthorized', async (_, headers, baseUrl) => {
      const created = await post(newIdempotencyKey(), validOrderBody())
      expectProblem(await request(baseUrl(), `/api/orders/${created.json.id}`, { headers }), 'unauthorized')
    })

    it('answers 401 for a revoked secret key', async () => {
      const revoked = await createTenant(api(), 'orders-api revoked')
      await stack.sql`update api_keys set revoked_at = now() where tenant_id = ${revoked.tenantId}`
      const before = await countRows(stack.sql)
      expectProblem(await postOrder(api(), { secretKey: revoked.secretKey, key: newIdempotencyKey(), body: validOrderBody() }), 'unauthorized')
      expect(await countRows(stack.sql)).toEqual(before)
    })

    it.each<[string, () => Record<string, string>, () => string]>([
      ['no Authorization header', () => ({}), direct],
      ['a wrong OPS token', () => ({ authorization: `Bearer ${testSecrets.opsToken}x` }), api],
      ['a tenant secret key', () => ({ authorization: `Bearer ${tenant.secretKey}` }), api],
    ])('answers POST /api/ops/tenants with %s 401 unauthorized and creates no tenant', async (_, headers, baseUrl) => {
      const before = await countRows(stack.sql)
      const response = await request(baseUrl(), '/api/ops/tenants', { method: 'POST', headers: headers(), body: { name: 'intruder' } })
      expectProblem(response, 'unauthorized')
      expect(await countRows(stack.sql)).toEqual(before)
    })
  })

  // Pages outside /api and routes the document does not have: Prism would answer 404 itself.
  describe('problem type pages and unknown routes', () => {
    it('serves the type URI of every problem as an HTML page naming its title', async () => {
      for (const [slug, { title }] of Object.entries(problemCatalog)) {
        const page = await request(direct(), `/problems/${slug}`)
        expect(page.status, slug).toBe(200)
        expect(page.headers.get('content-type')).toMatch(/^text\/html\b/)
        expect(page.text).toContain(title)
      }
      expect((await request(direct(), '/problems/idempotency-key-reused')).text)
        .toContain('<title>Idempotency key reused with a different request</title>')
    })

    it('answers 404 for an unknown problem slug', async () => {
      expect((await request(direct(), '/problems/no-such-problem')).status).toBe(404)
    })

    it.each([
      ['GET', '/api/no-such-route'],
      ['POST', '/api/orders/ord_x/capture'],
      ['PUT', '/api/webhooks/mockpay/extra?x=1'],
      // The router decodes %3F and routes /api/orders/a: no POST there, yet the path as sent is a served one.
      ['POST', '/api/orders/a%3Fb/cancel'],
      // Decoded and cut at the `?`, this one would be POST /api/orders: matched on the path as sent, it is none.
      ['POST', '/api/orders/%3Fx/cancel'],
      ['GET', '/api/orders/%3f'],
    ])('answers %s %s with 404 not-found problem+json and the standard reason phrase', async (method, path) => {
      const answer = await request(direct(), path, { method })
      expectProblem(answer, 'not-found')
      expect(answer.statusText).toBe('Not Found')
      expect(answer.json.detail).toBe(`No API route matches ${method} ${path.split('?')[0]}. The routes are described at GET /api/openapi.json and rendered at /docs.`)
    })

    it('creates no order for an order body sent to a path that decodes to /api/orders (an encoded ? in the id)', async () => {
      const before = await countRows(stack.sql)
      const answer = await request(direct(), '/api/orders/%3Fx/cancel', {
        method: 'POST',
        headers: { 'authorization': `Bearer ${tenant.secretKey}`, 'idempotency-key': newIdempotencyKey() },
        body: validOrderBody(),
      })
      expectProblem(answer, 'not-found')
      expect(answer.json.detail).toBe('No API route matches POST /api/orders/%3Fx/cancel. The routes are described at GET /api/openapi.json and rendered at /docs.')
      expect(await countRows(stack.sql)).toEqual(before)
    })

    it.each([
      ['DELETE', '/api/orders', 'POST, GET, HEAD'],
      ['DELETE', '/api/orders/ord_x?expand=refunds', 'GET, HEAD'],
      ['POST', '/api/health', 'GET, HEAD'],
      ['PUT', '/api/orders/ord_x/refunds', 'POST'],
    ])('answers %s %s with 405 method-not-allowed naming the methods the path takes (Allow: %s)', async (method, path, allow) => {
      const answer = await request(direct(), path, { method, headers: { authorization: 'Bearer sk_nope' } })
      expectProblem(answer, 'method-not-allowed')
      expect(answer.statusText).toBe('Method Not Allowed')
      expect(answer.headers.get('allow')).toBe(allow)
      expect(answer.json.detail).toBe(`${method} is not allowed on ${path.split('?')[0]}; it takes ${allow}.`)
    })

    it('answers HEAD as GET without the body (RFC 9110 §9.3.2): the same status and headers, no Content-Length (Node leaves it out)', async () => {
      const created = await post(newIdempotencyKey(), validOrderBody())
      const authorization = { authorization: `Bearer ${tenant.secretKey}` }
      for (const [path, headers, status] of [
        ['/api/health', {}, 200],
        [`/api/orders/${created.json.id}`, authorization, 200],
        ['/api/orders/ord_nope', authorization, 404],
        [`/api/orders/${created.json.id}`, {}, 401],
      ] as const) {
        const get = await request(direct(), path, { headers })
        const head = await request(direct(), path, { method: 'HEAD', headers })
        expect([get.status, head.status], path).toEqual([status, status])
        expect(head.text).toBe('')
        expect(head.headers.get('content-type')).toBe(get.headers.get('content-type'))
        expect([get.headers.get('content-length'), head.headers.get('content-length')]).toEqual([String(Buffer.byteLength(get.text)), null])
      }
    })

    it('answers HEAD on a path served only with POST 405 with Allow: POST', async () => {
      const answer = await request(direct(), '/api/orders/ord_x/cancel', { method: 'HEAD' })
      expect([answer.status, answer.headers.get('allow'), answer.headers.get('content-type'), answer.text])
        .toEqual([405, 'POST', 'application/problem+json', ''])
    })
  })
})
