import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import { afterAll, beforeAll, beforeEach, expect } from 'vitest'
import type { JobErrorEntry } from '../../server/db/schema'
import { type AppProcess, startApp, testSecrets } from './app'
import { createTenant, request, type TestResponse } from './http'
import { opsRequest } from './ops'
import { type MidtransApi, startMidtransApi } from './midtrans-api'
import { type OrderBody, postOrder, type TenantCredentials, validOrderBody } from './orders'
import { pollUntil } from './poll'
import { createTestDatabase, redisUrl, uniqueRedisPrefix } from './services'
import { type ProviderCall, type StripeApi, startStripeApi, stripeSignature } from './stripe-api'
import { orderResource } from '../../shared/resources'

/**
 * What the payment-provider suites share: the built app pointed at a local stand-in of Stripe or
 * Midtrans (server/config: PAYMENT_PROVIDER, STRIPE_API_BASE, MIDTRANS_API_BASE), on a fresh
 * Postgres database and one Redis prefix that every instance of a stack shares (as a deployment's
 * instances do, so their task and order locks are the same), and the rows and stand-in calls the
 * tests assert on.
 */

/** The Stripe stand-in accepts only this key; the app sends it as `Authorization: Bearer …`. */
export const stripeSecretKey = 'sk_test_standin0123456789abcdef'

/** The app asks the Stripe stand-in for PaymentIntents; mockpay is off. */
export const stripeEnv = (api: Pick<StripeApi, 'url'>): Record<string, string> => ({
  PAYMENT_PROVIDER: 'stripe',
  STRIPE_SECRET_KEY: stripeSecretKey,
  STRIPE_API_BASE: api.url,
  MOCKPAY_ENABLED: 'false',
  PAYMENT_PROVIDER_TIMEOUT_MS: '5000',
})

/** The app charges through the Midtrans stand-in (server key: testSecrets.midtransServerKey, which appEnv sets); mockpay is off. */
export const midtransEnv = (api: Pick<MidtransApi, 'url'>): Record<string, string> => ({
  PAYMENT_PROVIDER: 'midtrans',
  MIDTRANS_SERVER_KEY: testSecrets.midtransServerKey,
  MIDTRANS_API_BASE: api.url,
  MOCKPAY_ENABLED: 'false',
  PAYMENT_PROVIDER_TIMEOUT_MS: '5000',
})

export interface ProviderStack {
  app: AppProcess
  databaseUrl: string
  /** Shared by every instance the stack starts. */
  redisKeyPrefix: string
  sql: postgres.Sql
  tenant: TenantCredentials
  /** Another app instance on the same database and Redis prefix, with `env` on top of the stack's. */
  startInstance: (label: string, env?: Record<string, string>) => Promise<AppProcess>
  close: () => Promise<void>
}

/** A fresh database, the built app on it with `env`, and one tenant. */
export async function startProviderStack(label: string, env: Record<string, string>): Promise<ProviderStack> {
  const database = await createTestDatabase(label)
  const redisKeyPrefix = uniqueRedisPrefix(label)
  const instances: AppProcess[] = []
  const startInstance = async (instanceLabel: string, extra: Record<string, string> = {}) => {
    const app = await startApp({ databaseUrl: database.url, redisUrl, label: instanceLabel, env: { ...env, REDIS_KEY_PREFIX: redisKeyPrefix, ...extra } })
    instances.push(app)
    return app
  }
  const sql = postgres(database.url, { max: 4, onnotice: () => {} })
  const close = async () => {
    await Promise.all(instances.map(instance => instance.stop()))
    await sql.end({ timeout: 5 })
    await database.drop()
  }
  try {
    const app = await startInstance(label)
    const tenant = await createTenant(app.url, `${label} tenant`)
    return { app, databaseUrl: database.url, redisKeyPrefix, sql, tenant, startInstance, close }
  }
  catch (error) {
    await close()
    throw error
  }
}

/** A US-dollar order for Stripe (IDR is validOrderBody's default, for Midtrans). */
export function usdOrderBody(overrides: Partial<OrderBody> = {}): OrderBody {
  return validOrderBody({ currency: 'USD', amount: 4_200, items: [{ sku: 'SKU-USD', quantity: 2, unitPrice: 2_100 }], paymentMethod: 'card', ...overrides })
}

/** POST /api/orders under a fresh key; the new order's id. */
export async function placeOrder(stack: Pick<ProviderStack, 'app' | 'tenant'>, body: OrderBody): Promise<string> {
  const created = await postOrder(stack.app.url, { secretKey: stack.tenant.secretKey, key: `providers-${randomUUID()}`, body })
  expect(created.status, created.text).toBe(201)
  expect(created.json.status).toBe('pending_payment')
  return created.json.id as string
}

