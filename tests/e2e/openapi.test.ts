import { randomUUID } from 'node:crypto'
import Ajv2020 from 'ajv/dist/2020'
import { afterAll, beforeAll, expect, it } from 'vitest'
import type { oas31 } from 'zod-openapi'
import { buildOpenApiDocument } from '../../server/openapi/document'
import { type AppProcess, fastJobsEnv, startApp, stopAll, testSecrets } from '../support/app'
import { createTenant, request, type RequestOptions, type TestResponse } from '../support/http'
import { newIdempotencyKey, type TenantCredentials, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { createTestDatabase, describeWithServices } from '../support/services'
import { deliver, midtransDelivery, newWebhookId, standardBody, standardDelivery, stripeBody, stripeDelivery } from '../support/webhooks'

// The OpenAPI document against the built server: what GET /api/openapi.json serves is the
// generated document, and one real exchange per documented operation (a success where one is easy
// to reach, else the problem the document promises) answers a documented status, content type,
// headers and a body valid under the documented schema. A few problems are checked the same way.

const document = buildOpenApiDocument()
const opsHeaders = { authorization: `Bearer ${testSecrets.opsToken}` }

// The whole document is one schema resource, so every `$ref` inside it resolves; formats zod emits are checked.
const ajv = new Ajv2020({ strict: false, allErrors: true, formats: {
  'date-time': value => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/.test(value) && !Number.isNaN(Date.parse(value)),
  'email': value => /^[^\s@]+@[^\s@]+$/.test(value),
} })
ajv.addSchema(document as object, 'openapi.json')
const pointer = (...segments: string[]) => segments.map(segment => segment.replaceAll('~', '~0').replaceAll('/', '~1')).join('/')

type Method = 'get' | 'put' | 'post' | 'patch' | 'delete'
const resolved = <T>(value: T | oas31.ReferenceObject): T => {
  if (!value || typeof value !== 'object' || !('$ref' in value)) return value as T
  return value.$ref.slice(2).split('/').reduce<any>((node, key) => node[key.replaceAll('~1', '/').replaceAll('~0', '~')], document) as T
}

/** Every documented operation this suite exchanged with, to check that none was left out. */
const exercised = new Set<string>()

/**
 * Checks one answer against the document: its status is one of the operation's responses, its
 * content type one of that response's, its body valid under the schema, its documented headers
 * (when sent) valid under theirs.
 */
function expectDocumented(method: Method, path: string, response: TestResponse): void {
  const operation = document.paths?.[path]?.[method]
  expect(operation, `${method.toUpperCase()} ${path} is documented`).toBeDefined()
  exercised.add(`${method} ${path}`)
  const what = `${method.toUpperCase()} ${path} → ${response.status}`
  const documented = operation!.responses?.[String(response.status)]
  expect(documented, `${what} is a documented status (${Object.keys(operation!.responses ?? {}).join(', ')}):\n${response.text}`).toBeDefined()
  const answer = resolved<oas31.ResponseObject>(documented!)
  const responsePointer = '$ref' in documented! ? documented.$ref.slice(1) : `/${pointer('paths', path, method, 'responses', String(response.status))}`

  const contentType = (response.headers.get('content-type') ?? '').split(';')[0]!.trim()
  if (!answer.content) {
    expect(response.text, `${what} has no body`).toBe('')
  }
  else {
    expect(Object.keys(answer.content).map(type => type.split(';')[0]), `${what}: content type`).toContain(contentType)
    const body = contentType.endsWith('json') ? JSON.parse(response.text) : response.text
    const validate = ajv.getSchema(`openapi.json#${responsePointer}/content/${pointer(contentType)}/schema`)!
    expect(validate(body), `${what}: ${ajv.errorsText(validate.errors)}\n${response.text}`).toBe(true)
  }
  for (const [name, header] of Object.entries(answer.headers ?? {})) {
    const value = response.headers.get(name)
    const { required, schema } = resolved<oas31.HeaderObject>(header)
    if (required) expect(value, `${what}: header ${name}`).not.toBeNull()
    if (value !== null && schema) expect(ajv.validate(schema, value), `${what}: header ${name}: ${value}`).toBe(true)
  }
}

describeWithServices('OpenAPI document against the built server', ['postgres'], () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>> | undefined
  let app: AppProcess
  let tenant: TenantCredentials
  const tenantHeaders = () => ({ authorization: `Bearer ${tenant.secretKey}` })

  /** One request, checked against the operation the document lists for `path` (its template). */
  async function exchange(method: Method, path: string, url: string, options: RequestOptions = {}): Promise<TestResponse> {
    const response = await request(app.url, url, { ...options, method: method.toUpperCase() })
    expectDocumented(method, path, response)
    return response
  }

  async function placeOrder(): Promise<{ orderId: string, intentId: string }> {
    const created = await exchange('post', '/api/orders', '/api/orders', { headers: { ...tenantHeaders(), 'idempotency-key': newIdempotencyKey() }, body: validOrderBody() })
    expect(created.status, created.text).toBe(201)
    const orderId: string = created.json.id
    let intentId = ''
    await pollUntil(`order ${orderId} has its mockpay intent`, async () => {
      const read = await request(app.url, `/api/orders/${orderId}`, { headers: tenantHeaders() })
      intentId = read.json?.paymentIntentId ?? ''
      return intentId !== ''
    }, { timeoutMs: 20_000 })
    return { orderId, intentId }
  }

  beforeAll(async () => {
    database = await createTestDatabase('openapi')
    app = await startApp({ databaseUrl: database.url, label: 'openapi', env: { ...fastJobsEnv, CHECKOUT_DEMO_ENABLED: 'true' } })
    tenant = await createTenant(app.url, 'openapi')
  })

  afterAll(async () => {
    await stopAll()
    await database?.drop()
  })

  it('serves the generated document, OpenAPI 3.1.0', async () => {
    const served = await exchange('get', '/api/openapi.json', '/api/openapi.json')
    expect(served.status).toBe(200)
    expect(served.json.openapi).toBe('3.1.0')
    expect(served.json).toEqual(JSON.parse(JSON.stringify(document)))
  })

  it('orders, refunds, cancels, mockpay and the ops order routes answer as documented', async () => {
    const paid = await placeOrder()
    const orderPath = `/api/orders/${paid.orderId}`
    expect((await exchange('get', '/api/orders/{id}', orderPath, { headers: tenantHeaders() })).status).toBe(200)
    expect((await exchange('get', '/api/mockpay/intents/{id}', `/api/mockpay/intents/${paid.intentId}`)).status).toBe(200)
    const confirmed = await exchange('post', '/api/mockpay/intents/{id}/confirm', `/api/mockpay/intents/${paid.intentId}/confirm`, { body: { outcome: 'succeed', chaos: { duplicates: 0, maxDelayMs: 0, reorder: false } } })
    expect(confirmed.status, confirmed.text).toBe(200)
    await pollUntil(`order ${paid.orderId} is paid`, async () => (await request(app.url, orderPath, { headers: tenantHeaders() })).json?.status === 'paid', { timeoutMs: 20_000 })

    const refundKey = newIdempotencyKey()
    const refund = { headers: { ...tenantHeaders(), 'idempotency-key': refundKey }, body: { amount: 1000, reason: 'requested_by_customer' } }
    const refunded = await exchange('post', '/api/orders/{id}/refunds', `${orderPath}/refunds`, refund)
    expect(refunded.status, refunded.text).toBe(201)
    const replayed = await exchange('post', '/api/orders/{id}/refunds', `${orderPath}/refunds`, { ...refund, headers: { ...refund.headers, prefer: 'wait=5' } })
    expect([replayed.status, replayed.headers.get('idempotent-replayed'), replayed.headers.get('preference-applied')]).toEqual([201, 'true', 'wait=5'])
    expect((await exchange('get', '/api/orders/{id}/refunds/{refundId}', `${orderPath}/refunds/${refunded.json.id}`, { headers: tenantHeaders() })).status).toBe(200)
    const tooMuch = await exchange('post', '/api/orders/{id}/refunds', `${orderPath}/refunds`, { headers: { ...tenantHeaders(), 'idempotency-key': newIdempotencyKey() }, body: { amount: 10_000_000 } })
    expect(tooMuch.json.type).toBe('/problems/refund-exceeds-remaining')
    const untrackedRestock = await exchange('post', '/api/orders/{id}/refunds', `${orderPath}/refunds`, { headers: { ...tenantHeaders(), 'idempotency-key': newIdempotencyKey() }, body: { amount: 1000, restock: true, items: [{ sku: 'SKU-1', quantity: 1 }] } })
    expect(untrackedRestock.json.type).toBe('/problems/restock-exceeds-committed')

    const dashboardRefund = await exchange('post', '/api/mockpay/intents/{id}/refund', `/api/mockpay/intents/${paid.intentId}/refund`, { body: { amount: 1000, chaos: { duplicates: 0, maxDelayMs: 0 } } })
    expect(dashboardRefund.status, dashboardRefund.text).toBe(200)
    expect((await exchange('get', '/api/ops/orders/{id}', `/api/ops/orders/${paid.orderId}`, { headers: opsHeaders })).status).toBe(200)
    const opsRefund = await exchange('post', '/api/ops/orders/{id}/refunds', `/api/ops/orders/${paid.orderId}/refunds`, { headers: { ...opsHeaders, 'idempotency-key': newIdempotencyKey() }, body: { amount: 1000 } })
    expect(opsRefund.status, opsRefund.text).toBe(201)

    const unpaid = await placeOrder()
    const cancel = { headers: { ...tenantHeaders(), 'idempotency-key': `"${randomUUID()}"` } }
    expect((await exchange('post', '/api/orders/{id}/cancel', `/api/orders/${unpaid.orderId}/cancel`, cancel)).json.status).toBe('canceled')
    const notRefundable = await exchange('post', '/api/orders/{id}/refunds', `/api/orders/${unpaid.orderId}/refunds`, { headers: { ...tenantHeaders(), 'idempotency-key': newIdempotencyKey() } })
    expect(notRefundable.json.type).toBe('/problems/order-not-refundable')
    const notCancelable = await exchange('post', '/api/orders/{id}/cancel', `${orderPath}/cancel`, { headers: { ...tenantHeaders(), 'idempotency-key': newIdempotencyKey() } })
    expect(notCancelable.json.type).toBe('/problems/order-not-cancelable')
  })

  it('the events and orders lists answer as documented', async () => {
    const events = await exchange('get', '/api/events', '/api/events?limit=2', { headers: tenantHeaders() })
    expect([events.status, events.json.object]).toEqual([200, 'list'])
    expect((await exchange('get', '/api/events', '/api/events?type=order.shipped', { headers: tenantHeaders() })).status).toBe(400)
    const orders = await exchange('get', '/api/orders', '/api/orders?limit=2&status=paid', { headers: tenantHeaders() })
    expect([orders.status, orders.json.object]).toEqual([200, 'list'])
    expect((await exchange('get', '/api/orders', '/api/orders?limit=0')).status).toBe(401)
  })

  it('the inventory routes, and an order short of stock, answer as documented', async () => {
    const stockPath = '/api/inventory/OAS-1'
    expect((await exchange('put', '/api/inventory/{sku}', stockPath, { headers: tenantHeaders(), body: { onHand: 3 } })).status).toBe(200)
    expect((await exchange('get', '/api/inventory/{sku}', stockPath, { headers: tenantHeaders() })).status).toBe(200)
    expect((await exchange('get', '/api/inventory', '/api/inventory?limit=1', { headers: tenantHeaders() })).json.object).toBe('list')
    expect((await exchange('get', '/api/inventory/{sku}', '/api/inventory/OAS-NONE', { headers: tenantHeaders() })).status).toBe(404)
    const adjustment = { headers: { ...tenantHeaders(), 'idempotency-key': newIdempotencyKey() }, body: { delta: 2, reason: 'received' } }
    expect((await exchange('post', '/api/inventory/{sku}/adjustments', `${stockPath}/adjustments`, adjustment)).status).toBe(201)
    expect((await exchange('post', '/api/inventory/{sku}/adjustments', `${stockPath}/adjustments`, adjustment)).headers.get('idempotent-replayed')).toBe('true')

    const items = [{ sku: 'OAS-1', quantity: 4, unitPrice: 1000 }]
    const order = { headers: { ...tenantHeaders(), 'idempotency-key': newIdempotencyKey() }, body: validOrderBody({ items, amount: 4000 }) }
    expect((await exchange('post', '/api/orders', '/api/orders', order)).status).toBe(201)
    const short = await exchange('post', '/api/orders', '/api/orders', { ...order, headers: { ...order.headers, 'idempotency-key': newIdempotencyKey() }, body: validOrderBody({ items, amount: 4000 }) })
    expect(short.json.type).toBe('/problems/insufficient-stock')
    const below = await exchange('post', '/api/inventory/{sku}/adjustments', `${stockPath}/adjustments`, { headers: { ...tenantHeaders(), 'idempotency-key': newIdempotencyKey() }, body: { delta: -2, reason: 'damaged' } })
    expect(below.json.type).toBe('/problems/stock-below-reserved')
    expect((await exchange('put', '/api/inventory/{sku}', stockPath, { headers: tenantHeaders(), body: { onHand: 1 } })).json.type).toBe('/problems/stock-below-reserved')
    expect((await exchange('put', '/api/inventory/{sku}', stockPath, { headers: tenantHeaders(), body: { onHand: -1 } })).json.type).toBe('/problems/validation-failed')
  })

  it('the webhook endpoint routes answer as documented', async () => {
    const keyed = () => ({ ...tenantHeaders(), 'idempotency-key': newIdempotencyKey() })
    // A literal public address: a deployment accepts it without a DNS lookup. Disabled at once, so nothing is sent to it.
    const created = await exchange('post', '/api/webhook-endpoints', '/api/webhook-endpoints', { headers: keyed(), body: { url: 'https://8.8.8.8/hooks', events: ['order.paid'] } })
    expect(created.status, created.text).toBe(201)
    const path = `/api/webhook-endpoints/${created.json.id}`
    expect((await exchange('patch', '/api/webhook-endpoints/{id}', path, { headers: tenantHeaders(), body: { status: 'disabled' } })).json.disabledReason).toBe('requested')
    expect((await exchange('get', '/api/webhook-endpoints/{id}', path, { headers: tenantHeaders() })).status).toBe(200)
    expect((await exchange('get', '/api/webhook-endpoints', '/api/webhook-endpoints?limit=1', { headers: tenantHeaders() })).json.object).toBe('list')
    expect((await exchange('post', '/api/webhook-endpoints/{id}/rotate-secret', `${path}/rotate-secret`, { headers: keyed() })).status).toBe(200)
    expect((await exchange('post', '/api/webhook-endpoints', '/api/webhook-endpoints', { headers: keyed(), body: { url: 'https://127.0.0.1/hooks', events: ['*'] } })).json.type).toBe('/problems/validation-failed')
    expect((await exchange('patch', '/api/webhook-endpoints/{id}', path, { headers: tenantHeaders(), body: { events: ['order.shipped'] } })).json.type).toBe('/problems/validation-failed')
    expect((await exchange('delete', '/api/webhook-endpoints/{id}', path, { headers: tenantHeaders() })).json.deleted).toBe(true)
    expect((await exchange('delete', '/api/webhook-endpoints/{id}', path, { headers: tenantHeaders() })).status).toBe(404)
  })

  it('every webhook provider\'s endpoint answers as documented', async () => {
    const { orderId } = await placeOrder()
    const event = standardBody('payment.failed', { orderId, paymentId: 'pi_openapi', amount: 150_000, currency: 'IDR' }, new Date().toISOString())
    const standard = standardDelivery(newWebhookId(), event)
    const mockpay = { ...standardDelivery(newWebhookId(), event, { secret: testSecrets.mockpayWebhookSecret }), path: '/api/webhooks/mockpay' }
    const stripe = stripeDelivery(stripeBody(`evt_${randomUUID()}`, 'payment_intent.payment_failed', orderId, 150_000, 'idr'))
    const midtrans = midtransDelivery({ orderId, transactionId: randomUUID(), transactionStatus: 'expire', grossAmount: '150000.00' })
    for (const delivery of [standard, mockpay, stripe]) {
      const response = await deliver(app.url, delivery)
      expectDocumented('post', delivery.path, response)
      expect(response.status, `${delivery.path}: ${response.text}`).toBe(200)
    }
    // Midtrans notifications are taken only where Midtrans is the payment provider: 404 here, as documented.
    const midtransOff = await deliver(app.url, midtrans)
    expectDocumented('post', '/api/webhooks/midtrans', midtransOff)
    expect(midtransOff.json.type).toBe('/problems/not-found')
    const redelivered = await deliver(app.url, standard)
    expectDocumented('post', '/api/webhooks/standard', redelivered)
    expect([redelivered.status, redelivered.json.idempotency.replayed]).toEqual([200, true])
    const unknown = await exchange('post', '/api/webhooks/{provider}', '/api/webhooks/paypal', { body: { id: 'evt_1' } })
    expect(unknown.json.type).toBe('/problems/not-found')
    const forged = await deliver(app.url, { ...stripe, headers: { ...stripe.headers, 'stripe-signature': 't=1,v1=00' } })
    expectDocumented('post', '/api/webhooks/stripe', forged)
    expect(forged.status).toBe(401)
  })

  it('health, readiness, metrics and the checkout session answer as documented', async () => {
    expect((await exchange('get', '/api/health', '/api/health')).status).toBe(200)
    expect((await exchange('get', '/api/ready', '/api/ready')).status).toBe(200)
    expect((await exchange('get', '/api/ready', '/api/ready', { headers: opsHeaders })).json.webhooks).toBeDefined()
    expect((await exchange('get', '/api/metrics', '/api/metrics', { headers: opsHeaders })).status).toBe(200)
    expect((await exchange('get', '/api/metrics', '/api/metrics')).status).toBe(401)
    const session = await exchange('get', '/api/checkout/session', '/api/checkout/session')
    expect(session.headers.get('set-cookie')).toContain('ic_checkout=')
  })

  it('the ops routes answer as documented', async () => {
    const keysPath = `/api/ops/tenants/${tenant.tenantId}/keys`
    const issued = await exchange('post', '/api/ops/tenants/{id}/keys', keysPath, { headers: opsHeaders })
    expect(issued.status, issued.text).toBe(201)
    expect((await exchange('get', '/api/ops/tenants/{id}/keys', keysPath, { headers: opsHeaders })).status).toBe(200)
    expect((await exchange('delete', '/api/ops/tenants/{id}/keys/{keyId}', `${keysPath}/${issued.json.keyId}`, { headers: opsHeaders })).status).toBe(204)
    expect((await exchange('post', '/api/ops/tenants', '/api/ops/tenants', { headers: opsHeaders, body: { name: 'openapi-second' } })).status).toBe(201)

    const jobs = await exchange('get', '/api/ops/jobs', '/api/ops/jobs?status=completed&limit=5', { headers: opsHeaders })
    const jobId: string = jobs.json.data[0].id
    expect((await exchange('post', '/api/ops/jobs/{id}/retry', `/api/ops/jobs/${jobId}/retry`, { headers: opsHeaders })).json.type).toBe('/problems/job-not-retryable')
    expect((await exchange('post', '/api/ops/jobs/{id}/dismiss', `/api/ops/jobs/${jobId}/dismiss`, { headers: opsHeaders, body: { reason: 'documented' } })).json.type).toBe('/problems/job-not-dismissable')
    expect((await exchange('post', '/api/ops/tasks/{name}', '/api/ops/tasks/jobs:rescue', { headers: opsHeaders })).status).toBe(200)
    expect((await exchange('get', '/api/ops/ledger/discrepancies', '/api/ops/ledger/discrepancies?status=open', { headers: opsHeaders })).status).toBe(200)
    expect((await exchange('post', '/api/ops/ledger/discrepancies/{id}/resolve', '/api/ops/ledger/discrepancies/ldg_missing/resolve', { headers: opsHeaders, body: { note: 'documented', operator: 'openapi' } })).json.type).toBe('/problems/not-found')

    const { orderId } = await placeOrder()
    expect((await exchange('get', '/api/ops/evidence', `/api/ops/evidence?orderId=${orderId}`, { headers: opsHeaders })).status).toBe(200)
    expect((await exchange('get', '/api/ops/audit/duplicates', '/api/ops/audit/duplicates?windowMinutes=5', { headers: opsHeaders })).status).toBe(200)
    expect((await exchange('get', '/api/ops/idempotency', `/api/ops/idempotency?tenant=${tenant.tenantId}`, { headers: opsHeaders })).status).toBe(200)
    expect((await exchange('get', '/api/ops/mailbox', '/api/ops/mailbox?limit=10', { headers: opsHeaders })).status).toBe(200)
    expect((await exchange('put', '/api/inventory/{sku}', '/api/inventory/OAS-OPS', { headers: tenantHeaders(), body: { onHand: 2 } })).status).toBe(200)
    expect((await exchange('get', '/api/ops/inventory', `/api/ops/inventory?tenantId=${tenant.tenantId}`, { headers: opsHeaders })).json.data.map((row: { sku: string }) => row.sku)).toContain('OAS-OPS')
    expect((await exchange('get', '/api/ops/inventory/{tenantId}/{sku}', `/api/ops/inventory/${tenant.tenantId}/OAS-OPS`, { headers: opsHeaders })).json.ledger).toEqual({ onHand: 2, reserved: 0 })
    const events = await exchange('get', '/api/ops/events', `/api/ops/events?orderId=${orderId}`, { headers: opsHeaders })
    expect(events.json.data.map((event: { type: string }) => event.type)).toEqual(['order.created'])
    const eventId: string = events.json.data[0].id
    expect((await exchange('get', '/api/ops/events/{id}', `/api/ops/events/${eventId}`, { headers: opsHeaders })).json.id).toBe(eventId)
    expect((await exchange('get', '/api/ops/events/{id}', '/api/ops/events/evt_missing', { headers: opsHeaders })).status).toBe(404)
    // The tenant has no webhook endpoint: nothing to resend to.
    expect((await exchange('post', '/api/ops/events/{id}/resend', `/api/ops/events/${eventId}/resend`, { headers: opsHeaders })).json.type).toBe('/problems/event-not-resendable')
    expect((await exchange('get', '/api/ops/webhook-endpoints', `/api/ops/webhook-endpoints?tenant=${tenant.tenantId}`, { headers: opsHeaders })).json).toEqual({ object: 'list', data: [] })
    expect((await exchange('get', '/api/ops/jobs', '/api/ops/jobs?limit=0', { headers: opsHeaders })).json.type).toBe('/problems/validation-failed')
    expect((await exchange('get', '/api/ops/jobs', '/api/ops/jobs')).status).toBe(401)
  })

  it('the idempotency problems and bad bodies are the documented ones', async () => {
    const order = (key: string | undefined, body: unknown, headers: Record<string, string> = {}) =>
      exchange('post', '/api/orders', '/api/orders', { headers: { ...tenantHeaders(), 'content-type': 'application/json', ...(key && { 'idempotency-key': key }), ...headers }, body })
    const slug = (response: TestResponse) => `${response.status} ${response.json?.type}`
    const key = newIdempotencyKey()
    const body = validOrderBody()
    expect((await order(key, body)).status).toBe(201)
    expect(slug(await order(key, { ...body, cartId: 'crt_other' }))).toBe('422 /problems/idempotency-key-reused')
    expect(slug(await order(undefined, body))).toBe('400 /problems/idempotency-key-missing')
    expect(slug(await order('key with spaces', body))).toBe('400 /problems/idempotency-key-invalid')
    expect(slug(await order(newIdempotencyKey(), { ...body, amount: 1 }))).toBe('400 /problems/validation-failed')
    expect(slug(await order(newIdempotencyKey(), '{"cartId":'))).toBe('400 /problems/malformed-json')
    expect(slug(await order(newIdempotencyKey(), 'cartId=1', { 'content-type': 'text/plain' }))).toBe('415 /problems/unsupported-media-type')
    expect(slug(await order(newIdempotencyKey(), 'x'.repeat(70_000)))).toBe('413 /problems/payload-too-large')
    expect(slug(await order(newIdempotencyKey(), { ...body, cartId: `crt_${randomUUID()}` }, { authorization: 'Bearer sk_unknown' }))).toBe('401 /problems/unauthorized')
    expect(slug(await order(newIdempotencyKey(), body))).toBe('409 /problems/cart-already-ordered')
    expect(slug(await exchange('get', '/api/orders/{id}', '/api/orders/ord_missing', { headers: tenantHeaders() }))).toBe('404 /problems/not-found')
  })

  it('exchanged with every documented operation', () => {
    const documented = Object.entries(document.paths ?? {}).flatMap(([path, item]) => (['get', 'put', 'post', 'patch', 'delete'] as const).filter(method => item[method]).map(method => `${method} ${path}`))
    expect([...exercised].sort()).toEqual(documented.sort())
  })
})
