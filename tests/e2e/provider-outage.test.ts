import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest'
import { paymentIdempotencyKey } from '../../server/payments'
import { fastJobsEnv, stopAll } from '../support/app'
import { request } from '../support/http'
import { opsRequest } from '../support/ops'
import { validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import {
  clearOfScheduledReconcile, getOrder, orderWhen, placeOrder, type ProviderStack, runReconcile, settledJob, startProviderStack, stripeCreates, stripeEnv, stripeIntentsOf,
  stripeSecretKey, usdOrderBody,
} from '../support/providers'
import { describeWithServices } from '../support/services'
import { type ScriptedFault, type StripeApi, startStripeApi } from '../support/stripe-api'

// A payment provider that stops answering
// (docs/payments-and-refunds.md#while-the-provider-is-down): the Stripe stand-in answers 503, or
// drops every connection, while orders are placed. Each order says its payment is retrying (the
// last error, when it is asked next), /api/ready stays ready and tells an operator which provider
// is failing, and so does the payment_provider_failing gauge; once the stand-in answers again every
// order gets its one PaymentIntent with no operator's act — also an order whose calls ran out of
// attempts meanwhile, which reconciliation asks for again.

const CREATE = 'payment.create_intent'
const AFTER_ZERO = { PAYMENT_RECONCILE_AFTER_SECONDS: '0', WORKER_ENABLED: 'false' }
const unavailable: ScriptedFault = { match: 'any', fault: { kind: 'status', status: 503 }, sticky: true }
const unreachable: ScriptedFault = { match: 'any', fault: { kind: 'drop-before' }, sticky: true }

/** What the shop and the shopper read while the provider does not answer: never the provider's own words. */
const RETRYING = { lastErrorCode: 'provider_unavailable', lastError: 'The payment provider has not answered yet. The payment is asked for again automatically; nothing was charged.' }

/** The order's payment as the ops console reads it, with the provider's words (`providerMessage`). */
async function paymentForOperators(stack: ProviderStack, orderId: string): Promise<any> {
  const seen = await opsRequest(stack.app.url, `/api/ops/orders/${orderId}`)
  expect(seen.status, seen.text).toBe(200)
  return seen.json.payment
}

/** GET /api/ready with the ops token: its `payments` detail (HTTP 200 asserted). */
async function paymentsReadiness(stack: ProviderStack): Promise<any> {
  const ready = await opsRequest(stack.app.url, '/api/ready')
  expect(ready.status, ready.text).toBe(200)
  return ready.json.payments
}

/** The payment_provider_failing gauge for Stripe, as /api/metrics shows it. */
async function failingGauge(stack: ProviderStack): Promise<string | undefined> {
  const metrics = await opsRequest(stack.app.url, '/api/metrics')
  expect(metrics.status, metrics.text).toBe(200)
  return /^payment_provider_failing\{provider="stripe"\} (\S+)$/m.exec(metrics.text)?.[1]
}

/** The order's payment once it is ready: its one PaymentIntent at the stand-in, every create call under the order's key. */
async function expectPaymentCreated(api: StripeApi, stack: ProviderStack, orderId: string) {
  const order = await orderWhen(stack, orderId, 'has its payment', order => order.payment?.status === 'ready')
  const intents = stripeIntentsOf(api, orderId)
  expect(intents).toHaveLength(1)
  expect(order).toMatchObject({ status: 'pending_payment', paymentIntentId: intents[0]!.id })
  expect(order.payment).toEqual({
    provider: 'stripe', id: intents[0]!.id, nextAction: { type: 'stripe_client_secret', clientSecret: intents[0]!.client_secret }, error: null, status: 'ready',
  })
  const creates = stripeCreates(api, orderId)
  expect(new Set(creates.map(call => call.idempotencyKey))).toEqual(new Set([paymentIdempotencyKey(orderId)]))
  expect(creates.at(-1)!.answered).toBe(200)
  return creates
}

describeWithServices('a Stripe outage, and Stripe back: every order gets its payment without an operator', ['postgres', 'redis'], () => {
  let api: StripeApi

  beforeAll(async () => {
    api = await startStripeApi({ secretKey: stripeSecretKey })
  })

  afterAll(async () => {
    await stopAll()
    await api?.close()
  })

  beforeEach(() => {
    api.calls.length = 0
    api.script.length = 0
  })

  it('503, then connections dropped: the orders say retrying with the last error and the next try, /api/ready stays 200 and says stripe is failing, the gauge is 1; back, each gets one intent and the gauge is 0', async () => {
    // Two seconds at most between tries: twenty attempts outlast the outage by far.
    const stack = await startProviderStack('outage_stripe', { ...stripeEnv(api), ...fastJobsEnv, JOB_BACKOFF_CAP_MS: '2000' })
    try {
      api.script.push(unavailable)
      const orderIds = await Promise.all([usdOrderBody(), usdOrderBody(), validOrderBody()].map(body => placeOrder(stack, body)))
      for (const orderId of orderIds) {
        const order = await orderWhen(stack, orderId, 'says its payment is retrying', order => order.payment?.status === 'retrying')
        expect(order).toMatchObject({ status: 'pending_payment', paymentIntentId: null })
        expect(order.payment).toEqual({ provider: 'stripe', id: null, nextAction: null, error: null, status: 'retrying', ...RETRYING, retryAt: expect.any(String) })
        expect((await paymentForOperators(stack, orderId)).providerMessage).toContain('Stripe api_error (HTTP 503): ')
        expect(new Date(order.payment.retryAt).toISOString()).toBe(order.payment.retryAt)
      }
      const plain = await request(stack.app.url, '/api/ready')
      expect(plain.status, plain.text).toBe(200)
      expect(plain.json.payments).toBeUndefined()
      let payments: any
      await pollUntil('/api/ready says a call waits for its retry', async () => (payments = await paymentsReadiness(stack)).callsWaitingForRetry > 0)
      expect(payments).toEqual({
        provider: 'stripe', failing: true, callsWaitingForRetry: expect.any(Number), callsOutOfAttempts: 0,
        lastError: { kind: CREATE, error: expect.stringContaining('Stripe api_error (HTTP 503): '), at: expect.any(String) },
      })
      expect(payments.callsWaitingForRetry).toBeLessThanOrEqual(orderIds.length)
      expect(await failingGauge(stack)).toBe('1')

      // Stripe unreachable now: the orders say so.
      api.script.splice(0, 1, unreachable)
      for (const orderId of orderIds) {
        await pollUntil(`the ops view of ${orderId} says Stripe is unreachable`, async () => (await paymentForOperators(stack, orderId))?.providerMessage?.includes('StripeConnectionError') === true)
        expect((await getOrder(stack, orderId)).json.payment).toMatchObject({ status: 'retrying', ...RETRYING, retryAt: expect.any(String) })
      }
      expect(await failingGauge(stack)).toBe('1')
      expect(stripeIntentsOf(api, orderIds[0]!)).toEqual([])

      // Back: nothing but the retries already scheduled.
      api.script.length = 0
      for (const orderId of orderIds) {
        const creates = await expectPaymentCreated(api, stack, orderId)
        expect(creates.slice(0, -1).every(call => call.answered === 503 || call.answered === 'dropped')).toBe(true)
        const job = await settledJob(stack.sql, orderId, CREATE)
        expect(job.status).toBe('completed')
        expect(job.attempt).toBeGreaterThanOrEqual(3)
        expect(job.attempt).toBe(job.errors.length + 1)
      }
      expect(await paymentsReadiness(stack)).toEqual({ provider: 'stripe', failing: false, callsWaitingForRetry: 0, callsOutOfAttempts: 0 })
      expect(await failingGauge(stack)).toBe('0')
      // The only operator's act was creating the tenant.
      expect(await stack.sql`select action from operator_actions`).toEqual([{ action: 'tenant.created' }])
    }
    finally {
      await stack.close()
    }
  })

  it('down past every attempt: the create job dead-letters and the order says so (no next try); back, a reconciliation run asks again and the order gets its one intent', async () => {
    const stack = await startProviderStack('outage_stripe_dead', { ...stripeEnv(api), ...fastJobsEnv, JOB_BACKOFF_BASE_MS: '1', JOB_BACKOFF_CAP_MS: '5' })
    try {
      api.script.push(unavailable)
      const orderId = await placeOrder(stack, usdOrderBody())
      const dead = await settledJob(stack.sql, orderId, CREATE, 60_000)
      expect(dead).toMatchObject({ status: 'dead_letter', attempt: 20 })
      expect(dead.errors.map(entry => entry.errorClass)).toEqual(Array.from({ length: 20 }, () => 'retryable'))
      expect(stripeCreates(api, orderId).map(call => call.answered)).toEqual(Array.from({ length: 20 }, () => 503))

      const waiting = (await orderWhen(stack, orderId, 'says its payment is retrying', order => order.payment?.status === 'retrying')).payment
      expect(waiting).toEqual({ provider: 'stripe', id: null, nextAction: null, error: null, status: 'retrying', ...RETRYING })
      expect(await paymentsReadiness(stack)).toEqual({
        provider: 'stripe', failing: true, callsWaitingForRetry: 0, callsOutOfAttempts: 1,
        lastError: { kind: CREATE, error: expect.stringContaining('Stripe api_error (HTTP 503): '), at: expect.any(String) },
      })

      api.script.length = 0
      const reconciler = await stack.startInstance('outage-reconciler', AFTER_ZERO)
      try {
        await clearOfScheduledReconcile(8)
        expect((await runReconcile(reconciler.url)).result.counts).toMatchObject({ paymentsAskedAgain: 1 })
        const creates = await expectPaymentCreated(api, stack, orderId)
        expect(creates.map(call => call.answered)).toEqual([...Array.from({ length: 20 }, () => 503), 200])
        const job = await settledJob(stack.sql, orderId, CREATE)
        // Redriven with a fresh set of attempts; its history stays.
        expect(job).toMatchObject({ id: dead.id, status: 'completed', attempt: 1, lastError: null })
        expect(job.errors).toHaveLength(20)
        expect(await paymentsReadiness(stack)).toEqual({ provider: 'stripe', failing: false, callsWaitingForRetry: 0, callsOutOfAttempts: 0 })
        expect((await runReconcile(reconciler.url)).result.counts).toMatchObject({ paymentsAskedAgain: 0 })
      }
      finally {
        await reconciler.stop()
      }
    }
    finally {
      await stack.close()
    }
  })
})