export async function getOrder(stack: Pick<ProviderStack, 'app' | 'tenant'>, orderId: string): Promise<TestResponse> {
  return request(stack.app.url, `/api/orders/${orderId}`, { headers: { authorization: `Bearer ${stack.tenant.secretKey}` } })
}

/** pollUntil, with the last thing seen in the error when it times out. */
async function pollSeeing<T>(what: string, read: () => Promise<T>, done: (seen: T) => boolean, timeoutMs: number): Promise<T> {
  let seen: T | undefined
  try {
    await pollUntil(what, async () => done(seen = await read()), { timeoutMs, intervalMs: 50 })
  }
  catch (error) {
    throw new Error(`${(error as Error).message}; last seen: ${JSON.stringify(seen)}`)
  }
  return seen!
}

/** GET /api/orders/:id until `done` holds for its body; the last body. */
export function orderWhen(stack: Pick<ProviderStack, 'app' | 'tenant'>, orderId: string, what: string, done: (order: any) => boolean, timeoutMs = 20_000): Promise<any> {
  return pollSeeing(`order ${orderId} ${what}`, async () => {
    const fetched = await getOrder(stack, orderId)
    expect(fetched.status, fetched.text).toBe(200)
    return fetched.json
  }, done, timeoutMs)
}

export interface JobView {
  id: string
  kind: string
  status: string
  attempt: number
  snoozes: number
  errors: JobErrorEntry[]
  lastError: string | null
  lockedBy: string | null
  requestId: string | null
}

/** The order's jobs of one kind (one, for every kind but webhook.apply). */
export function jobsOf(sql: postgres.Sql, orderId: string, kind: string): Promise<JobView[]> {
  return sql<JobView[]>`
    select id, kind, status, attempt, snoozes, errors, last_error as "lastError", locked_by as "lockedBy", request_id as "requestId"
    from jobs where resource_id = ${orderResource(orderId)} and kind = ${kind} order by created_at, id`
}

/** The order's one job of `kind`, once it is completed (or dead-lettered: the assertion then says why). */
export async function settledJob(sql: postgres.Sql, orderId: string, kind: string, timeoutMs = 20_000): Promise<JobView> {
  const jobs = await pollSeeing(`the ${kind} job of ${orderId} is completed`, () => jobsOf(sql, orderId, kind),
    seen => seen.length === 1 && (seen[0]!.status === 'completed' || seen[0]!.status === 'dead_letter'), timeoutMs)
  return jobs[0]!
}

/** Every job of the order completed (its webhook.apply jobs and the effects they enqueued included). */
export function allJobsSettled(sql: postgres.Sql, orderId: string, timeoutMs = 20_000): Promise<Array<{ kind: string, status: string }>> {
  return pollSeeing(`every job of ${orderId} completed`,
    () => sql<Array<{ kind: string, status: string }>>`select kind, status from jobs where resource_id = ${orderResource(orderId)} order by kind, id`,
    jobs => jobs.every(job => job.status === 'completed'), timeoutMs)
}

export interface HistoryView {
  fromStatus: string
  requestedStatus: string | null
  toStatus: string
  outcome: string
  reason: string | null
  webhookEventId: string | null
  jobId: string | null
}

export function historyOf(sql: postgres.Sql, orderId: string): Promise<HistoryView[]> {
  return sql<HistoryView[]>`
    select from_status as "fromStatus", requested_status as "requestedStatus", to_status as "toStatus", outcome, reason,
      webhook_event_id as "webhookEventId", job_id as "jobId"
    from order_status_history where order_id = ${orderId} order by id`
}

export interface WebhookEventView {
  id: string
  provider: string
  eventId: string
  type: string
  paymentId: string | null
  amount: number | null
  currency: string | null
  status: string
  source: string
  confirmation: Record<string, unknown> | null
}

export function webhookEventsOf(sql: postgres.Sql, orderId: string): Promise<WebhookEventView[]> {
  return sql<WebhookEventView[]>`
    select id, provider, event_id as "eventId", type, payment_id as "paymentId", amount::int as amount, currency, status, source, confirmation
    from webhook_events where order_id = ${orderId} order by received_at, id`
}

/** The order's emails (subjects) and invoices. */
export async function effectsOf(sql: postgres.Sql, orderId: string): Promise<{ emails: string[], invoices: number, markers: string[] }> {
  const emails = await sql<Array<{ subject: string }>>`select subject from mailbox where order_id = ${orderId} order by created_at, id`
  const [invoices] = await sql<Array<{ count: number }>>`select count(*)::int as count from invoices where order_id = ${orderId}`
  const markers = await sql<Array<{ effect: string }>>`select effect from side_effects where order_id = ${orderId} order by effect`
  return { emails: emails.map(row => row.subject), invoices: invoices!.count, markers: markers.map(row => row.effect) }
}

