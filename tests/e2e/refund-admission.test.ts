import { randomUUID } from 'node:crypto'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openDatabase, transaction } from '@idempotent-checkout/db-kit'
import { insertRefund, lockOrder } from '../../server/orders/payment-state'
import { type AppProcess, fastJobsEnv, startApp, stopAll } from '../support/app'
import { createTenant, request, type TestResponse } from '../support/http'
import { opsRequest } from '../support/ops'
import { expectCreatedRefund, expectProblem, newIdempotencyKey, postOrder, type TenantCredentials, validOrderBody } from '../support/orders'
import { testMigrations } from '../support/migrations'
import { pollUntil } from '../support/poll'
import { appDatabase } from '../support/postgres-topology'
import {
  getOrder, orderWhen, paidStripeOrder, placeOrder, postRefund, type ProviderStack, settledRefundJob, startProviderStack, stripeEnv,
  stripeRefundCalls, withStripeStack,
} from '../support/providers'
import { createTestDatabase, describeWithServices, redisUrl } from '../support/services'
import type { StripeApi } from '../support/stripe-api'

// Refund admission against what the provider can take, the refund API's contract, and what one
// checkout session, a tenant and an operator each read. Against the built app on Postgres and
// Redis, with the Stripe stand-in or mockpay.

const newKey = () => `refund-${randomUUID()}`

async function refundRows(sql: postgres.Sql, orderId: string): Promise<Array<{ amount: number, status: string }>> {
  return sql<Array<{ amount: number, status: string }>>`select amount::int as amount, status from refunds where order_id = ${orderId} order by created_at, id`
}

async function storedKeys(sql: postgres.Sql, key: string): Promise<number> {
  const [row] = await sql<Array<{ n: number }>>`select count(*)::int as n from idempotency_records where key = ${key}`
  return row!.n
}

