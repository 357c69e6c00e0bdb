import { beforeEach, describe, expect, it } from 'vitest'
import { paymentIdempotencyKey, refundIdempotencyKey } from '../../server/payments/keys'
import { PaymentRefused, type PaymentRequest, ProviderUnavailable, type RefundRequest } from '../../server/payments/types'
import { createExamplepayApi, createExamplepayProvider, type ExamplepayApi, ExamplepayError, type ExamplepayProvider } from '../fixtures/extending/payment-provider'
import { failureOf } from '../support/failure'

/**
 * docs/extending.md's payment provider: every call the worker makes, each repeated under its key
 * as a job that runs twice repeats it, and how the provider's failures reach the job runner.
 */

const signal = new AbortController().signal

const paymentRequest = (orderId: string, amount = 150000, currency = 'IDR'): PaymentRequest => ({
  orderId, amount, currency, paymentMethod: 'bank_transfer', customerEmail: 'shopper@example.com', idempotencyKey: paymentIdempotencyKey(orderId), firstAskedAt: new Date(),
})

const refundRequest = (paymentId: string, refundId: string, amount: number): RefundRequest => ({
  orderId: 'ord_1', paymentId, refundId, amount, currency: 'IDR', reason: null, idempotencyKey: refundIdempotencyKey(refundId), firstAskedAt: new Date(),
})

describe('the example payment provider (examplepay)', () => {
  let api: ExamplepayApi
  let provider: ExamplepayProvider

  beforeEach(() => {
    api = createExamplepayApi()
    provider = createExamplepayProvider(api)
  })

  it('creates one payment per key, in its own units: the same key gives the same payment back', async () => {
    const first = await provider.createPayment(paymentRequest('ord_1'), signal)
    const again = await provider.createPayment(paymentRequest('ord_1'), signal)
    const other = await provider.createPayment(paymentRequest('ord_2', 4200, 'USD'), signal)
    expect(again).toEqual(first)
    expect(first.nextAction).toEqual({ type: 'examplepay_redirect', url: `https://pay.examplepay.test/${first.id}` })
    expect(other.id).not.toBe(first.id)
    // Whole rupiah become hundredths at examplepay; USD cents stay cents.
    expect([...api.payments.values()].map(({ reference, amount }) => [reference, amount])).toEqual([['ord_1', 15000000], ['ord_2', 4200]])
  })

  it('reads a payment as the app counts it; undefined for one it does not have', async () => {
    const { id } = await provider.createPayment(paymentRequest('ord_1'), signal)
    expect(await provider.readPayment({ orderId: 'ord_1', paymentId: id }, signal)).toMatchObject({ type: 'payment.updated', providerStatus: 'pending', amount: 150000, currency: 'IDR' })
    api.pay(id)
    expect(await provider.readPayment({ orderId: 'ord_1', paymentId: id }, signal)).toMatchObject({ type: 'payment.succeeded', amount: 150000, refundedAmount: 0 })
    expect(await provider.readPayment({ orderId: 'ord_1', paymentId: 'xp_missing' }, signal)).toBeUndefined()
  })

  it('refunds once per key, and refuses for good what cannot be refunded', async () => {
    const { id } = await provider.createPayment(paymentRequest('ord_1'), signal)
    expect(await failureOf(provider.refundPayment(refundRequest(id, 're_early', 1000), signal))).toBeInstanceOf(PaymentRefused)
    api.pay(id)
    const refund = await provider.refundPayment(refundRequest(id, 're_1', 60000), signal)
    expect(await provider.refundPayment(refundRequest(id, 're_1', 60000), signal)).toEqual(refund)
    expect(refund).toMatchObject({ status: 'succeeded' })
    expect(await provider.readPayment({ orderId: 'ord_1', paymentId: id }, signal)).toMatchObject({ type: 'payment.refunded', refundedAmount: 60000 })
    expect(await provider.readRefund({ orderId: 'ord_1', paymentId: id, refundId: 're_1', providerRefundId: refund.id }, signal)).toEqual(refund)
    const tooMuch = await failureOf(provider.refundPayment(refundRequest(id, 're_2', 100000), signal))
    expect(tooMuch).toBeInstanceOf(PaymentRefused)
    expect((tooMuch as PaymentRefused).refusal.code).toBe('amount_too_large')
  })

  it('cancels an unpaid payment, and says when it was paid first', async () => {
    const unpaid = await provider.createPayment(paymentRequest('ord_1'), signal)
    const paid = await provider.createPayment(paymentRequest('ord_2'), signal)
    api.pay(paid.id)
    expect(await provider.cancelPayment({ orderId: 'ord_1', paymentId: unpaid.id }, signal)).toBe('canceled')
    expect(await provider.cancelPayment({ orderId: 'ord_1', paymentId: unpaid.id }, signal)).toBe('canceled')
    expect(await provider.cancelPayment({ orderId: 'ord_2', paymentId: paid.id }, signal)).toBe('succeeded')
  })

  it('turns an outage into ProviderUnavailable (with Retry-After) and a refusal into PaymentRefused', async () => {
    const outages = [new ExamplepayError(503, 'unavailable', 'down', '3'), new ExamplepayError(undefined, 'connection', 'socket hang up'), new ExamplepayError(401, 'key_revoked', 'rotating')]
    for (const outage of outages) {
      api.failNext(outage)
      expect(await failureOf(provider.createPayment(paymentRequest('ord_1'), signal))).toBeInstanceOf(ProviderUnavailable)
    }
    api.failNext(new ExamplepayError(429, 'rate_limited', 'slow down', '3'))
    expect(await failureOf(provider.createPayment(paymentRequest('ord_1'), signal))).toMatchObject({ retryAfterMs: 3000 })
    api.failNext(new ExamplepayError(402, 'card_declined', 'declined by the issuer'))
    expect(await failureOf(provider.createPayment(paymentRequest('ord_1'), signal))).toMatchObject({ refusal: { code: 'card_declined', providerMessage: 'declined by the issuer' } })
    // After the failures, the key still makes exactly one payment.
    await provider.createPayment(paymentRequest('ord_1'), signal)
    expect(api.payments.size).toBe(1)
  })
})
