import Stripe from 'stripe'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { toStripeAmount } from '../../server/payments/currencies'
import { createStripeProvider } from '../../server/payments/stripe'
import { type PaymentProvider, type PaymentRequest, ProviderUnavailable, type RefundRequest } from '../../server/payments/types'
import { type StripeApi, startStripeApi } from '../support/stripe-api'

/**
 * The app's Stripe adapter (server/payments/stripe.ts) asking the Stripe stand-in for refunds: a
 * 500 that Stripe keeps under the refund's key, and a look-up that pages through every refund of
 * the payment once the key may be forgotten.
 */

const secretKey = 'sk_test_adapter_0123456789abcdef'
const DAY_MS = 24 * 60 * 60 * 1000

describe('the Stripe adapter\'s refunds, against the stand-in', () => {
  let api: StripeApi
  let stripe: Stripe
  let provider: PaymentProvider
  const signal = new AbortController().signal

  beforeAll(async () => {
    api = await startStripeApi({ secretKey })
    stripe = new Stripe(secretKey, { host: '127.0.0.1', port: api.port, protocol: 'http', maxNetworkRetries: 0 })
    provider = createStripeProvider({ STRIPE_SECRET_KEY: secretKey, STRIPE_API_BASE: api.url, PAYMENT_PROVIDER_TIMEOUT_MS: 5_000 })
  })
  afterAll(() => api.close())
  beforeEach(() => api.reset())

  /** A paid USD intent of `amount` cents for order `orderId`. */
  async function paidIntent(orderId: string, amount = 150_00): Promise<string> {
    const intent = await stripe.paymentIntents.create({ amount, currency: 'usd', metadata: { order_id: orderId } })
    api.succeed(intent.id)
    return intent.id
  }

  const refundRequest = (paymentId: string, refundId: string, overrides: Partial<RefundRequest> = {}): RefundRequest => ({
    orderId: 'ord_adapter', paymentId, refundId, amount: 40_00, currency: 'USD', reason: null, idempotencyKey: `refund:${refundId}`, firstAskedAt: new Date(), ...overrides,
  })

  const refundKeysAsked = () => api.calls.filter(call => call.method === 'POST' && call.path === '/v1/refunds').map(call => [call.idempotencyKey, call.answered])

  it('a 500 Stripe keeps under the refund\'s key, nothing made: the job\'s retry finds no refund by its metadata and asks once more under refund:<id>:2; one refund', async () => {
    const intentId = await paidIntent('ord_adapter')
    api.script.push({ match: 'refund', fault: { kind: 'stored-error', status: 500 } })
    const first = await provider.refundPayment(refundRequest(intentId, 're_app_stored'), signal).catch((error: unknown) => error)
    expect(first).toBeInstanceOf(ProviderUnavailable)
    expect(api.createdRefunds()).toEqual([])

    // The retry, as the job runner makes it: the key answers its stored 500 again.
    const refund = await provider.refundPayment(refundRequest(intentId, 're_app_stored'), signal)
    expect(refund).toMatchObject({ status: 'succeeded', id: expect.stringMatching(/^re_/) })
    expect(refundKeysAsked()).toEqual([['refund:re_app_stored', 500], ['refund:re_app_stored', 500], ['refund:re_app_stored:2', 200]])
    expect(api.createdRefunds()).toEqual([expect.objectContaining({ idempotencyKey: 'refund:re_app_stored:2', refund: expect.objectContaining({ id: refund.id, amount: 40_00, metadata: expect.objectContaining({ refund_id: 're_app_stored' }) }) })])

    // Every later run walks the same keys and gets the same refund back, making none.
    const again = await provider.refundPayment(refundRequest(intentId, 're_app_stored'), signal)
    expect(again.id).toBe(refund.id)
    expect(api.createdRefunds()).toHaveLength(1)
    expect(api.refundedTotal(intentId)).toBe(40_00)
  })

  it('a 500 Stripe keeps after it made the refund: the look-up finds it by its metadata, and nothing more is asked', async () => {
    const intentId = await paidIntent('ord_adapter')
    api.script.push({ match: 'refund', fault: { kind: 'stored-error', status: 500, performed: true } })
    await expect(provider.refundPayment(refundRequest(intentId, 're_app_made'), signal)).rejects.toBeInstanceOf(ProviderUnavailable)
    const [made] = api.createdRefunds()
    expect(made).toMatchObject({ idempotencyKey: 'refund:re_app_made', refund: { metadata: { refund_id: 're_app_made' } } })

    const found = await provider.refundPayment(refundRequest(intentId, 're_app_made'), signal)
    expect(found).toMatchObject({ id: made!.refund.id, status: 'succeeded' })
    expect(refundKeysAsked()).toEqual([['refund:re_app_made', 500], ['refund:re_app_made', 500]])
    expect(api.createdRefunds()).toHaveLength(1)
  })

  it('a day after the first ask, finds the refund among more than 100 of the payment by paging, and asks for none', async () => {
    const intentId = await paidIntent('ord_adapter', 1_000_00)
    const ours = await stripe.refunds.create({ payment_intent: intentId, amount: 1_00, metadata: { order_id: 'ord_adapter', refund_id: 're_app_oldest' } }, { idempotencyKey: 'refund:re_app_oldest' })
    for (let index = 0; index < 120; index++) api.dashboardRefund(intentId, 1_00)
    // Stripe has forgotten the key: asking under it again would refund again.
    api.forgetIdempotencyKeys()
    api.calls.length = 0

    const found = await provider.refundPayment(refundRequest(intentId, 're_app_oldest', { amount: 1_00, firstAskedAt: new Date(Date.now() - DAY_MS) }), signal)
    expect(found).toMatchObject({ id: ours.id, status: 'succeeded' })
    expect(refundKeysAsked()).toEqual([])
    const pages = api.calls.filter(call => call.method === 'GET' && call.path === '/v1/refunds')
    expect(pages.map(call => [call.query.limit, call.query.starting_after === undefined ? 'first' : 'next', call.answered])).toEqual([['100', 'first', 200], ['100', 'next', 200]])
    expect(api.createdRefunds()).toHaveLength(121)
  })

  it('reads a refund Stripe canceled as failed, and the payment\'s amount_refunded in the order\'s units (IDR: Stripe\'s hundredths), pending refunds counted', async () => {
    const intent = await stripe.paymentIntents.create({ amount: toStripeAmount(150_000, 'IDR'), currency: 'idr', metadata: { order_id: 'ord_idr' } })
    api.succeed(intent.id)
    api.pendRefunds(2)
    const canceled = await provider.refundPayment(refundRequest(intent.id, 're_app_canceled', { currency: 'IDR', amount: 40_000 }), signal)
    const pending = await provider.refundPayment(refundRequest(intent.id, 're_app_pending', { currency: 'IDR', amount: 25_000 }), signal)
    expect([canceled.status, pending.status]).toEqual(['pending', 'pending'])
    expect(api.refunds.get(canceled.id)!.amount).toBe(40_000 * 100)
    expect(await provider.readPayment({ orderId: 'ord_idr', paymentId: intent.id }, signal)).toMatchObject({ type: 'payment.succeeded', amount: 150_000, currency: 'IDR', refundedAmount: 65_000 })

    api.settleRefund(canceled.id, 'canceled')
    const read = { orderId: 'ord_idr', paymentId: intent.id, refundId: 're_app_canceled', providerRefundId: canceled.id }
    expect(await provider.readRefund(read, signal)).toMatchObject({ id: canceled.id, status: 'failed', answer: { status: 'canceled' } })
    expect(await provider.readPayment({ orderId: 'ord_idr', paymentId: intent.id }, signal)).toMatchObject({ refundedAmount: 25_000 })
    expect(await provider.readRefund({ ...read, providerRefundId: 're_missing' }, signal)).toBeUndefined()
  })

  const paymentRequest = (orderId: string): PaymentRequest => ({
    orderId, amount: 150_000, currency: 'IDR', paymentMethod: 'card', customerEmail: 'shopper@example.com', idempotencyKey: `order:${orderId}:payment`, firstAskedAt: new Date(),
  })
  const intentsOf = (orderId: string) => [...api.intents.values()].filter(intent => intent.metadata.order_id === orderId)

  it.each([
    ['nothing made: asked again under order:<id>:payment:2', false],
    ['the intent made: found among the intents created since the first ask, every page', true],
  ])('a 500 Stripe keeps under the payment\'s key, %s; one PaymentIntent', async (_, performed) => {
    // Others' intents made meanwhile fill more than a page.
    for (let index = 0; index < 3; index++) await stripe.paymentIntents.create({ amount: 100, currency: 'usd', metadata: { order_id: `ord_other_${index}` } })
    api.script.push({ match: 'create', fault: { kind: 'stored-error', status: 500, performed } })
    await expect(provider.createPayment(paymentRequest('ord_kept'), signal)).rejects.toBeInstanceOf(ProviderUnavailable)
    for (let index = 3; index < 150; index++) await stripe.paymentIntents.create({ amount: 100, currency: 'usd', metadata: { order_id: `ord_other_${index}` } })
    api.calls.length = 0

    const created = await provider.createPayment(paymentRequest('ord_kept'), signal)
    const [intent, ...more] = intentsOf('ord_kept')
    expect(more).toEqual([])
    expect(created).toEqual({ id: intent!.id, nextAction: { type: 'stripe_client_secret', clientSecret: intent!.client_secret } })
    const asked = api.calls.map(call => [call.method, call.path, call.idempotencyKey ?? call.query.starting_after?.slice(0, 3) ?? null, call.answered])
    expect(asked).toEqual([
      ['POST', '/v1/payment_intents', 'order:ord_kept:payment', 500],
      ['GET', '/v1/payment_intents', null, 200],
      ['GET', '/v1/payment_intents', 'pi_', 200],
      ...performed ? [] : [['POST', '/v1/payment_intents', 'order:ord_kept:payment:2', 200]],
    ])
    expect(await provider.createPayment(paymentRequest('ord_kept'), signal)).toEqual(created)
    expect(intentsOf('ord_kept')).toHaveLength(1)
  })
})
