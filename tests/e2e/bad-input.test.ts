import http from 'node:http'
import net from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ProblemSlug } from '../../server/problems/catalog'
import { stopAll } from '../support/app'
import { request, statusAndHeaders, type TestResponse } from '../support/http'
import { opsHeaders, opsRequest } from '../support/ops'
import {
  countRows,
  expectProblem,
  newIdempotencyKey,
  type OrderBody,
  orderRequestHeaders,
  type OrdersStack,
  postOrder,
  type PostOrderOptions,
  requestIdPattern,
  type RowCounts,
  startOrdersStack,
  validOrderBody,
} from '../support/orders'
import { describeWithServices } from '../support/services'

// docs/api.md#errors-and-headers and docs/api.md#problem-types: every bad input to POST
// /api/orders and POST /api/ops/tenants gets its exact problem response and writes nothing; a
// refused order request leaves its Idempotency-Key free.

const MAX_BODY_BYTES = 64 * 1024

type Transport = 'content-length' | 'chunked'

/** Sends exact bytes with node:http, either with an honest Content-Length or chunked (no length at all). */
function postBytes(baseUrl: string, path: string, headers: Record<string, string>, bytes: Buffer, transport: Transport): Promise<TestResponse> {
  return new Promise((resolve, reject) => {
    const framing = transport === 'chunked' ? { 'transfer-encoding': 'chunked' } : { 'content-length': String(bytes.length) }
    // Connection: close, so a socket the server answered before reading the whole body is never reused.
    const outgoing = http.request(new URL(path, baseUrl), { method: 'POST', headers: { ...headers, ...framing, connection: 'close' } }, (incoming) => {
      let text = ''
      incoming.setEncoding('utf8').on('data', (chunk: string) => { text += chunk })
      incoming.once('end', () => {
        const response = statusAndHeaders(incoming)
        const isJson = /[/+]json\b/.test(response.headers.get('content-type') ?? '')
        resolve({ ...response, text, json: isJson && text ? JSON.parse(text) : undefined })
      })
    })
    outgoing.once('error', reject)
    for (let offset = 0; offset < bytes.length; offset += 8 * 1024) outgoing.write(bytes.subarray(offset, offset + 8 * 1024))
    outgoing.end()
  })
}

/** A problem+json answer written by the server's clientError listener, read off the raw socket. */
function expectRawProblem(response: { status: number, raw: string }, status: number, slug: string): void {
  expect(response.status, response.raw).toBe(status)
  const [head = '', body = ''] = response.raw.split('\r\n\r\n')
  expect(head).toMatch(/\r\nContent-Type: application\/problem\+json\r\n/)
  expect(head).toMatch(/\r\nX-Request-Id: req_[\w-]+\r\n/)
  expect(JSON.parse(body)).toMatchObject({ type: `/problems/${slug}`, status })
}

/**
 * Writes a request byte for byte on a raw socket, for header bytes that fetch and node:http refuse
 * to send (control characters). Returns the status code and the whole raw response.
 */
function sendRawRequest(port: number, head: string[], body: string): Promise<{ status: number, raw: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port })
    let raw = ''
    socket.setTimeout(10_000, () => socket.destroy(new Error('raw request timed out')))
    socket.setEncoding('latin1').on('data', (chunk: string) => { raw += chunk })
    socket.once('error', reject)
    socket.once('close', () => {
      const status = /^HTTP\/1\.1 (\d{3}) /.exec(raw)
      if (status) resolve({ status: Number(status[1]), raw })
      else reject(new Error(`no HTTP response on the raw socket: ${JSON.stringify(raw)}`))
    })
    const bodyBytes = Buffer.from(body, 'utf8')
    const lines = [...head, `Content-Length: ${bodyBytes.length}`, 'Connection: close', '', '']
    socket.write(Buffer.concat([Buffer.from(lines.join('\r\n'), 'latin1'), bodyBytes]))
  })
}

