import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { paymentIdempotencyKey } from '../../server/payments'
import { type AppProcess, fastJobsEnv, startApp, stopAll, testSecrets } from '../support/app'
import { createTenant, request, type TestResponse } from '../support/http'
import { effectsPerOrder } from '../support/jobs'
import { expectProblem, postOrder, type TenantCredentials, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { createTestDatabase, describeWithServices, redisUrl } from '../support/services'
import { type StripeApi, startStripeApi } from '../support/stripe-api'
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy'
import { deliver, newWebhookId, type SignedDelivery, standardBody, standardDelivery } from '../support/webhooks'

// The simulated provider (docs/payments-and-refunds.md#mockpay-the-simulated-provider) against the
// built app on Postgres and Redis: the shopper's buttons on /api/mockpay, Standard Webhooks
// deliveries signed with mockpay's own secret and sent to /api/webhooks/mockpay by mockpay.deliver
// jobs with duplicates, delays and reordering, and the app taking each event exactly once. The real
// provider's endpoint never accepts what mockpay signs.

/** No copies, no delay: one delivery per new event (plus the earlier ones, reorder being on by default). */
const calm = { duplicates: 0, maxDelayMs: 0 }

interface IntentEvent { id: string, type: string, timestamp: string }

interface Intent {
  id: string
  orderId: string
  status: string
  amount: number
  currency: string
  events: IntentEvent[]
}

interface CreatedOrder { orderId: string, intentId: string }

const orderPath = (orderId: string) => `/api/orders/${orderId}`

function mockpayPost(baseUrl: string, intentId: string, action: 'confirm' | 'refund', body?: unknown): Promise<TestResponse> {
  return request(baseUrl, `/api/mockpay/intents/${intentId}/${action}`, { method: 'POST', body })
}

/** A Standard Webhooks delivery of one payment event, signed with `secret`, posted to `path`. */
function signedEvent(path: string, secret: string, data: { orderId: string, paymentId: string }): { webhookId: string, delivery: SignedDelivery } {
  const webhookId = newWebhookId()
  const body = standardBody('payment.succeeded', { ...data, amount: 150_000, currency: 'IDR' }, new Date().toISOString())
  return { webhookId, delivery: { ...standardDelivery(webhookId, body, { secret }), path } }
}

/** An order through POST /api/orders, and its intent once the worker's payment.create_intent stored it. */
async function createOrderWithIntent(baseUrl: string, tenant: TenantCredentials): Promise<CreatedOrder> {
  const created = await postOrder(baseUrl, { secretKey: tenant.secretKey, key: `mockpay-${randomUUID()}`, body: validOrderBody() })
  expect(created.status, created.text).toBe(201)
  const orderId: string = created.json.id
  let intentId: string | null = null
  await pollUntil(`order ${orderId} has a payment intent`, async () => {
    const fetched = await request(baseUrl, orderPath(orderId), { headers: { authorization: `Bearer ${tenant.secretKey}` } })
    expect(fetched.status, fetched.text).toBe(200)
    intentId = fetched.json.paymentIntentId
    return intentId !== null
  }, { timeoutMs: 20_000, intervalMs: 100 })
  expect(intentId).toMatch(/^pi_/)
  return { orderId, intentId: intentId! }
}

async function orderStatusOnce(baseUrl: string, tenant: TenantCredentials, orderId: string, status: string): Promise<void> {
  let seen: string | undefined
  await pollUntil(`order ${orderId} is ${status} (last seen ${seen})`, async () => {
    const fetched = await request(baseUrl, orderPath(orderId), { headers: { authorization: `Bearer ${tenant.secretKey}` } })
    seen = fetched.json?.status
    return seen === status
  }, { timeoutMs: 20_000, intervalMs: 100 })
}

/** The intent as the confirm/refund routes answer it. */
function expectIntent(response: TestResponse, expected: { intentId: string, orderId: string, status: string, events: string[], deliveriesScheduled: number }): Intent {
  expect(response.status, response.text).toBe(200)
  const refunded = expected.status === 'refunded'
  expect(response.json).toEqual({
    id: expected.intentId,
    orderId: expected.orderId,
    status: expected.status,
    amount: 150_000,
    amountRefunded: refunded ? 150_000 : 0,
    currency: 'IDR',
    // A refund event carries the total refunded when it happened.
    events: expected.events.map(type => ({ id: expect.stringMatching(/^msg_/), type, timestamp: expect.any(String), ...(type === 'payment.refunded' && { amount: 150_000 }) })),
    deliveriesScheduled: expected.deliveriesScheduled,
    ...(refunded && expected.deliveriesScheduled > 0 && { refund: { id: expect.stringMatching(/^mre_/), amount: 150_000 } }),
  })
  return response.json
}

const lastEventId = (intent: Intent): string => intent.events.at(-1)!.id

interface OrderJob { kind: string, status: string, attempt: number, errors: Array<{ attempt: number, errorClass: string, message: string }>, dedupeKey: string }

/**
 * Every job of an order: those on its resource (intent, webhook.apply, effects) and the provider's
 * deliveries, which carry the order id in their payload.
 */
function jobsOfOrder(sql: postgres.Sql, orderId: string): Promise<OrderJob[]> {
  return sql<OrderJob[]>`
    select kind, status, attempt, errors, dedupe_key as "dedupeKey" from jobs
    where resource_id = ${`order:${orderId}`} or (kind = 'mockpay.deliver' and payload->>'orderId' = ${orderId})
    order by kind, dedupe_key`
}

/** The order's jobs once all of them completed; each kind counted. */
async function settledJobKinds(sql: postgres.Sql, orderId: string): Promise<Record<string, number>> {
  let jobs: OrderJob[] = []
  await pollUntil(`every job of order ${orderId} completed`, async () => {
    jobs = await jobsOfOrder(sql, orderId)
    return jobs.every(job => job.status === 'completed')
  }, { timeoutMs: 20_000, intervalMs: 100 })
  const kinds: Record<string, number> = {}
  for (const job of jobs) kinds[job.kind] = (kinds[job.kind] ?? 0) + 1
  return kinds
}

/**
 * What the idempotency layer made of each delivery of one event, from request_log (written in 50 ms
 * batches) and the replays counted beside it (a redelivery after the minute's first replay).
 */
async function outcomesOnce(sql: postgres.Sql, eventId: string, expectedRows: number): Promise<Record<string, number>> {
  let rows: Array<{ outcome: string, status: number }> = []
  await pollUntil(`${expectedRows} request_log rows for event ${eventId}`, async () => {
    const logged = await sql<Array<{ outcome: string, status: number }>>`
      select outcome, status from request_log where scope = 'provider:mockpay' and idempotency_key = ${eventId}`
    const counted = await sql<Array<{ status: number, replays: number }>>`
      select status, replays from request_log_replays where scope = 'provider:mockpay' and idempotency_key = ${eventId}`
    rows = [...logged, ...counted.flatMap(({ status, replays }) => Array.from({ length: replays }, () => ({ outcome: 'replay', status })))]
    return rows.length >= expectedRows
  }, { timeoutMs: 10_000, intervalMs: 50 })
  // Every delivery was answered 200: the provider got no reason to retry.
  expect(rows.map(row => row.status)).toEqual(rows.map(() => 200))
  const outcomes: Record<string, number> = {}
  for (const row of rows) outcomes[row.outcome] = (outcomes[row.outcome] ?? 0) + 1
  return outcomes
}

function webhookEventsOf(sql: postgres.Sql, eventId: string) {
  return sql<Array<{ id: string, orderId: string, type: string, status: string }>>`
    select id, order_id as "orderId", type, status from webhook_events where provider = 'mockpay' and event_id = ${eventId}`
}

function historyOf(sql: postgres.Sql, orderId: string) {
  return sql<Array<{ fromStatus: string, toStatus: string, outcome: string, webhookEventId: string }>>`
    select from_status as "fromStatus", to_status as "toStatus", outcome, webhook_event_id as "webhookEventId"
    from order_status_history where order_id = ${orderId} order by id`
}

function mailOf(sql: postgres.Sql, orderId: string) {
  return sql<Array<{ subject: string }>>`select subject from mailbox where order_id = ${orderId} order by created_at, id`
}

function sideEffectsOf(sql: postgres.Sql, orderId: string) {
  return sql<Array<{ effect: string }>>`select effect from side_effects where order_id = ${orderId} order by effect`
}

describeWithServices('mockpay: the simulated provider on Postgres and Redis', ['postgres', 'redis'], () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>> | undefined
  let app: AppProcess
  let sql: postgres.Sql | undefined
  let tenant: TenantCredentials

  beforeAll(async () => {
    database = await createTestDatabase('mockpay')
    // With DATABASE_URL set mockpay is off by default; deliveries go to this instance's own endpoint.
    app = await startApp({ databaseUrl: database.url, redisUrl, label: 'mockpay', env: { ...fastJobsEnv, MOCKPAY_ENABLED: 'true' } })
    sql = postgres(database.url, { max: 2, onnotice: () => {} })
    tenant = await createTenant(app.url, 'mockpay')
  })

  afterAll(async () => {
    await app?.stop()
    await sql?.end()
    await database?.drop()
  })

  const db = () => sql!

  it('confirm with chaos: 4 deliveries of one event, the order paid once, 1 miss and 3 replays', async () => {
    const { orderId, intentId } = await createOrderWithIntent(app.url, tenant)
    const pending = await request(app.url, `/api/mockpay/intents/${intentId}`)
    expect(pending.status, pending.text).toBe(200)
    expect(pending.json).toEqual({ id: intentId, orderId, status: 'requires_payment', amount: 150_000, amountRefunded: 0, currency: 'IDR', events: [] })

    const confirmed = await mockpayPost(app.url, intentId, 'confirm', { outcome: 'succeed', chaos: { duplicates: 3, maxDelayMs: 300, reorder: true } })
    // No earlier events to reorder: the event and its three copies.
    const intent = expectIntent(confirmed, { intentId, orderId, status: 'succeeded', events: ['payment.succeeded'], deliveriesScheduled: 4 })
    const eventId = lastEventId(intent)

    await orderStatusOnce(app.url, tenant, orderId, 'paid')
    expect(await settledJobKinds(db(), orderId)).toEqual({
      'payment.create_intent': 1,
      'mockpay.deliver': 4,
      'webhook.apply': 1,
      'order.send_confirmation': 1,
      'order.issue_invoice': 1,
    })

    expect((await effectsPerOrder(db(), [orderId])).get(orderId)).toEqual({ emails: 1, invoices: 1, markers: 2, intents: 1 })
    expect(await sideEffectsOf(db(), orderId)).toEqual([{ effect: 'confirmation_email' }, { effect: 'invoice' }])
    expect(await mailOf(db(), orderId)).toEqual([{ subject: `Order ${orderId} confirmed` }])
    const [stored, ...moreStored] = await webhookEventsOf(db(), eventId)
    expect(moreStored).toEqual([])
    expect(stored).toMatchObject({ orderId, type: 'payment.succeeded', status: 'applied' })
    expect(await historyOf(db(), orderId)).toEqual([{ fromStatus: 'pending_payment', toStatus: 'paid', outcome: 'applied', webhookEventId: stored!.id }])

    expect(await outcomesOnce(db(), eventId, 4)).toEqual({ miss: 1, replay: 3 })
  })

  it('refund without a body: the order refunded once; the earlier succeeded event, delivered again, is replayed', async () => {
    const { orderId, intentId } = await createOrderWithIntent(app.url, tenant)
    const succeeded = expectIntent(await mockpayPost(app.url, intentId, 'confirm', { outcome: 'succeed', chaos: calm }),
      { intentId, orderId, status: 'succeeded', events: ['payment.succeeded'], deliveriesScheduled: 1 })
    const succeededId = lastEventId(succeeded)
    await orderStatusOnce(app.url, tenant, orderId, 'paid')
    await settledJobKinds(db(), orderId)

    // Defaults (MOCKPAY_DUPLICATES=1, MOCKPAY_REORDER=true): the refund twice, the succeeded event again.
    const refunded = expectIntent(await mockpayPost(app.url, intentId, 'refund'),
      { intentId, orderId, status: 'refunded', events: ['payment.succeeded', 'payment.refunded'], deliveriesScheduled: 3 })
    expect(refunded.events[0]).toEqual(succeeded.events[0])
    const refundId = lastEventId(refunded)

    await orderStatusOnce(app.url, tenant, orderId, 'refunded')
    expect(await settledJobKinds(db(), orderId)).toEqual({
      'payment.create_intent': 1,
      'mockpay.deliver': 4,
      'webhook.apply': 2,
      'order.send_confirmation': 1,
      'order.issue_invoice': 1,
      'order.send_refund_notice': 1,
    })
    expect(await mailOf(db(), orderId)).toEqual([{ subject: `Order ${orderId} confirmed` }, { subject: `Order ${orderId} refunded` }])
    // The refund the webhook's total recorded, noticed once.
    const [refundRecorded] = await db()<Array<{ id: string, source: string }>>`select id, source from refunds where order_id = ${orderId}`
    expect(refundRecorded!.source).toBe('provider')
    expect(await sideEffectsOf(db(), orderId)).toEqual([{ effect: 'confirmation_email' }, { effect: 'invoice' }, { effect: `refund_notice:${refundRecorded!.id}` }])
    expect((await effectsPerOrder(db(), [orderId])).get(orderId)).toEqual({ emails: 2, invoices: 1, markers: 3, intents: 1 })

    const [succeededRow] = await webhookEventsOf(db(), succeededId)
    const [refundRow] = await webhookEventsOf(db(), refundId)
    expect(refundRow).toMatchObject({ orderId, type: 'payment.refunded', status: 'applied' })
    // One history row per distinct event: the replays left no trace in the order's story.
    expect(await historyOf(db(), orderId)).toEqual([
      { fromStatus: 'pending_payment', toStatus: 'paid', outcome: 'applied', webhookEventId: succeededRow!.id },
      { fromStatus: 'paid', toStatus: 'refunded', outcome: 'applied', webhookEventId: refundRow!.id },
    ])
    expect(await outcomesOnce(db(), succeededId, 2)).toEqual({ miss: 1, replay: 1 })
    expect(await outcomesOnce(db(), refundId, 2)).toEqual({ miss: 1, replay: 1 })

    const read = await request(app.url, `/api/mockpay/intents/${intentId}`)
    expect(read.status, read.text).toBe(200)
    expect(read.json).toEqual({ id: intentId, orderId, status: 'refunded', amount: 150_000, amountRefunded: 150_000, currency: 'IDR', events: refunded.events })
  })

  it('fail, then succeed: payment_failed, then paid; the same button twice schedules nothing; impossible transitions are 409', async () => {
    const { orderId, intentId } = await createOrderWithIntent(app.url, tenant)
    const failed = expectIntent(await mockpayPost(app.url, intentId, 'confirm', { outcome: 'fail', chaos: calm }),
      { intentId, orderId, status: 'failed', events: ['payment.failed'], deliveriesScheduled: 1 })
    const failedId = lastEventId(failed)
    await orderStatusOnce(app.url, tenant, orderId, 'payment_failed')

    expectIntent(await mockpayPost(app.url, intentId, 'confirm', { outcome: 'fail', chaos: calm }),
      { intentId, orderId, status: 'failed', events: ['payment.failed'], deliveriesScheduled: 0 })
    const refundFailed = await mockpayPost(app.url, intentId, 'refund')
    expectProblem(refundFailed, 'payment-state-conflict')
    expect(refundFailed.json.intentStatus).toBe('failed')

    // A failed intent may be paid again; reorder (the default) sends the failure once more.
    const succeeded = expectIntent(await mockpayPost(app.url, intentId, 'confirm', { outcome: 'succeed', chaos: calm }),
      { intentId, orderId, status: 'succeeded', events: ['payment.failed', 'payment.succeeded'], deliveriesScheduled: 2 })
    const succeededId = lastEventId(succeeded)
    await orderStatusOnce(app.url, tenant, orderId, 'paid')

    const again = await mockpayPost(app.url, intentId, 'confirm', { outcome: 'succeed', chaos: { duplicates: 5 } })
    expectIntent(again, { intentId, orderId, status: 'succeeded', events: ['payment.failed', 'payment.succeeded'], deliveriesScheduled: 0 })
    expect(again.json.events).toEqual(succeeded.events)
    const failSucceeded = await mockpayPost(app.url, intentId, 'confirm', { outcome: 'fail' })
    expectProblem(failSucceeded, 'payment-state-conflict')
    expect(failSucceeded.json.intentStatus).toBe('succeeded')

    expect(await settledJobKinds(db(), orderId)).toEqual({
      'payment.create_intent': 1,
      'mockpay.deliver': 3,
      'webhook.apply': 2,
      'order.send_confirmation': 1,
      'order.issue_invoice': 1,
    })
    const [failedRow] = await webhookEventsOf(db(), failedId)
    const [succeededRow] = await webhookEventsOf(db(), succeededId)
    expect(await historyOf(db(), orderId)).toEqual([
      { fromStatus: 'pending_payment', toStatus: 'payment_failed', outcome: 'applied', webhookEventId: failedRow!.id },
      { fromStatus: 'payment_failed', toStatus: 'paid', outcome: 'applied', webhookEventId: succeededRow!.id },
    ])
    expect((await effectsPerOrder(db(), [orderId])).get(orderId)).toEqual({ emails: 1, invoices: 1, markers: 2, intents: 1 })
    expect(await outcomesOnce(db(), failedId, 2)).toEqual({ miss: 1, replay: 1 })
    expect(await outcomesOnce(db(), succeededId, 1)).toEqual({ miss: 1 })
  })

  it('each endpoint verifies with its own secret: mockpay-signed to /api/webhooks/standard and standard-signed to /api/webhooks/mockpay are 401, nothing stored', async () => {
    const { orderId, intentId } = await createOrderWithIntent(app.url, tenant)
    const crossed = [
      signedEvent('/api/webhooks/standard', testSecrets.mockpayWebhookSecret, { orderId, paymentId: intentId }),
      signedEvent('/api/webhooks/mockpay', testSecrets.webhookStandardSecret, { orderId, paymentId: intentId }),
    ]
    for (const { webhookId, delivery } of crossed) {
      const answer = await deliver(app.url, delivery)
      expectProblem(answer, 'webhook-signature-invalid')
      expect(answer.status).toBe(401)
      expect(answer.json.detail).toMatch(/^Signature rejected: no v1 signature matches\./)
      const stored = await db()<Array<{ provider: string }>>`select provider from webhook_events where event_id = ${webhookId}`
      expect(stored).toEqual([])
      const records = await db()<Array<{ scope: string }>>`select scope from idempotency_records where key = ${webhookId}`
      expect(records).toEqual([])
    }

    // Each secret where it belongs: accepted once, stored under its endpoint's provider name.
    const mockpaySigned = signedEvent('/api/webhooks/mockpay', testSecrets.mockpayWebhookSecret, { orderId, paymentId: intentId })
    const accepted = await deliver(app.url, mockpaySigned.delivery)
    expect(accepted.status, accepted.text).toBe(200)
    expect(accepted.json).toEqual({ received: true, eventId: mockpaySigned.webhookId, idempotency: { key: mockpaySigned.webhookId, replayed: false } })
    expect(await db()<Array<{ provider: string }>>`select provider from webhook_events where event_id = ${mockpaySigned.webhookId}`).toEqual([{ provider: 'mockpay' }])
    await orderStatusOnce(app.url, tenant, orderId, 'paid')
  })

  it('an unknown intent is 404, an invalid body 400; neither changes the intent or schedules a delivery', async () => {
    const { orderId, intentId } = await createOrderWithIntent(app.url, tenant)

    expectProblem(await mockpayPost(app.url, 'pi_unknown', 'confirm', { outcome: 'succeed' }), 'not-found')
    expectProblem(await mockpayPost(app.url, 'pi_unknown', 'refund'), 'not-found')
    expectProblem(await request(app.url, '/api/mockpay/intents/pi_unknown'), 'not-found')

    const maybe = await mockpayPost(app.url, intentId, 'confirm', { outcome: 'maybe' })
    expectProblem(maybe, 'validation-failed')
    expect(maybe.json.errors).toEqual([{ path: 'outcome', message: expect.stringMatching(/"succeed"\|"fail"/) }])
    const tooManyCopies = await mockpayPost(app.url, intentId, 'confirm', { outcome: 'succeed', chaos: { duplicates: 11 } })
    expectProblem(tooManyCopies, 'validation-failed')
    expect(tooManyCopies.json.errors).toEqual([{ path: 'chaos.duplicates', message: expect.stringMatching(/10/) }])

    const read = await request(app.url, `/api/mockpay/intents/${intentId}`)
    expect(read.json).toMatchObject({ id: intentId, orderId, status: 'requires_payment', events: [] })
    expect(await settledJobKinds(db(), orderId)).toEqual({ 'payment.create_intent': 1 })
  })
})