/** The refund's payment.refund job (one per refund), once it is completed or dead-lettered. */
export async function settledRefundJob(sql: postgres.Sql, refundId: string, timeoutMs = 20_000): Promise<JobView> {
  const jobs = await pollSeeing(`the payment.refund job of ${refundId} is completed`, () => sql<JobView[]>`
    select id, kind, status, attempt, snoozes, errors, last_error as "lastError", locked_by as "lockedBy", request_id as "requestId"
    from jobs where kind = 'payment.refund' and dedupe_key = ${refundId}`,
  seen => seen.length === 1 && (seen[0]!.status === 'completed' || seen[0]!.status === 'dead_letter'), timeoutMs)
  return jobs[0]!
}

const tenantHeaders = (stack: Pick<ProviderStack, 'tenant'>) => ({ authorization: `Bearer ${stack.tenant.secretKey}` })

/** POST /api/orders/:id/refunds with the tenant's key under `key`. */
export function postRefund(stack: Pick<ProviderStack, 'app' | 'tenant'>, orderId: string, key: string, body?: { amount?: number, reason?: string }): Promise<TestResponse> {
  return request(stack.app.url, `/api/orders/${orderId}/refunds`, { method: 'POST', headers: { ...tenantHeaders(stack), 'idempotency-key': key }, body })
}

/** POST /api/orders/:id/cancel with the tenant's key under `key`. */
export function postCancel(stack: Pick<ProviderStack, 'app' | 'tenant'>, orderId: string, key: string): Promise<TestResponse> {
  return request(stack.app.url, `/api/orders/${orderId}/cancel`, { method: 'POST', headers: { ...tenantHeaders(stack), 'idempotency-key': key } })
}

/** The refund as GET /api/orders/:id/refunds/:refundId answers it. */
export async function getRefund(stack: Pick<ProviderStack, 'app' | 'tenant'>, orderId: string, refundId: string): Promise<any> {
  const fetched = await request(stack.app.url, `/api/orders/${orderId}/refunds/${refundId}`, { headers: tenantHeaders(stack) })
  expect(fetched.status, fetched.text).toBe(200)
  return fetched.json
}

/** A Stripe event signed with the app's WEBHOOK_STRIPE_SECRET, posted to /api/webhooks/stripe. */
export function postStripeEvent(baseUrl: string, event: unknown): Promise<TestResponse> {
  const body = JSON.stringify(event)
  return request(baseUrl, '/api/webhooks/stripe', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'stripe-signature': stripeSignature(testSecrets.webhookStripeSecret, body) },
    body,
  })
}

/** A Midtrans notification (signed inside its body) posted to /api/webhooks/midtrans. */
export function postMidtransNotification(baseUrl: string, notification: Record<string, unknown>): Promise<TestResponse> {
  return request(baseUrl, '/api/webhooks/midtrans', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(notification) })
}

/** The order's stored events once none is still waiting to be applied, and every job of the order completed. */
export async function processedEvents(sql: postgres.Sql, orderId: string): Promise<WebhookEventView[]> {
  await pollUntil(`the events of ${orderId} are processed`, async () => (await webhookEventsOf(sql, orderId)).every(row => row.status !== 'received'))
  await allJobsSettled(sql, orderId)
  return webhookEventsOf(sql, orderId)
}

/** The order's history rows about refunds and cancellation, oldest first. */
export async function refundReasonsOf(sql: postgres.Sql, orderId: string): Promise<string[]> {
  const rows = await sql<Array<{ reason: string }>>`select reason from order_status_history where order_id = ${orderId} and reason is not null order by id`
  return rows.map(row => row.reason)
}

export function ops(baseUrl: string, path: string, method = 'GET'): Promise<TestResponse> {
  return opsRequest(baseUrl, path, { method, timeoutMs: 30_000 })
}

/** POST /api/ops/tasks/payments:reconcile: the task's result as the endpoint answers it. */
export async function runReconcile(baseUrl: string): Promise<any> {
  const response = await ops(baseUrl, '/api/ops/tasks/payments:reconcile', 'POST')
  expect(response.status, response.text).toBe(200)
  return response.json
}

/**
 * Every app instance runs payments:reconcile at second 0 of each minute (nuxt.config.ts). A test
 * that runs the task itself and counts what it did waits until at least `needSeconds` are left
 * before the next run, so the scheduled one cannot take its orders (or its task lock) first.
 */
export async function clearOfScheduledReconcile(needSeconds = 15): Promise<void> {
  const secondsLeft = 60 - (Date.now() % 60_000) / 1000
  if (secondsLeft < needSeconds) await sleep(secondsLeft * 1000 + 1_500)
}