describeWithServices('refund admission, the refund contract and session isolation', ['postgres', 'redis'], () => {
  afterAll(async () => {
    await stopAll()
  })

  describe('Stripe', () => {
    let api: StripeApi
    let stack: ProviderStack
    withStripeStack('refund_admission_stripe', fastJobsEnv, (started, startedStack) => {
      api = started
      stack = startedStack
    })

    /** An order in `currency` for `amount` (app units), paid at the stand-in and applied. */
    const paidOrder = (currency: string, amount: number) =>
      paidStripeOrder(api, stack, validOrderBody({ currency, amount, paymentMethod: 'card', items: [{ sku: 'SKU-1', quantity: 1, unitPrice: amount }] }))

    /**
     * A refund of `amount` under `key` refused 400 validation-failed: not a multiple of `step` in the
     * currency's units, its detail naming each of `detailParts`; no refund row and no stored key.
     */
    async function expectAmountRefused(orderId: string, key: string, amount: number, step: number, detailParts: string[]): Promise<void> {
      const refused = await postRefund(stack, orderId, key, { amount })
      expectProblem(refused, 'validation-failed')
      expect(refused.json.errors).toEqual([{ path: 'amount', message: expect.stringContaining(`multiple of ${step}`) }])
      for (const part of detailParts) expect(refused.json.detail).toContain(part)
      expect(await refundRows(stack.sql, orderId)).toEqual([])
      expect(await storedKeys(stack.sql, key)).toBe(0)
    }

    it('refuses an MGA refund of 150 (Stripe refunds whole ariary): 400 validation-failed naming the step, nothing stored; the same key then takes 100, and the rest (9,800) is admitted and refunded', async () => {
      const { orderId, intentId } = await paidOrder('MGA', 10_000)
      const key = newKey()
      await expectAmountRefused(orderId, key, 150, 100, ['Stripe refunds MGA to whole units', '100 or 200'])

      const corrected = await postRefund(stack, orderId, key, { amount: 100 })
      expectCreatedRefund(corrected, { orderId, amount: 100, currency: 'MGA', key })
      expect(await settledRefundJob(stack.sql, corrected.json.id)).toMatchObject({ status: 'completed', attempt: 1, errors: [] })
      const restKey = newKey()
      const rest = await postRefund(stack, orderId, restKey)
      expectCreatedRefund(rest, { orderId, amount: 9_900, currency: 'MGA', key: restKey })
      expect(await settledRefundJob(stack.sql, rest.json.id)).toMatchObject({ status: 'completed', attempt: 1, errors: [] })
      // Stripe counts MGA in whole ariary: 100 hundredths are 1.
      expect(stripeRefundCalls(api, intentId).map(call => call.body.amount)).toEqual(['1', '99'])
      await orderWhen(stack, orderId, 'is refunded', order => order.status === 'refunded' && order.amountRefunded === 10_000)
    })

    it('refuses a KWD refund whose last digit is not 0 (Stripe charges KWD to 2 of its 3 decimals): 400 validation-failed, nothing stored', async () => {
      const { orderId } = await paidOrder('KWD', 5_120)
      const key = newKey()
      await expectAmountRefused(orderId, key, 1_235, 10, ['1.235 KWD', '1230 or 1240'])
      const admitted = await postRefund(stack, orderId, key, { amount: 1_230 })
      expectCreatedRefund(admitted, { orderId, amount: 1_230, currency: 'KWD', key })
    })

    it('answers a refund of a fully refunded order 409 refund-exceeds-remaining with remaining 0, stored and replayed', async () => {
      const { orderId } = await paidOrder('USD', 4_200)
      const all = await postRefund(stack, orderId, newKey())
      expect(all.status, all.text).toBe(201)
      await orderWhen(stack, orderId, 'is refunded', order => order.status === 'refunded')
      const key = newKey()
      const again = await postRefund(stack, orderId, key, { amount: 1 })
      expectProblem(again, 'refund-exceeds-remaining')
      expect(again.json).toMatchObject({ remaining: 0 })
      const replayed = await postRefund(stack, orderId, key, { amount: 1 })
      expect(replayed.status).toBe(409)
      expect(replayed.headers.get('idempotent-replayed')).toBe('true')
      expectProblem(await postRefund(stack, orderId, newKey()), 'refund-exceeds-remaining')
      expect(await refundRows(stack.sql, orderId)).toEqual([{ amount: 4_200, status: 'succeeded' }])
    })

    it('fails at once a refund admitted before amounts were checked that Stripe cannot pay back exactly (MGA 150): its job never asks Stripe, and the whole amount is free again', async () => {
      const { orderId, intentId } = await paidOrder('MGA', 10_000)
      // Written as admission wrote it before it checked amounts: the refund, its hold and its job in one transaction.
      const handle = await openDatabase({ ...appDatabase(stack.databaseUrl), pgliteDir: '', migrations: testMigrations, poolSize: 1 })
      let refundId: string
      try {
        refundId = await transaction(handle.db, async (tx) => {
          const order = await lockOrder(tx, orderId)
          return insertRefund(tx, order!, { amount: 150, status: 'pending', source: 'api', reason: null, providerRefundId: null })
        })
      }
      finally {
        await handle.close()
      }
      expect(await settledRefundJob(stack.sql, refundId)).toMatchObject({ status: 'completed', attempt: 1, errors: [] })
      expect(await stack.sql`select status, failure from refunds where id = ${refundId}`).toEqual([{
        status: 'failed',
        failure: 'amount_inexpressible: Stripe refunds MGA to whole units, so 150 (1.50 MGA) cannot be refunded exactly. Ask for a multiple of 100, such as 100 or 200, under the same Idempotency-Key.',
      }])
      expect(stripeRefundCalls(api, intentId)).toEqual([])
      const restKey = newKey()
      expectCreatedRefund(await postRefund(stack, orderId, restKey), { orderId, amount: 10_000, currency: 'MGA', key: restKey })
    })

    it('keeps order-not-refundable for an unpaid order', async () => {
      const orderId = await placeOrder(stack, validOrderBody({ currency: 'USD', amount: 4_200, paymentMethod: 'card', items: [{ sku: 'SKU-1', quantity: 1, unitPrice: 4_200 }] }))
      const refused = await postRefund(stack, orderId, newKey())
      expectProblem(refused, 'order-not-refundable')
      expect(refused.json.orderStatus).toBe('pending_payment')
    })

    describe('a provider error while the payment is asked for', () => {
      let wrongKey: ProviderStack
      beforeAll(async () => {
        wrongKey = await startProviderStack('refund_admission_wrong_key', { ...stripeEnv(api), ...fastJobsEnv, STRIPE_SECRET_KEY: 'sk_test_wrongkey000000001234' })
      })
      afterAll(async () => {
        await wrongKey?.close()
      })

      it('shows the tenant a stable code and a plain sentence, never Stripe\'s words; the ops console\'s view keeps them', async () => {
        const orderId = await placeOrder(wrongKey, validOrderBody({ currency: 'USD', amount: 4_200, paymentMethod: 'card', items: [{ sku: 'SKU-1', quantity: 1, unitPrice: 4_200 }] }))
        const order = await orderWhen(wrongKey, orderId, 'is retrying', order => order.payment?.status === 'retrying')
        expect(order.payment).toEqual({
          provider: 'stripe',
          id: null,
          nextAction: null,
          error: null,
          status: 'retrying',
          lastErrorCode: 'provider_unavailable',
          lastError: 'The payment provider has not answered yet. The payment is asked for again automatically; nothing was charged.',
          retryAt: expect.any(String),
        })
        const seen = await opsRequest(wrongKey.app.url, `/api/ops/orders/${orderId}`)
        expect(seen.status, seen.text).toBe(200)
        expect(seen.json.payment).toMatchObject({ status: 'retrying', lastErrorCode: 'provider_unavailable', providerMessage: expect.stringContaining('Invalid API Key provided: sk_test_') })
      })
    })
  })

  describe('mockpay and the demo checkout session', () => {
    let database: Awaited<ReturnType<typeof createTestDatabase>>
    let app: AppProcess
    let sql: postgres.Sql
    let tenant: TenantCredentials

    beforeAll(async () => {
      database = await createTestDatabase('refund_admission_demo')
      app = await startApp({ databaseUrl: database.url, redisUrl, label: 'refund-admission-demo', env: { ...fastJobsEnv, CHECKOUT_DEMO_ENABLED: 'true', MOCKPAY_ENABLED: 'true' } })
      sql = postgres(database.url, { max: 2, onnotice: () => {} })
      tenant = await createTenant(app.url, 'refund admission mockpay')
    })

    afterAll(async () => {
      await app?.stop()
      await sql?.end()
      await database?.drop()
    })

    /** A new checkout session's cookie pair, as the page gets it. */
    async function newSession(): Promise<string> {
      const started = await request(app.url, '/api/checkout/session')
      expect(started.status, started.text).toBe(200)
      const [cookie] = started.headers.getSetCookie().filter(header => header.startsWith('ic_checkout='))
      return cookie!.split(';')[0]!
    }

    const orderWith = (cookie: string, body: ReturnType<typeof validOrderBody>, key = newIdempotencyKey()) =>
      request(app.url, '/api/orders', { method: 'POST', headers: { 'idempotency-key': key, cookie }, body })
    const readWith = (cookie: string, path: string): Promise<TestResponse> => request(app.url, path, { headers: { cookie } })

    const mockpay = (intentId: string, action: 'confirm' | 'refund', body: unknown) =>
      request(app.url, `/api/mockpay/intents/${intentId}/${action}`, { method: 'POST', body })

    async function intentOf(read: () => Promise<TestResponse>, orderId: string): Promise<string> {
      let intentId: string | null = null
      await pollUntil(`order ${orderId} has a payment intent`, async () => {
        const fetched = await read()
        expect(fetched.status, fetched.text).toBe(200)
        intentId = fetched.json.paymentIntentId
        return intentId !== null
      })
      return intentId!
    }

    it('lets a session read only its own orders and refunds: another session gets 404 for the order and its refund', async () => {
      const mine = await newSession()
      const theirs = await newSession()
      const created = await orderWith(mine, validOrderBody({ customer: { email: 'shopper@example.com' } }))
      expect(created.status, created.text).toBe(201)
      const orderId: string = created.json.id
      const intentId = await intentOf(() => readWith(mine, `/api/orders/${orderId}`), orderId)
      expect((await mockpay(intentId, 'confirm', { outcome: 'succeed', chaos: { duplicates: 0, maxDelayMs: 0 } })).status).toBe(200)
      expect((await mockpay(intentId, 'refund', { amount: 50_000, chaos: { duplicates: 0, maxDelayMs: 0 } })).status).toBe(200)
      let refundId = ''
      await pollUntil('the dashboard refund is recorded', async () => {
        const [row] = await sql<Array<{ id: string }>>`select id from refunds where order_id = ${orderId}`
        refundId = row?.id ?? ''
        return refundId !== ''
      })

      const own = await readWith(mine, `/api/orders/${orderId}`)
      expect(own.status, own.text).toBe(200)
      expect(own.json).toMatchObject({ id: orderId, customer: { email: 'shopper@example.com' }, payment: { nextAction: { type: 'mockpay' } } })
      expect((await readWith(mine, `/api/orders/${orderId}/refunds/${refundId}`)).status).toBe(200)

      const order = await readWith(theirs, `/api/orders/${orderId}`)
      expectProblem(order, 'not-found')
      expect(order.text).not.toContain('shopper@example.com')
      const refund = await readWith(theirs, `/api/orders/${orderId}/refunds/${refundId}`)
      expectProblem(refund, 'not-found')
      expect(refund.text).not.toContain('50000')
    })

    it('answers another session\'s ordered cart 409 cart-already-ordered without naming its order; the placing session is told its own', async () => {
      const mine = await newSession()
      const theirs = await newSession()
      const body = validOrderBody()
      const created = await orderWith(mine, body)
      expect(created.status, created.text).toBe(201)
      const orderId: string = created.json.id

      const other = await orderWith(theirs, body)
      expectProblem(other, 'cart-already-ordered')
      expect(other.json.orderId).toBeUndefined()
      expect(other.text).not.toContain(orderId)

      const own = await orderWith(mine, body)
      expectProblem(own, 'cart-already-ordered')
      expect(own.json.orderId).toBe(orderId)
    })

    it('bounds reorder: 40 dashboard refunds with reorder on schedule 1 + Σ(1 + min(3, earlier)) = 158 deliveries, not one per earlier event', async () => {
      const created = await postOrder(app.url, { secretKey: tenant.secretKey, key: newIdempotencyKey(), body: validOrderBody({ amount: 400_000, items: [{ sku: 'SKU-1', quantity: 1, unitPrice: 400_000 }] }) })
      expect(created.status, created.text).toBe(201)
      const orderId: string = created.json.id
      const intentId = await intentOf(() => getOrder({ app, tenant }, orderId), orderId)
      const chaos = { duplicates: 0, maxDelayMs: 0, reorder: true }
      const scheduled = [(await mockpay(intentId, 'confirm', { outcome: 'succeed', chaos })).json.deliveriesScheduled]
      for (let refund = 0; refund < 40; refund++) {
        const refunded = await mockpay(intentId, 'refund', { amount: 10_000, chaos })
        expect(refunded.status, refunded.text).toBe(200)
        scheduled.push(refunded.json.deliveriesScheduled)
      }
      expect(scheduled).toEqual([1, 2, 3, ...Array.from({ length: 38 }, () => 4)])
      const [jobs] = await sql<Array<{ n: number }>>`select count(*)::int as n from jobs where kind = 'mockpay.deliver' and payload->>'paymentId' = ${intentId}`
      expect(jobs!.n).toBe(158)
      await orderWhen({ app, tenant }, orderId, 'is refunded', order => order.status === 'refunded' && order.amountRefunded === 400_000, 60_000)
    })
  })
})