/** The Stripe stand-in accepts only this key (STRIPE_SECRET_KEY must look like a test-mode key). */
const stripeSecretKey = 'sk_test_mockpayoff0123456789'

/** PAYMENT_PROVIDER=stripe against the stand-in: the provider a deployment with mockpay off asks. */
const stripeEnv = (api: StripeApi) => ({
  PAYMENT_PROVIDER: 'stripe',
  STRIPE_SECRET_KEY: stripeSecretKey,
  STRIPE_API_BASE: api.url,
  MOCKPAY_ENABLED: 'false',
})

describeWithServices('mockpay: a provider retries until the endpoint answers, and mockpay off', ['postgres', 'redis'], () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>> | undefined
  let stripeDatabase: Awaited<ReturnType<typeof createTestDatabase>> | undefined
  let sql: postgres.Sql | undefined
  let stripeSql: postgres.Sql | undefined
  let proxy: TcpProxy | undefined
  let stripeApi: StripeApi | undefined
  /** Runs mockpay and the only worker; delivers through the proxy to `receiver`. */
  let provider: AppProcess
  /** No worker: only receives the webhooks (at /api/webhooks/mockpay, which needs mockpay on). */
  let receiver: AppProcess
  /**
   * MOCKPAY_ENABLED=false on the same database, so PAYMENT_PROVIDER=stripe (mockpay cannot be the
   * provider with mockpay off). No worker: the provider a payment.create_intent job asks is the one
   * of whichever worker claims it, and both workers claim that kind. The instance that placed an
   * order usually wins (it wakes its own worker at once, the other on a NOTIFY 50 ms later), but a
   * retry after backoff, a poll or a busy worker can go either way: a worker here could ask Stripe
   * for an intent the tests above expect `provider` to create at mockpay.
   */
  let mockpayOff: AppProcess
  /**
   * PAYMENT_PROVIDER=stripe (mockpay off) with a worker, on a database of its own: the only worker
   * that can claim its orders' payment.create_intent jobs, so which provider is asked is decided by
   * its configuration, never by a race with `provider`'s worker.
   */
  let stripeApp: AppProcess
  let tenant: TenantCredentials
  let stripeTenant: TenantCredentials

  beforeAll(async () => {
    database = await createTestDatabase('mockpay_retries')
    stripeDatabase = await createTestDatabase('mockpay_off_stripe')
    stripeApi = await startStripeApi({ secretKey: stripeSecretKey })
    receiver = await startApp({ databaseUrl: database.url, redisUrl, label: 'mockpay-receiver' })
    proxy = await startTcpProxy({ host: '127.0.0.1', port: receiver.port })
    provider = await startApp({
      databaseUrl: database.url,
      redisUrl,
      label: 'mockpay-provider',
      env: { ...fastJobsEnv, MOCKPAY_ENABLED: 'true', MOCKPAY_WEBHOOK_URL: `http://127.0.0.1:${proxy.port}/api/webhooks/mockpay` },
    })
    mockpayOff = await startApp({ databaseUrl: database.url, redisUrl, label: 'mockpay-off', env: { ...stripeEnv(stripeApi), WORKER_ENABLED: 'false' } })
    stripeApp = await startApp({ databaseUrl: stripeDatabase.url, redisUrl, label: 'mockpay-off-stripe', env: { ...fastJobsEnv, ...stripeEnv(stripeApi) } })
    sql = postgres(database.url, { max: 2, onnotice: () => {} })
    stripeSql = postgres(stripeDatabase.url, { max: 2, onnotice: () => {} })
    tenant = await createTenant(provider.url, 'mockpay retries')
    stripeTenant = await createTenant(stripeApp.url, 'mockpay off')
  })

  afterAll(async () => {
    await stopAll()
    await proxy?.close()
    await stripeApi?.close()
    await sql?.end()
    await stripeSql?.end()
    await database?.drop()
    await stripeDatabase?.drop()
  })

  it('a delivery refused at first is retried with backoff, then delivered and applied once', async () => {
    const { orderId, intentId } = await createOrderWithIntent(provider.url, tenant)
    // Nothing listens at the webhook URL.
    await proxy!.cut()
    const intent = expectIntent(await mockpayPost(provider.url, intentId, 'confirm', { outcome: 'succeed', chaos: calm }),
      { intentId, orderId, status: 'succeeded', events: ['payment.succeeded'], deliveriesScheduled: 1 })
    const eventId = lastEventId(intent)
    const delivery = async () => (await jobsOfOrder(sql!, orderId)).filter(job => job.kind === 'mockpay.deliver')

    await pollUntil('the delivery failed twice', async () => (await delivery())[0]!.errors.length >= 2, { timeoutMs: 20_000, intervalMs: 50 })
    const [failing] = await delivery()
    expect(failing!.status).not.toBe('completed')
    expect(failing!.attempt).toBeGreaterThanOrEqual(2)
    for (const [index, error] of failing!.errors.entries()) {
      expect(error).toMatchObject({ attempt: index + 1, errorClass: 'retryable', message: expect.stringContaining('fetch failed') })
    }
    expect(await webhookEventsOf(sql!, eventId)).toEqual([])
    const pendingOrder = await request(provider.url, orderPath(orderId), { headers: { authorization: `Bearer ${tenant.secretKey}` } })
    expect(pendingOrder.json.status).toBe('pending_payment')

    await proxy!.restore()
    await orderStatusOnce(provider.url, tenant, orderId, 'paid')
    expect(await settledJobKinds(sql!, orderId)).toEqual({
      'payment.create_intent': 1,
      'mockpay.deliver': 1,
      'webhook.apply': 1,
      'order.send_confirmation': 1,
      'order.issue_invoice': 1,
    })
    const [delivered] = await delivery()
    // Every failed attempt is on record; the last one succeeded.
    expect(delivered!.errors.length).toBeGreaterThanOrEqual(2)
    expect(delivered!.attempt).toBe(delivered!.errors.length + 1)
    expect(delivered!.errors.slice(0, failing!.errors.length)).toEqual(failing!.errors)

    const [stored, ...moreStored] = await webhookEventsOf(sql!, eventId)
    expect(moreStored).toEqual([])
    expect(stored).toMatchObject({ orderId, type: 'payment.succeeded', status: 'applied' })
    expect(await historyOf(sql!, orderId)).toEqual([{ fromStatus: 'pending_payment', toStatus: 'paid', outcome: 'applied', webhookEventId: stored!.id }])
    expect((await effectsPerOrder(sql!, [orderId])).get(orderId)).toEqual({ emails: 1, invoices: 1, markers: 2, intents: 1 })
    // Only the successful attempt reached an endpoint.
    expect(await outcomesOnce(sql!, eventId, 1)).toEqual({ miss: 1 })
  })

  it('with MOCKPAY_ENABLED=false the mockpay routes and its webhook endpoint answer 404 not-found, even for an existing intent', async () => {
    const { orderId, intentId } = await createOrderWithIntent(provider.url, tenant)
    expectProblem(await mockpayPost(mockpayOff.url, intentId, 'confirm', { outcome: 'succeed' }), 'not-found')
    expectProblem(await mockpayPost(mockpayOff.url, intentId, 'refund'), 'not-found')
    expectProblem(await request(mockpayOff.url, `/api/mockpay/intents/${intentId}`), 'not-found')
    // A delivery signed with mockpay's very secret: the endpoint is not there.
    const { webhookId, delivery } = signedEvent('/api/webhooks/mockpay', testSecrets.mockpayWebhookSecret, { orderId, paymentId: intentId })
    const webhook = await deliver(mockpayOff.url, delivery)
    expectProblem(webhook, 'not-found')
    expect(webhook.status).toBe(404)
    expect(webhook.json.detail).toBe('No webhook provider "mockpay" here. Point the provider at one of /api/webhooks/standard or /api/webhooks/stripe.')
    expect(await sql!`select id from webhook_events where event_id = ${webhookId}`).toEqual([])

    const [row] = await sql!<Array<{ status: string, events: unknown[] }>>`select status, events from payment_intents where id = ${intentId}`
    expect(row).toEqual({ status: 'requires_payment', events: [] })
    // The instance that has it on still knows the intent.
    const read = await request(provider.url, `/api/mockpay/intents/${intentId}`)
    expect(read.status, read.text).toBe(200)
    expect(read.json.status).toBe('requires_payment')
  })

  it('with PAYMENT_PROVIDER=stripe (mockpay off) an order\'s payment.create_intent asks Stripe once, under order:<id>:payment, and never mockpay', async () => {
    const api = stripeApi!
    const created = await postOrder(stripeApp.url, { secretKey: stripeTenant.secretKey, key: `mockpay-off-${randomUUID()}`, body: validOrderBody() })
    expect(created.status, created.text).toBe(201)
    const orderId: string = created.json.id
    const readOrder = () => request(stripeApp.url, orderPath(orderId), { headers: { authorization: `Bearer ${stripeTenant.secretKey}` } })
    let fetched: TestResponse | undefined
    await pollUntil(`order ${orderId} has a payment`, async () => {
      fetched = await readOrder()
      expect(fetched.status, fetched.text).toBe(200)
      return fetched.json.paymentIntentId !== null
    }, { timeoutMs: 20_000, intervalMs: 100 })

    const createCalls = () => api.calls.filter(call => call.method === 'POST' && call.path === '/v1/payment_intents'
      && (call.body.metadata as Record<string, unknown> | undefined)?.order_id === orderId)
    const [intent, ...moreIntents] = [...api.intents.values()].filter(stored => stored.metadata.order_id === orderId)
    expect(moreIntents).toEqual([])
    // Stripe counts IDR in hundredths of a rupiah: Rp 150,000 is 15000000 there.
    expect(intent).toMatchObject({ id: expect.stringMatching(/^pi_/), amount: 15_000_000, currency: 'idr', status: 'requires_payment_method' })
    expect(createCalls()).toEqual([expect.objectContaining({
      idempotencyKey: paymentIdempotencyKey(orderId),
      authorization: `Bearer ${stripeSecretKey}`,
      body: expect.objectContaining({ amount: '15000000', currency: 'idr', metadata: { order_id: orderId } }),
      answered: 200,
    })])
    expect(paymentIdempotencyKey(orderId)).toBe(`order:${orderId}:payment`)
    expect(fetched!.json).toMatchObject({
      id: orderId,
      status: 'pending_payment',
      paymentIntentId: intent!.id,
      payment: { provider: 'stripe', id: intent!.id, nextAction: { type: 'stripe_client_secret', clientSecret: intent!.client_secret }, error: null },
    })

    // One job, done at its first attempt; mockpay was asked for nothing and delivers nothing.
    expect(await stripeSql!`select kind, status, attempt from jobs where resource_id = ${`order:${orderId}`} or payload->>'orderId' = ${orderId}`)
      .toEqual([{ kind: 'payment.create_intent', status: 'completed', attempt: 1 }])
    expect(await stripeSql!`select id from payment_intents`).toEqual([])
    expect(await stripeSql!`select id from jobs where kind = 'mockpay.deliver'`).toEqual([])
    const [row] = await stripeSql!<Array<{ paymentProvider: string, paymentIntentId: string }>>`
      select payment_provider as "paymentProvider", payment_intent_id as "paymentIntentId" from orders where id = ${orderId}`
    expect(row).toEqual({ paymentProvider: 'stripe', paymentIntentId: intent!.id })
    // The worker polls every 50 ms: a second run of the job would have called again by now.
    await sleep(1_000)
    expect(createCalls()).toHaveLength(1)
    // Nor can the shopper reach mockpay for the Stripe payment.
    expectProblem(await mockpayPost(stripeApp.url, intent!.id, 'confirm', { outcome: 'succeed' }), 'not-found')
    expect((await readOrder()).json).toMatchObject({ status: 'pending_payment', paymentIntentId: intent!.id })
  })
})

afterAll(async () => {
  await stopAll()
})