/** The Stripe stand-in's PaymentIntent creations for one order (metadata[order_id]). */
export const stripeCreates = (api: StripeApi, orderId: string): ProviderCall[] =>
  api.calls.filter(call => call.method === 'POST' && call.path === '/v1/payment_intents' && (call.body.metadata as Record<string, unknown> | undefined)?.order_id === orderId)

/** The Stripe stand-in's intents for one order. */
export const stripeIntentsOf = (api: StripeApi, orderId: string) => [...api.intents.values()].filter(intent => intent.metadata.order_id === orderId)

/** The Stripe stand-in's refund requests for one PaymentIntent, in arrival order. */
export const stripeRefundCalls = (api: StripeApi, intentId: string): ProviderCall[] =>
  api.calls.filter(call => call.method === 'POST' && call.path === '/v1/refunds' && call.body.payment_intent === intentId)

/** The Midtrans stand-in's calls about one order: its charges, status reads, refunds (either endpoint) and cancels, in arrival order. */
export function midtransCallsOf(api: MidtransApi, orderId: string): Array<{ call: string, answered: ProviderCall['answered'] }> {
  const posts: Record<string, string> = { [`/v2/${orderId}/refund`]: 'refund', [`/v2/${orderId}/refund/online/direct`]: 'direct refund', [`/v2/${orderId}/cancel`]: 'cancel' }
  return api.calls.flatMap((call) => {
    const details = call.body.transaction_details as Record<string, unknown> | undefined
    if (call.method === 'POST' && call.path === '/v2/charge' && details?.order_id === orderId) return [{ call: 'charge', answered: call.answered }]
    if (call.method === 'GET' && call.path === `/v2/${orderId}/status`) return [{ call: 'status', answered: call.answered }]
    if (call.method === 'POST' && posts[call.path]) return [{ call: posts[call.path]!, answered: call.answered }]
    return []
  })
}

/** What a suite resets on its stand-in before each test: the calls it saw and the faults scripted. */
interface StandIn { calls: unknown[], script: unknown[], close(): Promise<void> }

/**
 * A suite's stand-in and the app stack pointed at it, started once and closed after the suite; its
 * calls and scripted faults are forgotten before each test (the provider's own state stays, as at the
 * provider). `use` hands them to the suite's variables.
 */
export function withStandInStack<Api extends StandIn>(options: {
  start: () => Promise<Api>
  stack: (api: Api) => Promise<ProviderStack>
  use: (api: Api, stack: ProviderStack) => void
  /** More to reset before each test. */
  reset?: (api: Api) => void
}): void {
  let api: Api | undefined
  let stack: ProviderStack | undefined
  beforeAll(async () => {
    api = await options.start()
    stack = await options.stack(api)
    options.use(api, stack)
  })
  afterAll(async () => {
    await stack?.close()
    await api?.close()
  })
  beforeEach(() => {
    api!.calls.length = 0
    api!.script.length = 0
    options.reset?.(api!)
  })
}

/** withStandInStack against the Stripe stand-in: the stack labelled `label`, with the Stripe env and `env`. */
export function withStripeStack(label: string, env: Record<string, string>, use: (api: StripeApi, stack: ProviderStack) => void, reset?: (api: StripeApi) => void): void {
  withStandInStack({ start: () => startStripeApi({ secretKey: stripeSecretKey }), stack: api => startProviderStack(label, { ...stripeEnv(api), ...env }), use, reset })
}

/** withStandInStack against the Midtrans stand-in: the stack labelled `label`, with the Midtrans env and `env`. */
export function withMidtransStack(label: string, env: Record<string, string>, use: (api: MidtransApi, stack: ProviderStack) => void, reset?: (api: MidtransApi) => void): void {
  withStandInStack({ start: () => startMidtransApi({ serverKey: testSecrets.midtransServerKey }), stack: api => startProviderStack(label, { ...midtransEnv(api), ...env }), use, reset })
}

/** An order placed on `on` (validOrderBody() unless `body` says otherwise), paid at the Stripe stand-in, its payment_intent.succeeded applied. */
export async function paidStripeOrder(api: StripeApi, on: ProviderStack, body: OrderBody = validOrderBody()): Promise<{ orderId: string, intentId: string }> {
  const orderId = await placeOrder(on, body)
  expect(await settledJob(on.sql, orderId, 'payment.create_intent')).toMatchObject({ status: 'completed' })
  const [intent] = stripeIntentsOf(api, orderId)
  api.succeed(intent!.id)
  const delivered = await postStripeEvent(on.app.url, api.event(intent!.id, 'payment_intent.succeeded'))
  expect(delivered.status, delivered.text).toBe(200)
  await orderWhen(on, orderId, 'is paid', order => order.status === 'paid')
  return { orderId, intentId: intent!.id }
}
