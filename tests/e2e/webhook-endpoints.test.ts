import { randomUUID } from 'node:crypto'
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Webhook as StandardWebhook } from 'standardwebhooks'
import { Webhook as SvixWebhook } from 'svix'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { fastJobsEnv, stopAll } from '../support/app'
import { createTenant, request } from '../support/http'
import { expectProblem, newIdempotencyKey, type OrdersStack, postOrder, startOrdersStack, type TenantCredentials, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { describeWithServices } from '../support/services'

// Webhook endpoints (docs/events.md#webhook-endpoints) against the built server on Postgres and
// Redis: the API (created once per key, the secret shown once, tenants apart, bad input refused with
// nothing stored), delivery to a local receiver (signatures checked with the `standardwebhooks` and
// `svix` packages, one webhook-id across retries, 410 disabling, both secrets after a rotation, a
// receiver that never answers), and a deployment that refuses private addresses at creation and
// at delivery.

const isoTime = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
const secretPattern = /^whsec_[A-Za-z0-9+/]{32}$/
const calm = { duplicates: 0, maxDelayMs: 0 }

interface Delivery { headers: IncomingHttpHeaders, body: string }
interface Receiver { url: string, received: Delivery[], close: () => Promise<void> }

/** A local HTTP receiver answering the nth delivery (1-based) with `answer(n)`: a status, or 'hang' for none. */
async function startReceiver(answer: (n: number) => number | 'hang' = () => 200): Promise<Receiver> {
  const received: Delivery[] = []
  const server = createServer((incoming, response) => {
    const chunks: Buffer[] = []
    incoming.on('data', (chunk: Buffer) => chunks.push(chunk))
    incoming.on('end', () => {
      received.push({ headers: incoming.headers, body: Buffer.concat(chunks).toString('utf8') })
      const status = answer(received.length)
      if (status !== 'hang') response.writeHead(status).end(status < 300 ? 'thanks' : `no (${status})`)
    })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    received,
    async close() {
      server.closeAllConnections()
      await new Promise(resolve => server.close(resolve))
    },
  }
}

const signedHeaders = (delivery: Delivery) => ({
  'webhook-id': String(delivery.headers['webhook-id']),
  'webhook-timestamp': String(delivery.headers['webhook-timestamp']),
  'webhook-signature': String(delivery.headers['webhook-signature']),
})

describeWithServices('webhook endpoints, built server on Postgres and Redis', ['postgres', 'redis'], () => {
  let stack: OrdersStack
  let production: OrdersStack
  const receivers: Receiver[] = []

  beforeAll(async () => {
    const env = { ...fastJobsEnv, MOCKPAY_DUPLICATES: '0', MOCKPAY_MAX_DELAY_MS: '0' }
    ;[stack, production] = await Promise.all([
      startOrdersStack('webhook-endpoints', { ...env, WEBHOOK_ENDPOINTS_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_SCHEDULE: '1s,1s,1s', WEBHOOK_DELIVERY_TIMEOUT_MS: '500' }),
      // A deployment (DATABASE_URL set) without WEBHOOK_ENDPOINTS_ALLOW_PRIVATE: public addresses only.
      startOrdersStack('webhook-endpoints-production', env),
    ])
  })

  afterAll(async () => {
    await Promise.all(receivers.map(receiver => receiver.close()))
    await stack?.close()
    await production?.close()
    await stopAll()
  })

  const auth = (tenant: TenantCredentials) => ({ authorization: `Bearer ${tenant.secretKey}` })
  const create = (tenant: TenantCredentials, body: unknown, key = newIdempotencyKey(), on = stack) =>
    request(on.app.url, '/api/webhook-endpoints', { method: 'POST', headers: { ...auth(tenant), 'idempotency-key': key }, body })
  const call = (tenant: TenantCredentials, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    request(stack.app.url, path, { method, headers: { ...auth(tenant), ...headers }, body })
  const endpointRows = async (tenantId: string) =>
    (await stack.sql<Array<{ count: number }>>`select count(*)::int as count from webhook_endpoints where tenant_id = ${tenantId}`)[0]!.count
  const attempts = (on: OrdersStack, endpointId: string) => on.sql<Array<{ eventId: string, attempt: number, statusCode: number | null, delivered: boolean, error: string | null, responseExcerpt: string | null, orderId: string | null, jobId: string | null }>>`
    select event_id as "eventId", attempt, status_code as "statusCode", delivered, error, response_excerpt as "responseExcerpt", order_id as "orderId", job_id as "jobId"
    from webhook_attempts where endpoint_id = ${endpointId} order by id`

  async function receiver(answer?: (n: number) => number | 'hang'): Promise<Receiver> {
    const started = await startReceiver(answer)
    receivers.push(started)
    return started
  }

  /** A fresh tenant with one endpoint for every event type at `url`. */
  async function subscribedTenant(url: string, label: string) {
    const tenant = await createTenant(stack.app.url, `webhook-endpoints ${label}`)
    const created = await create(tenant, { url, events: ['*'] })
    expect(created.status, created.text).toBe(201)
    return { tenant, endpoint: created.json as { id: string, secret: string } }
  }

  async function placeOrder(tenant: TenantCredentials, on = stack): Promise<string> {
    const created = await postOrder(on.app.url, { secretKey: tenant.secretKey, key: newIdempotencyKey(), body: validOrderBody() })
    expect(created.status, created.text).toBe(201)
    return created.json.id
  }

  describe('the API', () => {
    it('creates an endpoint once per key: 201 with the secret, the same endpoint and secret on replay, one row', async () => {
      const tenant = await createTenant(stack.app.url, 'webhook-endpoints create')
      const key = newIdempotencyKey()
      const body = { url: 'https://shop.example/hooks', events: ['order.paid', 'refund.succeeded'], description: 'ERP' }
      const created = await create(tenant, body, key)
      expect(created.status, created.text).toBe(201)
      expect(created.json).toEqual({
        id: expect.stringMatching(/^we_[\w-]+$/), object: 'webhook_endpoint', url: body.url, events: body.events, description: 'ERP', status: 'enabled',
        disabledReason: null, failingSince: null, lastSuccessAt: null, lastFailureAt: null, previousSecretExpiresAt: null,
        createdAt: isoTime, updatedAt: isoTime, secret: expect.stringMatching(secretPattern), idempotency: { key, replayed: false },
      })
      const replayed = await create(tenant, body, key)
      expect(replayed.status).toBe(201)
      expect(replayed.headers.get('idempotent-replayed')).toBe('true')
      expect(replayed.json).toEqual({ ...created.json, idempotency: { key, replayed: true } })
      expect(await endpointRows(tenant.tenantId)).toBe(1)

      const { secret: _secret, idempotency: _idempotency, ...view } = created.json
      const read = await call(tenant, 'GET', `/api/webhook-endpoints/${created.json.id}`)
      expect([read.status, read.json]).toEqual([200, view])
      expect((await call(tenant, 'GET', '/api/webhook-endpoints')).json).toEqual({ object: 'list', data: [view], hasMore: false })
    })

    it('lists newest first, `limit` at a time, the next page after `startingAfter`', async () => {
      const tenant = await createTenant(stack.app.url, 'webhook-endpoints list')
      const ids: string[] = []
      for (const n of [1, 2, 3]) ids.push((await create(tenant, { url: `https://shop.example/${n}`, events: ['*'] })).json.id)
      const first = await call(tenant, 'GET', '/api/webhook-endpoints?limit=2')
      expect(first.json.data.map((endpoint: { id: string }) => endpoint.id)).toEqual([ids[2], ids[1]])
      expect(first.json.hasMore).toBe(true)
      const second = await call(tenant, 'GET', `/api/webhook-endpoints?limit=2&startingAfter=${ids[1]}`)
      expect([second.json.data.map((endpoint: { id: string }) => endpoint.id), second.json.hasMore]).toEqual([[ids[0]], false])
      const unknown = await call(tenant, 'GET', '/api/webhook-endpoints?startingAfter=we_nothing')
      expectProblem(unknown, 'validation-failed')
      expect(unknown.json.errors).toEqual([{ path: 'startingAfter', message: 'names no webhook endpoint of yours: use the id of the last endpoint of the page before' }])
    })

    it('changes, disables, enables, rotates and deletes', async () => {
      const tenant = await createTenant(stack.app.url, 'webhook-endpoints change')
      const created = (await create(tenant, { url: 'https://shop.example/a', events: ['order.paid'] })).json
      const path = `/api/webhook-endpoints/${created.id}`

      const changed = await call(tenant, 'PATCH', path, { url: 'https://shop.example/b', events: ['*'], description: 'all' })
      expect(changed.status, changed.text).toBe(200)
      expect(changed.json).toMatchObject({ id: created.id, url: 'https://shop.example/b', events: ['*'], description: 'all', status: 'enabled' })
      expect(changed.json.secret).toBeUndefined()
      expect((await call(tenant, 'PATCH', path, { status: 'disabled' })).json).toMatchObject({ status: 'disabled', disabledReason: 'requested' })
      await stack.sql`update webhook_endpoints set failing_since = now() - interval '1 day' where id = ${created.id}`
      expect((await call(tenant, 'PATCH', path, { status: 'enabled', description: null })).json).toMatchObject({ status: 'enabled', disabledReason: null, failingSince: null, description: null })

      const key = newIdempotencyKey()
      const rotated = await call(tenant, 'POST', `${path}/rotate-secret`, undefined, { 'idempotency-key': key })
      expect(rotated.status, rotated.text).toBe(200)
      expect(rotated.json.secret).toMatch(secretPattern)
      expect(rotated.json.secret).not.toBe(created.secret)
      expect(Date.parse(rotated.json.previousSecretExpiresAt) - Date.now()).toBeGreaterThan(23.9 * 3600_000)
      const again = await call(tenant, 'POST', `${path}/rotate-secret`, undefined, { 'idempotency-key': key })
      expect([again.json.secret, again.headers.get('idempotent-replayed')]).toEqual([rotated.json.secret, 'true'])
      const [row] = await stack.sql<Array<{ secret: string, previousSecret: string }>>`select secret, previous_secret as "previousSecret" from webhook_endpoints where id = ${created.id}`
      expect(row).toEqual({ secret: rotated.json.secret, previousSecret: created.secret })

      const deleted = await call(tenant, 'DELETE', path)
      expect([deleted.status, deleted.json]).toEqual([200, { id: created.id, object: 'webhook_endpoint', deleted: true }])
      expectProblem(await call(tenant, 'GET', path), 'not-found')
      expectProblem(await call(tenant, 'DELETE', path), 'not-found')
      expect(await endpointRows(tenant.tenantId)).toBe(0)
    })

    it('answers 404 for another tenant\'s endpoint, and changes nothing', async () => {
      const owner = await createTenant(stack.app.url, 'webhook-endpoints owner')
      const stranger = await createTenant(stack.app.url, 'webhook-endpoints stranger')
      const created = (await create(owner, { url: 'https://shop.example/mine', events: ['*'] })).json
      const path = `/api/webhook-endpoints/${created.id}`
      const read = await call(stranger, 'GET', path)
      expectProblem(read, 'not-found')
      expect(read.json.detail).toBe(`No webhook endpoint "${created.id}" exists for your key. List yours with GET /api/webhook-endpoints.`)
      expectProblem(await call(stranger, 'PATCH', path, { status: 'disabled' }), 'not-found')
      expectProblem(await call(stranger, 'DELETE', path), 'not-found')
      expectProblem(await call(stranger, 'POST', `${path}/rotate-secret`, undefined, { 'idempotency-key': newIdempotencyKey() }), 'not-found')
      expect((await call(stranger, 'GET', '/api/webhook-endpoints')).json).toEqual({ object: 'list', data: [], hasMore: false })
      const [row] = await stack.sql`select status, secret from webhook_endpoints where id = ${created.id}`
      expect(row).toEqual({ status: 'enabled', secret: created.secret })
    })

    it('refuses bad input with a problem that says what to do, storing nothing', async () => {
      const tenant = await createTenant(stack.app.url, 'webhook-endpoints invalid')
      const unknownType = await create(tenant, { url: 'https://shop.example/x', events: ['order.paid', 'order.shipped'] })
      expectProblem(unknownType, 'validation-failed')
      expect(unknownType.json.errors).toEqual([{
        path: 'events.1',
        message: 'must be one of "order.created", "order.paid", "order.payment_failed", "order.canceled", "refund.created", "refund.succeeded", "refund.failed", "stock.updated", "*" ("*": every type)',
      }])
      const invalid = await create(tenant, { url: 'ftp://shop.example/x', events: [], extra: 1 })
      expectProblem(invalid, 'validation-failed')
      expect(invalid.json.errors).toEqual([
        { path: 'url', message: 'must be an absolute https: URL, e.g. https://shop.example/webhooks' },
        { path: 'events', message: 'must name at least one event type, or "*" for all' },
        { path: '(body)', message: 'Unrecognized key: "extra"' },
      ])
      expectProblem(await request(stack.app.url, '/api/webhook-endpoints', { method: 'POST', headers: auth(tenant), body: { url: 'https://shop.example/x', events: ['*'] } }), 'idempotency-key-missing')
      expectProblem(await request(stack.app.url, '/api/webhook-endpoints', { method: 'POST', body: { url: 'https://shop.example/x', events: ['*'] }, headers: { 'idempotency-key': newIdempotencyKey() } }), 'unauthorized')
      const created = (await create(tenant, { url: 'https://shop.example/x', events: ['*'] })).json
      const emptyPatch = await call(tenant, 'PATCH', `/api/webhook-endpoints/${created.id}`, {})
      expectProblem(emptyPatch, 'validation-failed')
      expect(emptyPatch.json.errors).toEqual([{ path: '(body)', message: 'must change something: send at least one of url, events, description, status' }])
      expectProblem(await call(tenant, 'GET', '/api/webhook-endpoints/not-an-id'), 'not-found')
      expect(await endpointRows(tenant.tenantId)).toBe(1)
    })
  })

  describe('delivery', () => {
    it('delivers an order\'s events signed as Standard Webhooks, verified by `standardwebhooks` and by `svix`', async () => {
      const hook = await receiver()
      const { tenant, endpoint } = await subscribedTenant(hook.url, 'deliver')
      const orderId = await placeOrder(tenant)
      let intentId = ''
      await pollUntil('the order has its payment intent', async () => {
        intentId = (await call(tenant, 'GET', `/api/orders/${orderId}`)).json?.paymentIntentId ?? ''
        return intentId !== ''
      }, { timeoutMs: 20_000 })
      const paid = await request(stack.app.url, `/api/mockpay/intents/${intentId}/confirm`, { method: 'POST', body: { outcome: 'succeed', chaos: calm } })
      expect(paid.status, paid.text).toBe(200)
      await pollUntil('order.created and order.paid are delivered', async () => hook.received.length >= 2, { timeoutMs: 20_000 })

      const events = hook.received.map(delivery => JSON.parse(delivery.body))
      expect(events.map(event => event.type)).toEqual(['order.created', 'order.paid'])
      const order = (await call(tenant, 'GET', `/api/orders/${orderId}`)).json
      expect(events[1]).toEqual({ id: expect.stringMatching(/^evt_/), object: 'event', type: 'order.paid', created: expect.any(Number), sequence: expect.any(Number), data: { object: order } })
      expect(events[0].sequence).toBeLessThan(events[1].sequence)
      expect(Math.abs(events[0].created - Date.now() / 1000)).toBeLessThan(60)
      for (const [index, delivery] of hook.received.entries()) {
        expect(delivery.headers).toMatchObject({ 'content-type': 'application/json', 'user-agent': 'IdempotentCheckout-Webhooks/1', 'webhook-id': events[index].id })
        expect(String(delivery.headers['webhook-signature'])).toMatch(/^v1,[A-Za-z0-9+/]+=*$/)
        expect(new StandardWebhook(endpoint.secret).verify(delivery.body, signedHeaders(delivery))).toEqual(events[index])
        expect(new SvixWebhook(endpoint.secret).verify(delivery.body, signedHeaders(delivery))).toEqual(events[index])
        expect(() => new StandardWebhook(`whsec_${Buffer.alloc(24, 7).toString('base64')}`).verify(delivery.body, signedHeaders(delivery))).toThrow()
      }
      // The attempt is recorded once the receiver's answer is back: after the receiver saw the delivery.
      await pollUntil('both deliveries are recorded', async () => (await attempts(stack, endpoint.id)).length === 2)
      const recorded = await attempts(stack, endpoint.id)
      expect(recorded).toEqual(events.map(event => ({ eventId: event.id, attempt: 1, statusCode: 200, delivered: true, error: null, responseExcerpt: 'thanks', orderId, jobId: expect.stringMatching(/^job_/) })))
      expect((await call(tenant, 'GET', `/api/webhook-endpoints/${endpoint.id}`)).json).toMatchObject({ lastSuccessAt: isoTime, failingSince: null, lastFailureAt: null })
    })

    it('retries a receiver that answers 500 twice under the same webhook-id, and records each attempt', async () => {
      const hook = await receiver(n => n <= 2 ? 500 : 200)
      const { tenant, endpoint } = await subscribedTenant(hook.url, 'retry')
      const orderId = await placeOrder(tenant)
      await pollUntil('the third attempt', async () => hook.received.length >= 3, { timeoutMs: 20_000 })
      await pollUntil('the delivery is recorded', async () => (await attempts(stack, endpoint.id)).length === 3)
      const ids = hook.received.map(delivery => delivery.headers['webhook-id'])
      expect(new Set(ids).size).toBe(1)
      expect(hook.received.map(delivery => JSON.parse(delivery.body).type)).toEqual(['order.created', 'order.created', 'order.created'])
      for (const delivery of hook.received) expect(new StandardWebhook(endpoint.secret).verify(delivery.body, signedHeaders(delivery))).toMatchObject({ id: ids[0] })
      const recorded = await attempts(stack, endpoint.id)
      expect(recorded.map(({ attempt, statusCode, delivered, responseExcerpt, orderId: order }) => ({ attempt, statusCode, delivered, responseExcerpt, order }))).toEqual([
        { attempt: 1, statusCode: 500, delivered: false, responseExcerpt: 'no (500)', order: orderId },
        { attempt: 2, statusCode: 500, delivered: false, responseExcerpt: 'no (500)', order: orderId },
        { attempt: 3, statusCode: 200, delivered: true, responseExcerpt: 'thanks', order: orderId },
      ])
      expect(new Set(recorded.map(row => row.jobId)).size).toBe(1)
      const health = (await call(tenant, 'GET', `/api/webhook-endpoints/${endpoint.id}`)).json
      expect(health).toMatchObject({ status: 'enabled', failingSince: null, lastSuccessAt: isoTime, lastFailureAt: isoTime })
      await new Promise(resolve => setTimeout(resolve, 1500))
      expect(hook.received).toHaveLength(3)
    })

    it('disables an endpoint that answers 410 Gone, and sends it nothing more', async () => {
      const hook = await receiver(() => 410)
      const { tenant, endpoint } = await subscribedTenant(hook.url, 'gone')
      await placeOrder(tenant)
      await pollUntil('the endpoint is disabled', async () => (await call(tenant, 'GET', `/api/webhook-endpoints/${endpoint.id}`)).json.status === 'disabled', { timeoutMs: 20_000 })
      expect((await call(tenant, 'GET', `/api/webhook-endpoints/${endpoint.id}`)).json).toMatchObject({ status: 'disabled', disabledReason: 'gone', lastFailureAt: isoTime })
      expect((await attempts(stack, endpoint.id)).map(row => [row.attempt, row.statusCode, row.delivered])).toEqual([[1, 410, false]])
      await placeOrder(tenant)
      await new Promise(resolve => setTimeout(resolve, 1500))
      expect(hook.received).toHaveLength(1)
      const [jobs] = await stack.sql<Array<{ count: number }>>`select count(*)::int as count from jobs where kind = 'webhook.deliver' and resource_id = ${`webhook_endpoint:${endpoint.id}`}`
      expect(jobs!.count).toBe(1)
    })

    it('signs with both the new and the previous secret after a rotation', async () => {
      const hook = await receiver()
      const { tenant, endpoint } = await subscribedTenant(hook.url, 'rotate')
      const rotated = await call(tenant, 'POST', `/api/webhook-endpoints/${endpoint.id}/rotate-secret`, undefined, { 'idempotency-key': newIdempotencyKey() })
      expect(rotated.status, rotated.text).toBe(200)
      await placeOrder(tenant)
      await pollUntil('the delivery', async () => hook.received.length === 1, { timeoutMs: 20_000 })
      const [delivery] = hook.received
      expect(String(delivery!.headers['webhook-signature']).split(' ')).toHaveLength(2)
      for (const secret of [rotated.json.secret, endpoint.secret]) {
        expect(new StandardWebhook(secret).verify(delivery!.body, signedHeaders(delivery!))).toMatchObject({ type: 'order.created' })
        expect(new SvixWebhook(secret).verify(delivery!.body, signedHeaders(delivery!))).toMatchObject({ type: 'order.created' })
      }
    })

    it('records a receiver that never answers as a timeout, and tries again', async () => {
      const hook = await receiver(() => 'hang')
      const { tenant, endpoint } = await subscribedTenant(hook.url, 'timeout')
      await placeOrder(tenant)
      await pollUntil('two attempts recorded', async () => (await attempts(stack, endpoint.id)).length >= 2, { timeoutMs: 20_000 })
      const [first, second] = await attempts(stack, endpoint.id)
      expect(first).toMatchObject({ attempt: 1, statusCode: null, delivered: false, error: 'timeout: no complete answer within 500 ms', responseExcerpt: null })
      expect(second).toMatchObject({ attempt: 2, statusCode: null, delivered: false, eventId: first!.eventId })
      expect((await call(tenant, 'GET', `/api/webhook-endpoints/${endpoint.id}`)).json).toMatchObject({ status: 'enabled', failingSince: isoTime, lastSuccessAt: null })
      // Deleted: its queued delivery completes without another attempt.
      expect((await call(tenant, 'DELETE', `/api/webhook-endpoints/${endpoint.id}`)).status).toBe(200)
      const sent = hook.received.length
      await pollUntil('the delivery job completes', async () => {
        const [job] = await stack.sql`select status from jobs where kind = 'webhook.deliver' and resource_id = ${`webhook_endpoint:${endpoint.id}`}`
        return job?.status === 'completed'
      }, { timeoutMs: 10_000 })
      expect(hook.received.length).toBeLessThanOrEqual(sent + 1)
    })
  })

  describe('in a deployment (WEBHOOK_ENDPOINTS_ALLOW_PRIVATE unset)', () => {
    it('refuses http: and loopback URLs at creation, naming the setting', async () => {
      const tenant = production.tenant
      const http = await create(tenant, { url: 'http://127.0.0.1:8080/hooks', events: ['*'] }, newIdempotencyKey(), production)
      expectProblem(http, 'validation-failed')
      expect(http.json.detail).toBe('The url cannot receive events: it must be an https: URL (WEBHOOK_ENDPOINTS_ALLOW_PRIVATE=true allows it, for tests and a laptop). Nothing was stored: send a public https: URL.')
      expect(http.json.errors).toEqual([{ path: 'url', message: 'must be an https: URL (WEBHOOK_ENDPOINTS_ALLOW_PRIVATE=true allows it, for tests and a laptop)' }])
      const loopback = await create(tenant, { url: 'https://localhost/hooks', events: ['*'] }, newIdempotencyKey(), production)
      expectProblem(loopback, 'validation-failed')
      expect(loopback.json.errors[0].message).toMatch(/^its host "localhost" resolves to (127\.0\.0\.1|::1), a loopback address; endpoints must be reachable on the public internet \(WEBHOOK_ENDPOINTS_ALLOW_PRIVATE=true allows it, for tests and a laptop\)$/)
      const metadata = await create(tenant, { url: 'https://169.254.169.254/latest', events: ['*'] }, newIdempotencyKey(), production)
      expect(metadata.json.errors[0].message).toContain('resolves to 169.254.169.254, a link-local address')
      const [row] = await production.sql<Array<{ count: number }>>`select count(*)::int as count from webhook_endpoints`
      expect(row!.count).toBe(0)
    })

    it('refuses at delivery an endpoint whose address became private, recording the attempt and sending nothing', async () => {
      const hook = await receiver()
      const tenant = await createTenant(production.app.url, 'webhook-endpoints production delivery')
      const port = new URL(hook.url).port
      // As if DNS changed after creation: the rows point at loopback, by literal and by name.
      const ids = [`we_literal_${randomUUID().slice(0, 8)}`, `we_named_${randomUUID().slice(0, 8)}`]
      const secret = `whsec_${Buffer.alloc(24, 1).toString('base64')}`
      await production.sql`insert into webhook_endpoints (id, tenant_id, url, events, secret) values
        (${ids[0]!}, ${tenant.tenantId}, ${`http://127.0.0.1:${port}/hooks`}, ${['*']}, ${secret}),
        (${ids[1]!}, ${tenant.tenantId}, ${`https://localhost:${port}/hooks`}, ${['*']}, ${secret})`
      await placeOrder(tenant, production)
      await pollUntil('both attempts recorded', async () => (await Promise.all(ids.map(id => attempts(production, id)))).every(rows => rows.length >= 1), { timeoutMs: 20_000 })
      const [literal] = await attempts(production, ids[0]!)
      expect(literal).toMatchObject({ attempt: 1, statusCode: null, delivered: false, error: 'address refused: 127.0.0.1 resolves to 127.0.0.1, a loopback address: refused (WEBHOOK_ENDPOINTS_ALLOW_PRIVATE is off)' })
      const [named] = await attempts(production, ids[1]!)
      expect(named!.error).toMatch(/^address refused: localhost resolves to (127\.0\.0\.1|::1), a loopback address/)
      expect(hook.received).toHaveLength(0)
    })
  })
})