/** `errors` is [{path, message}] with a message for each entry, naming exactly these paths. */
function expectFieldErrors(response: TestResponse, paths: string[]): void {
  const errors = response.json.errors as Array<{ path: unknown, message: unknown }>
  expect(errors).toBeInstanceOf(Array)
  expect(errors).toEqual(errors.map(() => ({ path: expect.any(String), message: expect.stringMatching(/\S/) })))
  expect([...new Set(errors.map(error => error.path))].sort()).toEqual([...paths].sort())
}

/** JSON of `value` with an unknown `padding` field that makes it exactly `size` bytes long. */
function paddedJson(value: Record<string, unknown>, size: number): Buffer {
  const unpadded = Buffer.byteLength(JSON.stringify({ ...value, padding: '' }))
  const bytes = Buffer.from(JSON.stringify({ ...value, padding: 'x'.repeat(size - unpadded) }))
  expect(bytes.length).toBe(size)
  return bytes
}

describeWithServices('bad input', ['postgres', 'redis'], () => {
  let stack: OrdersStack

  beforeAll(async () => {
    stack = await startOrdersStack('bad-input')
  })

  afterAll(async () => {
    await stack?.close()
    await stopAll()
  })

  /** POST /api/orders as the stack's tenant. */
  const post = (options: Omit<PostOrderOptions, 'secretKey'>) => postOrder(stack.app.url, { secretKey: stack.tenant.secretKey, ...options })

  /** A valid order written byte for byte, with header values that fetch would refuse to send. */
  function sendRawOrder(headers: { idempotencyKey?: string, requestId?: string }) {
    return sendRawRequest(stack.app.port, [
      'POST /api/orders HTTP/1.1',
      'Host: 127.0.0.1',
      `Authorization: Bearer ${stack.tenant.secretKey}`,
      `Idempotency-Key: ${headers.idempotencyKey ?? newIdempotencyKey()}`,
      ...(headers.requestId === undefined ? [] : [`X-Request-Id: ${headers.requestId}`]),
      'Content-Type: application/json',
    ], JSON.stringify(validOrderBody()))
  }

  /** The key a refused request used still starts a fresh order: nothing was stored under it. */
  async function expectKeyStillFree(key: string): Promise<void> {
    const body = validOrderBody()
    const response = await post({ key, body })
    expect(response.status, response.text).toBe(201)
    expect(response.json.idempotency).toEqual({ key, replayed: false })
    expect(response.json.cartId).toBe(body.cartId)
  }

  interface RouteUnderTest {
    name: string
    path: string
    /** Headers of an otherwise valid JSON request; `key` is its Idempotency-Key where the route takes one. */
    headers: (key: string) => Record<string, string>
    validBody: () => Record<string, unknown>
    /** Row counts after one successful request. */
    afterSuccess: (before: RowCounts) => RowCounts
    takesIdempotencyKey: boolean
  }

  const routes: RouteUnderTest[] = [
    {
      name: 'POST /api/orders',
      path: '/api/orders',
      headers: key => orderRequestHeaders({ secretKey: stack.tenant.secretKey, key }),
      validBody: () => ({ ...validOrderBody() }),
      afterSuccess: before => ({ ...before, orders: before.orders + 1, idempotencyRecords: before.idempotencyRecords + 1 }),
      takesIdempotencyKey: true,
    },
    {
      name: 'POST /api/ops/tenants',
      path: '/api/ops/tenants',
      headers: () => ({ ...opsHeaders, 'content-type': 'application/json' }),
      validBody: () => ({ name: 'acme' }),
      afterSuccess: before => ({ ...before, tenants: before.tenants + 1, apiKeys: before.apiKeys + 1 }),
      takesIdempotencyKey: false,
    },
  ]
  const ordersRoute = routes[0]!

  describe.each(routes)('$name', (route) => {
    /** Sends a refused request, then checks its problem type, that nothing was written, and that the key is free. */
    async function expectRefused(slug: ProblemSlug, send: (key: string) => Promise<TestResponse>): Promise<TestResponse> {
      const key = newIdempotencyKey()
      const before = await countRows(stack.sql)
      const response = await send(key)
      expectProblem(response, slug)
      expect(await countRows(stack.sql)).toEqual(before)
      if (route.takesIdempotencyKey) await expectKeyStillFree(key)
      return response
    }

    const sendText = (key: string, text: string | Uint8Array, headers: Record<string, string> = {}) =>
      request(stack.app.url, route.path, { method: 'POST', headers: { ...route.headers(key), ...headers }, body: text })

    it.each<Transport>(['content-length', 'chunked'])('accepts a body of exactly 64 KiB sent with %s', async (transport) => {
      const before = await countRows(stack.sql)
      const response = await postBytes(stack.app.url, route.path, route.headers(newIdempotencyKey()), paddedJson(route.validBody(), MAX_BODY_BYTES), transport)
      expect(response.status, response.text).toBe(201)
      expect(await countRows(stack.sql)).toEqual(route.afterSuccess(before))
    })

    it.each<[Transport, number]>([
      ['content-length', MAX_BODY_BYTES + 1],
      ['content-length', 100 * 1024],
      ['chunked', MAX_BODY_BYTES + 1],
      ['chunked', 100 * 1024],
    ])('answers 413 payload-too-large to a body sent with %s of %i bytes', async (transport, size) => {
      await expectRefused('payload-too-large', key =>
        postBytes(stack.app.url, route.path, route.headers(key), paddedJson(route.validBody(), size), transport))
    })

    it.each([
      ['text/plain', { 'content-type': 'text/plain' }],
      ['application/x-www-form-urlencoded', { 'content-type': 'application/x-www-form-urlencoded' }],
      ['multipart/form-data', { 'content-type': 'multipart/form-data; boundary=x' }],
    ])('answers 415 unsupported-media-type to a JSON body labelled %s', async (_, contentType) => {
      await expectRefused('unsupported-media-type', key => sendText(key, JSON.stringify(route.validBody()), contentType))
    })

    it('answers 415 unsupported-media-type to a body without Content-Type', async () => {
      await expectRefused('unsupported-media-type', (key) => {
        const { 'content-type': _, ...withoutContentType } = route.headers(key)
        // Bytes, not a string: fetch labels a string body text/plain on its own.
        return request(stack.app.url, route.path, { method: 'POST', headers: withoutContentType, body: Buffer.from(JSON.stringify(route.validBody())) })
      })
    })

    it.each([
      ['a truncated object', '{"cartId":'],
      ['an empty body', ''],
      ['trailing garbage', '{"name":"acme"}}'],
      ['single quotes', '{\'name\':\'acme\'}'],
    ])('answers 400 malformed-json to %s', async (_, text) => {
      await expectRefused('malformed-json', key => sendText(key, text))
    })

    it('answers 400 malformed-json to a valid body with an invalid UTF-8 byte in a field the schema would strip', async () => {
      const [head, tail] = JSON.stringify({ ...route.validBody(), note: 'n\u0000' }).split('\\u0000') as [string, string]
      await expectRefused('malformed-json', key => sendText(key, Buffer.concat([Buffer.from(head), Buffer.from([0xBF]), Buffer.from(tail)])))
    })

    it.each([
      ['an array', '[]'],
      ['a string', '"order"'],
      ['null', 'null'],
      ['a number', '42'],
    ])('answers 400 validation-failed to a JSON body that is %s', async (_, text) => {
      expectFieldErrors(await expectRefused('validation-failed', key => sendText(key, text)), ['(body)'])
    })
  })

  describe('POST /api/orders fields', () => {
    const maxSafe = Number.MAX_SAFE_INTEGER

    // Expected: the distinct paths named in `errors`, exactly. The amount = Σ quantity × unitPrice check
    // only runs over valid numbers, so a bad item value names the item alone.
    const fieldCases: Array<[string, (body: OrderBody) => unknown, string[]]> = [
      ['amount as a string', body => ({ ...body, amount: '150000' }), ['amount']],
      ['quantity 1.5', body => ({ ...body, items: [{ ...body.items[0]!, quantity: 1.5 }] }), ['items.0.quantity']],
      ['items as an object', body => ({ ...body, items: body.items[0] }), ['items']],
      ['no items', body => ({ ...body, items: [], amount: 0 }), ['items']],
      ['101 items', body => ({ ...body, amount: 101, items: Array.from({ length: 101 }, (_, i) => ({ sku: `SKU-${i}`, quantity: 1, unitPrice: 1 })) }), ['items']],
      ['amount 1e308', body => ({ ...body, amount: 1e308 }), ['amount']],
      ['amount 2^53', body => ({ ...body, amount: 2 ** 53 }), ['amount']],
      ['amount -1', body => ({ ...body, amount: -1 }), ['amount']],
      ['unitPrice 2^53', body => ({ ...body, items: [{ ...body.items[0]!, unitPrice: 2 ** 53 }] }), ['items.0.unitPrice']],
      ['quantity 1e308', body => ({ ...body, items: [{ ...body.items[0]!, quantity: 1e308 }] }), ['items.0.quantity']],
      // Each factor is safe but the product is not: the sum must be exact, not rounded.
      ['a line total past 2^53', body => ({ ...body, amount: maxSafe, items: [{ sku: 'SKU-1', quantity: 10_000, unitPrice: maxSafe }] }), ['amount']],
      ['amount not the sum of the items', body => ({ ...body, amount: body.amount - 1 }), ['amount']],
      ['currency "idr"', body => ({ ...body, currency: 'idr' }), ['currency']],
      ['currency "RUPIAH"', body => ({ ...body, currency: 'RUPIAH' }), ['currency']],
      ['paymentMethod "cash"', body => ({ ...body, paymentMethod: 'cash' }), ['paymentMethod']],
      ['an invalid customer email', body => ({ ...body, customer: { email: 'not-an-email' } }), ['customer.email']],
      ['no cartId', ({ cartId: _, ...body }) => body, ['cartId']],
      ['a cartId with a space', body => ({ ...body, cartId: 'crt 1' }), ['cartId']],
    ]

    it.each(fieldCases)('answers 400 validation-failed to %s, naming the field', async (_, mutate, paths) => {
      const key = newIdempotencyKey()
      const before = await countRows(stack.sql)
      const response = await post({ key, body: mutate(validOrderBody()) })
      expectProblem(response, 'validation-failed')
      expectFieldErrors(response, paths)
      expect(await countRows(stack.sql)).toEqual(before)
      await expectKeyStillFree(key)
    })

    it('answers 400 validation-failed to an amount too large for a double (1e400 parses as Infinity)', async () => {
      const key = newIdempotencyKey()
      const before = await countRows(stack.sql)
      const text = JSON.stringify(validOrderBody()).replace('"amount":150000', '"amount":1e400')
      const response = await post({ key, body: text })
      expectProblem(response, 'validation-failed')
      expectFieldErrors(response, ['amount'])
      expect(await countRows(stack.sql)).toEqual(before)
      await expectKeyStillFree(key)
    })

    it('stores the order without unknown fields', async () => {
      const body = validOrderBody()
      const response = await post({ key: newIdempotencyKey(), body: { ...body, admin: true, status: 'paid' } })
      expect(response.status).toBe(201)
      expect(response.json).not.toHaveProperty('admin')
      expect(response.json.status).toBe('pending_payment')
      const [order] = await stack.sql`select status from orders where id = ${response.json.id}`
      expect(order?.status).toBe('pending_payment')
    })
  })

  describe('POST /api/ops/tenants fields', () => {
    it.each<[string, unknown]>([
      ['no name', {}],
      ['an empty name', { name: '' }],
      ['a blank name', { name: '   ' }],
      ['a numeric name', { name: 42 }],
      ['a null name', { name: null }],
      ['a name of 101 characters', { name: 'n'.repeat(101) }],
    ])('answers 400 validation-failed to %s and creates no tenant', async (_, body) => {
      const before = await countRows(stack.sql)
      const response = await opsRequest(stack.app.url, '/api/ops/tenants', { method: 'POST', body })
      expectProblem(response, 'validation-failed')
      expectFieldErrors(response, ['name'])
      expect(await countRows(stack.sql)).toEqual(before)
    })
  })

  describe('Idempotency-Key header', () => {
    const postWithKey = (key: string) => post({ key, body: validOrderBody() })

    it('accepts a key of exactly 255 visible ASCII characters', async () => {
      const key = `${newIdempotencyKey()}${'!~'.repeat(120)}`.slice(0, 255)
      expect(key).toHaveLength(255)
      const response = await postWithKey(key)
      expect(response.status, response.text).toBe(201)
      expect(response.json.idempotency).toEqual({ key, replayed: false })
    })

    it.each([
      ['256 characters', 'k'.repeat(256)],
      ['10 000 characters', 'k'.repeat(10_000)],
      ['a space inside', 'order key'],
      ['a tab inside', 'order\tkey'],
    ])('answers 400 idempotency-key-invalid to a key with %s and writes nothing', async (_, key) => {
      const before = await countRows(stack.sql)
      expectProblem(await postWithKey(key), 'idempotency-key-invalid')
      expect(await countRows(stack.sql)).toEqual(before)
    })

    it('answers 400 idempotency-key-missing to an empty key and writes nothing', async () => {
      const before = await countRows(stack.sql)
      expectProblem(await postWithKey(''), 'idempotency-key-missing')
      expect(await countRows(stack.sql)).toEqual(before)
    })

    it('answers 400 idempotency-key-invalid to a non-ASCII key (Latin-1 byte 0xE9) and writes nothing', async () => {
      const before = await countRows(stack.sql)
      const response = await postBytes(stack.app.url, '/api/orders', ordersRoute.headers('ord\u00E9r-key'), Buffer.from(JSON.stringify(validOrderBody())), 'content-length')
      expectProblem(response, 'idempotency-key-invalid')
      expect(await countRows(stack.sql)).toEqual(before)
    })

    // Node's HTTP parser refuses control characters in any header value before the app runs; the
    // server's clientError listener still answers with a problem body.
    it.each([
      ['0x01', 'order\u0001key'],
      ['0x7F (DEL)', 'order\u007Fkey'],
    ])('refuses a key containing %s with 400 and writes nothing', async (_, key) => {
      const before = await countRows(stack.sql)
      const response = await sendRawOrder({ idempotencyKey: key })
      expectRawProblem(response, 400, 'malformed-request')
      expect(await countRows(stack.sql)).toEqual(before)
    })
  })

  describe('X-Request-Id header', () => {
    it.each([
      ['300 characters', 'r'.repeat(300)],
      ['129 characters', 'r'.repeat(129)],
      ['a space inside', 'request id'],
      ['non-ASCII characters', 'requ\u00EAte'],
    ])('replaces an id with %s by a generated one and still serves the request', async (_, requestId) => {
      const key = newIdempotencyKey()
      const before = await countRows(stack.sql)
      const response = await postBytes(stack.app.url, '/api/orders', { ...ordersRoute.headers(key), 'x-request-id': requestId }, Buffer.from(JSON.stringify(validOrderBody())), 'content-length')
      expect(response.status, response.text).toBe(201)
      expect(response.headers.get('x-request-id')).toMatch(requestIdPattern)
      expect(response.headers.get('x-request-id')).not.toBe(requestId)
      expect(await countRows(stack.sql)).toEqual(ordersRoute.afterSuccess(before))
    })

    it('echoes an id of exactly 128 visible ASCII characters', async () => {
      const requestId = 'r'.repeat(128)
      const response = await post({ key: newIdempotencyKey(), body: validOrderBody(), headers: { 'x-request-id': requestId } })
      expect(response.status).toBe(201)
      expect(response.headers.get('x-request-id')).toBe(requestId)
    })

    it('answers 431 headers-too-large to headers over the parser limit and writes nothing', async () => {
      const before = await countRows(stack.sql)
      const response = await sendRawOrder({ requestId: 'r'.repeat(20_000) })
      expectRawProblem(response, 431, 'headers-too-large')
      expect(await countRows(stack.sql)).toEqual(before)
    })

    it('refuses an id containing a control character with 400 (HTTP parser) and writes nothing', async () => {
      const before = await countRows(stack.sql)
      const response = await sendRawOrder({ requestId: 'request\u0001id' })
      expectRawProblem(response, 400, 'malformed-request')
      expect(await countRows(stack.sql)).toEqual(before)
    })
  })
})
