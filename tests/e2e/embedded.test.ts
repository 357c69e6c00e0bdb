import { randomUUID } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type AppProcess, fastJobsEnv, startApp, stopAll } from '../support/app'
import { createTenant, request } from '../support/http'
import { opsRequest } from '../support/ops'
import { expectProblem, orderBodyVariant, postOrder, type TenantCredentials, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { deliver, newWebhookId, standardBody, standardDelivery } from '../support/webhooks'

// The embedded default (docs/configuration.md#the-embedded-default): no DATABASE_URL and no
// REDIS_URL, so PGlite under PGLITE_DIR and in-process locks. The same directory must survive a
// restart with its records intact.

describe('embedded mode: PGlite and in-process locks', () => {
  let pgliteDir: string
  let app: AppProcess
  let tenant: TenantCredentials
  const order = { key: `embedded-${randomUUID()}`, body: validOrderBody() }
  const { cartId } = order.body
  let orderId: string

  // PGlite takes a few seconds to boot and migrate; startApp waits up to 60 s for /api/ready.
  const startEmbedded = () => startApp({ redisUrl: null, label: 'embedded', env: { PGLITE_DIR: pgliteDir } })

  beforeAll(async () => {
    pgliteDir = await mkdtemp(join(tmpdir(), 'ic-embedded-'))
    app = await startEmbedded()
  })

  afterAll(async () => {
    await stopAll()
    if (pgliteDir) await rm(pgliteDir, { recursive: true, force: true })
  })

  it('is ready on PGlite with the in-process lock backend', async () => {
    const checks = {
      database: { driver: 'pglite', ok: true, latencyMs: expect.any(Number) },
      locks: { backend: 'memory', ok: true, latencyMs: expect.any(Number) },
    }
    const anonymous = await request(app.url, '/api/ready')
    expect(anonymous.status).toBe(200)
    expect(anonymous.json).toEqual({ status: 'ready', checks })
    const ready = await opsRequest(app.url, '/api/ready')
    expect(ready.status).toBe(200)
    expect(ready.json).toEqual({
      status: 'ready',
      checks,
      // Embedded is a laptop, not a deployment: nothing to warn about.
      warnings: [],
      // Every missing secret is generated embedded, so every provider is served but Midtrans (PAYMENT_PROVIDER is mockpay).
      webhooks: { providers: ['standard', 'stripe', 'mockpay'] },
      payments: { provider: 'mockpay', failing: false, callsWaitingForRetry: 0, callsOutOfAttempts: 0 },
    })
  })

  it('creates a tenant and an order, replays it, and rejects the key with another body', async () => {
    tenant = await createTenant(app.url, 'embedded')
    const send = (body: unknown) => postOrder(app.url, { secretKey: tenant.secretKey, key: order.key, body })

    const created = await send(order.body)
    expect(created.status).toBe(201)
    expect(created.json).toMatchObject({ object: 'order', status: 'pending_payment', cartId, idempotency: { key: order.key, replayed: false } })
    orderId = created.json.id
    expect(orderId).toMatch(/^ord_/)
    expect(created.headers.get('location')).toBe(`/api/orders/${orderId}`)

    const replayed = await send(order.body)
    expect(replayed.status).toBe(201)
    expect(replayed.headers.get('idempotent-replayed')).toBe('true')
    expect(replayed.json).toEqual({ ...created.json, idempotency: { key: order.key, replayed: true } })

    expectProblem(await send(orderBodyVariant(1, { cartId })), 'idempotency-key-reused')
  })

  it('keeps the order and its idempotency record across a restart on the same PGLITE_DIR', async () => {
    expect(orderId).toBeDefined()
    await app.stop()
    expect(await app.exited).toBe(0)
    app = await startEmbedded()

    const replayed = await postOrder(app.url, { secretKey: tenant.secretKey, ...order })
    expect(replayed.status).toBe(201)
    expect(replayed.headers.get('idempotent-replayed')).toBe('true')
    expect(replayed.json).toMatchObject({ id: orderId, cartId, idempotency: { key: order.key, replayed: true } })

    const fetched = await request(app.url, `/api/orders/${orderId}`, { headers: { authorization: `Bearer ${tenant.secretKey}` } })
    expect(fetched.status).toBe(200)
    expect(fetched.json).toMatchObject({ id: orderId, object: 'order', cartId })

    // The cart's uniqueness survived too: a new key for the same cart is told which order exists.
    const sameCartNewKey = await postOrder(app.url, { secretKey: tenant.secretKey, key: `embedded-${randomUUID()}`, body: order.body })
    expectProblem(sameCartNewKey, 'cart-already-ordered')
    expect(sameCartNewKey.json.orderId).toBe(orderId)
  })

  it('answers readiness, reads and other orders while a slow order waits before its commit', async () => {
    expect(orderId).toBeDefined()
    const auth = { authorization: `Bearer ${tenant.secretKey}` }
    const settled: string[] = []
    const tracked = <T>(name: string, pending: Promise<T>) => pending.finally(() => settled.push(name))
    // Sent twice: whichever takes the key's lock first is the slow one, the other is told it is in
    // progress — and once that answer is in, the slow one is in flight, holding the key.
    const slowOrder = { key: `embedded-slow-${randomUUID()}`, body: validOrderBody(), headers: { 'x-fault': 'delay-before-commit=5000' } }
    const sent = [tracked('slow', postOrder(app.url, { secretKey: tenant.secretKey, ...slowOrder })), tracked('slow', postOrder(app.url, { secretKey: tenant.secretKey, ...slowOrder }))]
    const duplicate = await Promise.race(sent)
    expectProblem(duplicate, 'request-in-progress')

    const [ready, fetched, other] = await Promise.all([
      tracked('ready', request(app.url, '/api/ready')),
      tracked('read', request(app.url, `/api/orders/${orderId}`, { headers: auth })),
      tracked('other order', postOrder(app.url, { secretKey: tenant.secretKey, key: `embedded-${randomUUID()}`, body: validOrderBody() })),
    ])
    expect(ready.status, ready.text).toBe(200)
    expect(ready.json).toMatchObject({ status: 'ready', checks: { database: { driver: 'pglite', ok: true } } })
    expect(fetched.status, fetched.text).toBe(200)
    expect(fetched.json).toMatchObject({ id: orderId, object: 'order' })
    expect(other.status, other.text).toBe(201)
    // All three answered while the slow order was still waiting: only the duplicate had settled.
    expect(settled.filter(name => name === 'slow')).toHaveLength(1)

    const slow = (await Promise.all(sent)).find(response => response !== duplicate)!
    expect(slow.status, slow.text).toBe(201)
    expect(slow.json).toMatchObject({ object: 'order', status: 'pending_payment', idempotency: { key: slowOrder.key, replayed: false } })
    expect(settled.at(-1)).toBe('slow')
  })
})

describe('embedded mode: the checkout loop with mockpay and the in-app worker', () => {
  let pgliteDir: string | undefined
  let app: AppProcess | undefined

  beforeAll(async () => {
    pgliteDir = await mkdtemp(join(tmpdir(), 'ic-embedded-mockpay-'))
    // Nothing but the worker switched on: mockpay is on by default when embedded and delivers to
    // this instance's own webhook endpoint.
    app = await startApp({
      redisUrl: null,
      label: 'embedded-mockpay',
      env: { PGLITE_DIR: pgliteDir, ...fastJobsEnv },
    })
  })

  afterAll(async () => {
    await app?.stop()
    if (pgliteDir) await rm(pgliteDir, { recursive: true, force: true })
  })

  it('an order confirmed through mockpay becomes paid; a later payment.failed event leaves it paid', async () => {
    const tenant = await createTenant(app!.url, 'embedded mockpay')
    const auth = { authorization: `Bearer ${tenant.secretKey}` }
    const created = await postOrder(app!.url, { secretKey: tenant.secretKey, key: `embedded-${randomUUID()}`, body: validOrderBody() })
    expect(created.status, created.text).toBe(201)
    const orderId: string = created.json.id
    const readOrder = async () => {
      const fetched = await request(app!.url, `/api/orders/${orderId}`, { headers: auth })
      expect(fetched.status, fetched.text).toBe(200)
      return fetched.json
    }

    let intentId: string | null = null
    await pollUntil(`order ${orderId} has a payment intent`, async () => {
      intentId = (await readOrder()).paymentIntentId
      return intentId !== null
    }, { timeoutMs: 20_000, intervalMs: 100 })
    expect(intentId).toMatch(/^pi_/)

    const confirmed = await request(app!.url, `/api/mockpay/intents/${intentId}/confirm`, { method: 'POST', body: { outcome: 'succeed' } })
    expect(confirmed.status, confirmed.text).toBe(200)
    expect(confirmed.json).toMatchObject({ id: intentId, orderId, status: 'succeeded', events: [{ type: 'payment.succeeded' }] })
    await pollUntil(`order ${orderId} is paid`, async () => (await readOrder()).status === 'paid', { timeoutMs: 20_000, intervalMs: 100 })

    // A late failure under a new event id is stored and applied by precedence: it cannot undo paid.
    const webhookId = newWebhookId()
    const body = standardBody('payment.failed', { orderId, paymentId: intentId!, amount: 150_000, currency: 'IDR' }, new Date().toISOString())
    const accepted = await deliver(app!.url, standardDelivery(webhookId, body))
    expect(accepted.status, accepted.text).toBe(200)
    expect(accepted.json).toEqual({ received: true, eventId: webhookId, idempotency: { key: webhookId, replayed: false } })

    // On PGlite the app holds the database: the ops API shows when the event's job has run.
    await pollUntil(`the webhook.apply job of ${webhookId} completed`, async () => {
      const listed = await opsRequest(app!.url, `/api/ops/jobs?kind=webhook.apply&resourceId=order:${orderId}`)
      expect(listed.status, listed.text).toBe(200)
      const jobs: Array<{ idempotencyKey: string, status: string }> = listed.json.data
      return jobs.some(job => job.idempotencyKey === webhookId && job.status === 'completed')
    }, { timeoutMs: 20_000, intervalMs: 100 })
    expect(await readOrder()).toMatchObject({ id: orderId, status: 'paid', paymentIntentId: intentId })

    // The events, from PGlite's triggers and listed below its oldest running transaction: created, then paid; the late failure changed nothing.
    const listed = await request(app!.url, '/api/events', { headers: auth })
    expect(listed.status, listed.text).toBe(200)
    expect(listed.json.data.map((event: { type: string, data: { object: { id: string, status: string } } }) => [event.type, event.data.object.id, event.data.object.status]))
      .toEqual([['order.created', orderId, 'pending_payment'], ['order.paid', orderId, 'paid']])
  })

  it('refunds and cancels on PGlite: concurrent 40 % refunds on one order admit exactly two, each made once at mockpay; an unpaid order is canceled', async () => {
    const tenant = await createTenant(app!.url, 'embedded refunds')
    const auth = { authorization: `Bearer ${tenant.secretKey}` }
    const placed = async () => {
      const created = await postOrder(app!.url, { secretKey: tenant.secretKey, key: `embedded-${randomUUID()}`, body: validOrderBody({ cartId: `cart-${randomUUID()}` }) })
      expect(created.status, created.text).toBe(201)
      let order: Record<string, any> = {}
      await pollUntil(`order ${created.json.id} has a payment intent`, async () => {
        order = (await request(app!.url, `/api/orders/${created.json.id}`, { headers: auth })).json
        return order.paymentIntentId !== null
      }, { timeoutMs: 20_000, intervalMs: 100 })
      return order
    }
    const orderWhen = async (orderId: string, condition: (order: Record<string, any>) => boolean) => {
      let order: Record<string, any> = {}
      await pollUntil(`order ${orderId} settles`, async () => {
        order = (await request(app!.url, `/api/orders/${orderId}`, { headers: auth })).json
        return condition(order)
      }, { timeoutMs: 20_000, intervalMs: 100 })
      return order
    }

    const paid = await placed()
    const confirmed = await request(app!.url, `/api/mockpay/intents/${paid.paymentIntentId}/confirm`, { method: 'POST', body: { outcome: 'succeed' } })
    expect(confirmed.status, confirmed.text).toBe(200)
    await orderWhen(paid.id, order => order.status === 'paid')
    const answers = await Promise.all(Array.from({ length: 5 }, () => request(app!.url, `/api/orders/${paid.id}/refunds`, {
      method: 'POST', headers: { ...auth, 'idempotency-key': randomUUID() }, body: { amount: 60_000 },
    })))
    expect(answers.map(answer => answer.status).sort()).toEqual([201, 201, 409, 409, 409])
    const refunded = await orderWhen(paid.id, order => order.amountRefunded === 120_000)
    expect(refunded.status).toBe('partially_refunded')
    const intent = await request(app!.url, `/api/mockpay/intents/${paid.paymentIntentId}`)
    expect(intent.json).toMatchObject({ status: 'succeeded', amountRefunded: 120_000 })

    const unpaid = await placed()
    const canceled = await request(app!.url, `/api/orders/${unpaid.id}/cancel`, { method: 'POST', headers: { ...auth, 'idempotency-key': randomUUID() } })
    expect(canceled.status, canceled.text).toBe(200)
    expect(canceled.json.status).toBe('canceled')
    await pollUntil('the intent is canceled at mockpay', async () => (await request(app!.url, `/api/mockpay/intents/${unpaid.paymentIntentId}`)).json.status === 'canceled', { timeoutMs: 20_000, intervalMs: 100 })
  })
})
