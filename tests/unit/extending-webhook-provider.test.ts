import { describe, expect, it } from 'vitest'
import type { WebhookDelivery } from '../../server/webhooks/types'
import { type ApiPayment, createExamplepayApi } from '../fixtures/extending/payment-provider'
import { EXAMPLEPAY_SIGNATURE_HEADER, examplepayProvider, examplepaySignature } from '../fixtures/extending/webhook-provider'

/**
 * docs/extending.md's webhook provider: what a signed delivery verifies and parses to, what is
 * refused, and that each change of a payment is its own event while a redelivery is the same one.
 */

const secret = 'examplepay-endpoint-secret-0123456789'
const now = 1_800_000_000

/** A notification of the payment as examplepay's API holds it, signed at `seconds`. */
function delivery(payment: ApiPayment, seconds = now, signWith = secret): WebhookDelivery & { json: unknown } {
  const body = JSON.stringify({ payment })
  const headers: Record<string, string> = { [EXAMPLEPAY_SIGNATURE_HEADER]: examplepaySignature(signWith, body, seconds) }
  return { body: Buffer.from(body), header: name => headers[name.toLowerCase()], nowSeconds: now, json: JSON.parse(body) }
}

const eventOf = (received: ReturnType<typeof delivery>) => {
  expect(examplepayProvider.verify(received, secret)).toEqual({ ok: true })
  const parsed = examplepayProvider.parse(received.json, received)
  if (!parsed.ok) throw new Error(parsed.reason)
  return parsed.event
}

describe('the example webhook provider (examplepay)', () => {
  const api = createExamplepayApi()
  const payment = api.createPayment('order:ord_1:payment', { reference: 'ord_1', amount: 15000000, currency: 'IDR' })

  it('verifies a signed delivery and parses it to a PaymentEvent in the app\'s units', () => {
    expect(eventOf(delivery({ ...payment, status: 'succeeded' }))).toEqual({
      eventId: `${payment.id}:succeeded:0`, type: 'payment.succeeded', orderId: 'ord_1', paymentId: payment.id, amount: 150000, currency: 'IDR',
    })
  })

  it('refuses another secret\'s signature, a changed body, no signature and a stale timestamp', () => {
    const signed = delivery({ ...payment })
    expect(examplepayProvider.verify(delivery({ ...payment }, now, 'another-secret-0123456789abcdef'), secret)).toMatchObject({ ok: false, reason: 'v1 does not match' })
    expect(examplepayProvider.verify({ ...signed, body: Buffer.from(signed.body.toString().replace('15000000', '15000001')) }, secret)).toMatchObject({ ok: false })
    expect(examplepayProvider.verify({ ...signed, header: () => undefined }, secret)).toMatchObject({ ok: false })
    expect(examplepayProvider.verify(delivery({ ...payment }, now - 301), secret)).toMatchObject({ ok: false, reason: expect.stringContaining('301 s old') })
  })

  it('gives each successive notification its own event id, and a redelivery the same one', () => {
    const fresh = api.createPayment('order:ord_2:payment', { reference: 'ord_2', amount: 15000000, currency: 'IDR' })
    const states: ApiPayment[] = [{ ...fresh }]
    api.pay(fresh.id)
    states.push({ ...fresh })
    for (const key of ['refund:re_1', 'refund:re_2']) {
      api.refund(key, { paymentId: fresh.id, amount: 3000000 })
      states.push({ ...fresh })
    }
    const events = states.map(state => eventOf(delivery(state)))
    expect(events.map(event => event.type)).toEqual(['payment.updated', 'payment.succeeded', 'payment.refunded', 'payment.refunded'])
    expect(new Set(events.map(event => event.eventId)).size).toBe(4)
    // payment.refunded carries the total refunded so far.
    expect(events.slice(2).map(event => event.amount)).toEqual([30000, 60000])
    expect(eventOf(delivery(states[3]!, now + 60)).eventId).toBe(events[3]!.eventId)
  })

  it('says why a verified body is not understood', () => {
    const parsed = examplepayProvider.parse({ payment: { ...payment, status: 'disputed' } }, delivery({ ...payment }))
    expect(parsed).toMatchObject({ ok: false, reason: expect.stringContaining('payment.status') })
  })
})
