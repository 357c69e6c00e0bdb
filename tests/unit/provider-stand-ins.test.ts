import { createHash } from 'node:crypto'
import type http from 'node:http'
import midtransClient from 'midtrans-client'
import Stripe from 'stripe'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { jsonAnswer, readBody, serve } from '../../scripts/stand-ins/common'
import { parseConfig } from '../../server/config'
import { midtransProvider } from '../../server/webhooks/providers/midtrans'
import { stripeProvider } from '../../server/webhooks/providers/stripe'
import type { WebhookDelivery } from '../../server/webhooks/types'
import { type MidtransApi, startMidtransApi } from '../support/midtrans-api'
import { pollUntil } from '../support/poll'
import { projectRoot, spawnManaged } from '../support/processes'
import { StandInRefusal, STRIPE_CONTROLS, type StripeApi, startStripeApi, stripeSignature } from '../support/stripe-api'
import { failureOf } from '../support/failure'

/**
 * The provider stand-ins, driven by the official SDKs: what the clients send is what the stand-ins
 * parse, and what the stand-ins answer (successes, each error shape, lost responses) is what the
 * clients turn into the results and error classes the app handles.
 */

const secretKey = 'sk_test_standin_0123456789abcdef'
const serverKey = 'SB-Mid-server-standin0123456789'

const deliveryOf = (body: string, headers: Record<string, string> = {}): WebhookDelivery => ({
  body: Buffer.from(body),
  header: name => headers[name.toLowerCase()],
  nowSeconds: Math.floor(Date.now() / 1000),
})

/** An endpoint that takes every webhook with 200 and keeps it. */
async function webhookReceiver() {
  const received: Array<{ headers: http.IncomingHttpHeaders, body: string }> = []
  const served = await serve(async (req, res) => {
    received.push({ headers: req.headers, body: await readBody(req) })
    res.writeHead(200).end()
  }, () => jsonAnswer(500, '{}'))
  return { url: `http://127.0.0.1:${served.port}/webhooks`, received, close: served.close }
}

describe('Stripe stand-in, through the official stripe client', () => {
  let api: StripeApi
  let stripe: Stripe
  const params = (orderId: string, amount = 1500): Stripe.PaymentIntentCreateParams => ({
    amount,
    currency: 'USD',
    metadata: { order_id: orderId },
    receipt_email: 'shopper@example.com',
    automatic_payment_methods: { enabled: true },
  })

  beforeAll(async () => {
    api = await startStripeApi({ secretKey })
    stripe = new Stripe(secretKey, { host: '127.0.0.1', port: api.port, protocol: 'http', maxNetworkRetries: 0, timeout: 3_000 })
  })
  afterAll(() => api.close())
  beforeEach(() => api.reset())

  it('creates a PaymentIntent from the form the client sends, and reads it back by id and by metadata search', async () => {
    const intent = await stripe.paymentIntents.create(params('ord_1'), { idempotencyKey: 'key-ord_1' })
    expect(intent).toMatchObject({
      object: 'payment_intent', amount: 1500, amount_received: 0, currency: 'usd', status: 'requires_payment_method',
      metadata: { order_id: 'ord_1' }, livemode: false, last_payment_error: null, latest_charge: null, receipt_email: 'shopper@example.com',
    })
    expect(intent.id).toMatch(/^pi_\w+$/)
    expect(intent.client_secret).toMatch(new RegExp(`^${intent.id}_secret_\\w+$`))
    expect(api.calls[0]).toMatchObject({
      method: 'POST',
      path: '/v1/payment_intents',
      idempotencyKey: 'key-ord_1',
      authorization: `Bearer ${secretKey}`,
      answered: 200,
      body: { amount: '1500', currency: 'USD', metadata: { order_id: 'ord_1' }, automatic_payment_methods: { enabled: 'true' }, receipt_email: 'shopper@example.com' },
    })
    expect(api.calls[0]!.headers['content-type']).toBe('application/x-www-form-urlencoded')

    expect(await stripe.paymentIntents.retrieve(intent.id)).toEqual(intent)
    const found = await stripe.paymentIntents.search({ query: 'metadata[\'order_id\']:\'ord_1\'' })
    expect(found).toMatchObject({ object: 'search_result', has_more: false, url: '/v1/payment_intents/search' })
    expect(found.data.map(each => each.id)).toEqual([intent.id])
    expect((await stripe.paymentIntents.search({ query: 'metadata[\'order_id\']:\'ord_other\'' })).data).toEqual([])
  })

  it('replays the stored answer for the same Idempotency-Key and parameters: one intent, Idempotent-Replayed', async () => {
    const first = await stripe.paymentIntents.create(params('ord_1'), { idempotencyKey: 'key-1' })
    const second = await stripe.paymentIntents.create(params('ord_1'), { idempotencyKey: 'key-1' })
    expect(second).toEqual(first)
    expect(api.intents.size).toBe(1)
    expect(first.lastResponse.headers['idempotent-replayed']).toBeUndefined()
    expect(second.lastResponse.headers['idempotent-replayed']).toBe('true')
    expect(second.lastResponse.headers['original-request']).toBe(first.lastResponse.requestId)
  })

  it('refuses the same key with other parameters (StripeIdempotencyError, 400), and a key still in progress (409)', async () => {
    await stripe.paymentIntents.create(params('ord_1'), { idempotencyKey: 'key-1' })
    const mismatch = await failureOf(stripe.paymentIntents.create(params('ord_1', 1600), { idempotencyKey: 'key-1' }))
    expect(mismatch).toBeInstanceOf(Stripe.errors.StripeIdempotencyError)
    expect(mismatch).toMatchObject({ statusCode: 400, rawType: 'idempotency_error' })

    api.script.push({ match: 'create', fault: { kind: 'delay', ms: 500 } })
    const slow = stripe.paymentIntents.create(params('ord_2'), { idempotencyKey: 'key-2' })
    await pollUntil('the slow create has reached the stand-in', async () => api.calls.length === 3, { intervalMs: 5 })
    const inUse = await failureOf(stripe.paymentIntents.create(params('ord_2'), { idempotencyKey: 'key-2' }))
    // The SDK has no class of its own for a 409: it is a StripeAPIError carrying the idempotency type.
    expect(inUse).toBeInstanceOf(Stripe.errors.StripeAPIError)
    expect(inUse).toMatchObject({ statusCode: 409, rawType: 'idempotency_error', code: 'idempotency_key_in_use' })
    expect((await slow).metadata).toEqual({ order_id: 'ord_2' })
    expect(api.intents.size).toBe(2)
  })

  it('answers a scripted 429 (StripeRateLimitError with Retry-After) and 500 (StripeAPIError) without creating or storing anything', async () => {
    api.script.push({ match: 'create', fault: { kind: 'status', status: 429, retryAfter: '2' } })
    api.script.push({ match: 'create', fault: { kind: 'status', status: 500 } })
    const limited = await failureOf(stripe.paymentIntents.create(params('ord_1'), { idempotencyKey: 'key-1' }))
    expect(limited).toBeInstanceOf(Stripe.errors.StripeRateLimitError)
    expect(limited).toMatchObject({ statusCode: 429, rawType: 'rate_limit_error', headers: { 'retry-after': '2' } })
    const broken = await failureOf(stripe.paymentIntents.create(params('ord_1'), { idempotencyKey: 'key-1' }))
    expect(broken).toBeInstanceOf(Stripe.errors.StripeAPIError)
    expect(broken).toMatchObject({ statusCode: 500, rawType: 'api_error' })
    expect(api.intents.size).toBe(0)

    const created = await stripe.paymentIntents.create(params('ord_1'), { idempotencyKey: 'key-1' })
    expect(created.lastResponse.headers['idempotent-replayed']).toBeUndefined()
    expect(api.calls.map(call => call.answered)).toEqual([429, 500, 200])
  })

  it('drop-before: StripeConnectionError and nothing created (the client re-sends a closed connection once by itself)', async () => {
    api.script.push({ match: 'create', fault: { kind: 'drop-before' } }, { match: 'create', fault: { kind: 'drop-before' } })
    const lost = await failureOf(stripe.paymentIntents.create(params('ord_1'), { idempotencyKey: 'key-1' }))
    expect(lost).toBeInstanceOf(Stripe.errors.StripeConnectionError)
    expect(api.intents.size).toBe(0)
    expect(api.calls.map(call => [call.idempotencyKey, call.answered])).toEqual([['key-1', 'dropped'], ['key-1', 'dropped']])
  })

  it('drop-after: the intent exists although the answer was lost, and a retry under the same key gets it back', async () => {
    // One lost answer is hidden by the client's own re-send of a closed connection, under the same key.
    api.script.push({ match: 'create', fault: { kind: 'drop-after' } })
    const resent = await stripe.paymentIntents.create(params('ord_1'), { idempotencyKey: 'key-1' })
    expect(resent.lastResponse.headers['idempotent-replayed']).toBe('true')
    expect(api.intents.size).toBe(1)

    api.script.push({ match: 'create', fault: { kind: 'drop-after' } }, { match: 'create', fault: { kind: 'drop-after' } })
    const lost = await failureOf(stripe.paymentIntents.create(params('ord_2'), { idempotencyKey: 'key-2' }))
    expect(lost).toBeInstanceOf(Stripe.errors.StripeConnectionError)
    expect(api.intents.size).toBe(2)
    const [, created] = [...api.intents.values()]
    const retried = await stripe.paymentIntents.create(params('ord_2'), { idempotencyKey: 'key-2' })
    expect(retried.id).toBe(created!.id)
    expect(retried.lastResponse.headers['idempotent-replayed']).toBe('true')
    expect(api.intents.size).toBe(2)
  })

  it('refuses for good: amount_too_large, an unknown parameter, a wrong key, an unknown intent, a declined card', async () => {
    const tooLarge = await failureOf(stripe.paymentIntents.create(params('ord_1', 1_000_000_000), { idempotencyKey: 'key-1' }))
    expect(tooLarge).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError)
    expect(tooLarge).toMatchObject({ statusCode: 400, code: 'amount_too_large', param: 'amount' })

    const unknown = await failureOf(stripe.paymentIntents.create({ ...params('ord_1'), colour: 'red' } as Stripe.PaymentIntentCreateParams))
    expect(unknown).toMatchObject({ statusCode: 400, code: 'parameter_unknown', param: 'colour' })

    const wrongKey = new Stripe('sk_test_wrong_0000000000000000', { host: '127.0.0.1', port: api.port, protocol: 'http', maxNetworkRetries: 0 })
    const unauthenticated = await failureOf(wrongKey.paymentIntents.create(params('ord_1')))
    expect(unauthenticated).toBeInstanceOf(Stripe.errors.StripeAuthenticationError)
    expect(unauthenticated).toMatchObject({ statusCode: 401, rawType: 'invalid_request_error' })
    expect((unauthenticated as Error).message).toMatch(/^Invalid API Key provided: sk_test_\*+0000$/)

    const missing = await failureOf(stripe.paymentIntents.retrieve('pi_missing'))
    expect(missing).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError)
    expect(missing).toMatchObject({ statusCode: 404, code: 'resource_missing', param: 'intent', message: 'No such payment_intent: \'pi_missing\'' })

    const declined = await failureOf(stripe.paymentIntents.create({ ...params('ord_2'), confirm: true, payment_method: 'pm_card_chargeDeclined' }))
    expect(declined).toBeInstanceOf(Stripe.errors.StripeCardError)
    expect(declined).toMatchObject({ statusCode: 402, code: 'card_declined', decline_code: 'generic_decline', message: 'Your card was declined.' })
    expect(api.intents.size).toBe(1)
  })

  it('moves intents as a payment would, and builds events the official verifier and the app accept', async () => {
    const intent = await stripe.paymentIntents.create(params('ord_1'))
    api.fail(intent.id)
    expect(await stripe.paymentIntents.retrieve(intent.id)).toMatchObject({
      status: 'requires_payment_method', last_payment_error: { type: 'card_error', code: 'card_declined', message: 'Your card was declined.' },
    })
    api.succeed(intent.id)
    const paid = await stripe.paymentIntents.retrieve(intent.id)
    expect(paid).toMatchObject({ status: 'succeeded', amount_received: 1500, last_payment_error: null })
    expect(paid.latest_charge).toMatch(/^ch_\w+$/)

    const other = await stripe.paymentIntents.create(params('ord_2'))
    api.cancel(other.id)
    expect((await stripe.paymentIntents.retrieve(other.id)).status).toBe('canceled')

    const event = api.event(intent.id, 'payment_intent.succeeded')
    expect(event).toMatchObject({ object: 'event', type: 'payment_intent.succeeded', livemode: false, data: { object: { id: intent.id, status: 'succeeded' } } })
    expect(event.api_version).toBe(api.calls[0]!.headers['stripe-version'])
    const payload = JSON.stringify(event)
    const signature = stripeSignature('whsec_standin', payload)
    expect(stripe.webhooks.constructEvent(payload, signature, 'whsec_standin').id).toBe(event.id)
    expect(stripeProvider.verify(deliveryOf(payload, { 'stripe-signature': signature }), 'whsec_standin')).toEqual({ ok: true })
    expect(stripeProvider.parse(event, deliveryOf(payload))).toEqual({
      ok: true,
      event: { eventId: event.id, type: 'payment.succeeded', orderId: 'ord_1', paymentId: intent.id, amount: 1500, currency: 'USD' },
    })
  })

  describe('refunds and cancellation', () => {
    const paidIntent = async (orderId: string) => {
      const intent = await stripe.paymentIntents.create(params(orderId))
      api.succeed(intent.id)
      return intent.id
    }

    it('refunds part, then the rest: the same Idempotency-Key and body replays the refund, another body is refused; the expanded charge, retrieve and list show them', async () => {
      const intentId = await paidIntent('ord_1')
      const first = await stripe.refunds.create(
        { payment_intent: intentId, amount: 500, reason: 'requested_by_customer', metadata: { refund_id: 're_app_1' } },
        { idempotencyKey: 'refund:re_app_1' },
      )
      expect(first).toMatchObject({
        object: 'refund', amount: 500, currency: 'usd', payment_intent: intentId, charge: api.intents.get(intentId)!.latest_charge,
        status: 'succeeded', reason: 'requested_by_customer', metadata: { refund_id: 're_app_1' }, created: expect.any(Number),
      })
      expect(first.id).toMatch(/^re_\w+$/)
      expect(api.calls.at(-1)).toMatchObject({ path: '/v1/refunds', idempotencyKey: 'refund:re_app_1', body: { payment_intent: intentId, amount: '500', metadata: { refund_id: 're_app_1' } } })

      const replayed = await stripe.refunds.create(
        { payment_intent: intentId, amount: 500, reason: 'requested_by_customer', metadata: { refund_id: 're_app_1' } },
        { idempotencyKey: 'refund:re_app_1' },
      )
      expect(replayed).toEqual(first)
      expect(replayed.lastResponse.headers['idempotent-replayed']).toBe('true')
      const otherBody = await failureOf(stripe.refunds.create({ payment_intent: intentId, amount: 600 }, { idempotencyKey: 'refund:re_app_1' }))
      expect(otherBody).toBeInstanceOf(Stripe.errors.StripeIdempotencyError)
      expect(otherBody).toMatchObject({ statusCode: 400, rawType: 'idempotency_error' })

      const partly = await stripe.paymentIntents.retrieve(intentId, { expand: ['latest_charge'] })
      expect(partly.latest_charge).toMatchObject({ object: 'charge', amount: 1500, amount_refunded: 500, refunded: false, payment_intent: intentId, metadata: { order_id: 'ord_1' } })
      expect((partly.latest_charge as Stripe.Charge).refunds!.data.map(refund => refund.id)).toEqual([first.id])

      // No amount: all that remains.
      const rest = await stripe.refunds.create({ payment_intent: intentId, metadata: { refund_id: 're_app_2' } }, { idempotencyKey: 'refund:re_app_2' })
      expect(rest).toMatchObject({ amount: 1000, status: 'succeeded' })
      expect(api.charge(intentId)).toMatchObject({ amount_refunded: 1500, refunded: true })
      expect(await stripe.refunds.retrieve(first.id)).toEqual(first)
      const listed = await stripe.refunds.list({ payment_intent: intentId })
      expect(listed).toMatchObject({ object: 'list', has_more: false, url: '/v1/refunds' })
      expect(listed.data.map(refund => refund.id)).toEqual([rest.id, first.id])
      expect((await stripe.refunds.list({ payment_intent: intentId, limit: 1 })).has_more).toBe(true)
      expect(await failureOf(stripe.refunds.retrieve('re_missing'))).toMatchObject({ statusCode: 404, code: 'resource_missing' })

      expect(api.createdRefunds()).toEqual([
        { refund: expect.objectContaining({ id: first.id, metadata: { refund_id: 're_app_1' } }), idempotencyKey: 'refund:re_app_1', dashboard: false },
        { refund: expect.objectContaining({ id: rest.id }), idempotencyKey: 'refund:re_app_2', dashboard: false },
      ])
      expect(api.idempotencyKeyUses('refund')).toEqual(new Map([['refund:re_app_1', 3], ['refund:re_app_2', 1]]))
      expect(api.refundedTotal(intentId)).toBe(1500)
    })

    it('refuses what Stripe refuses: no successful charge (charge_not_refundable), more than remains (amount_too_large), already refunded (charge_already_refunded), an unknown intent', async () => {
      const unpaid = await stripe.paymentIntents.create(params('ord_1'))
      const notPaid = await failureOf(stripe.refunds.create({ payment_intent: unpaid.id }, { idempotencyKey: 'refund:1' }))
      expect(notPaid).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError)
      expect(notPaid).toMatchObject({ statusCode: 400, code: 'charge_not_refundable', param: 'payment_intent', message: `This PaymentIntent (${unpaid.id}) does not have a successful charge to refund.` })

      api.succeed(unpaid.id)
      const tooMuch = await failureOf(stripe.refunds.create({ payment_intent: unpaid.id, amount: 2000 }, { idempotencyKey: 'refund:2' }))
      expect(tooMuch).toMatchObject({ statusCode: 400, code: 'amount_too_large', param: 'amount', message: 'Refund amount ($20.00) is greater than unrefunded amount on charge ($15.00)' })

      // As in Stripe's dashboard: no API call, no metadata.
      const dashboard = api.dashboardRefund(unpaid.id)
      expect(dashboard).toMatchObject({ amount: 1500, metadata: {}, status: 'succeeded', reason: null })
      expect(api.createdRefunds()).toEqual([{ refund: dashboard, dashboard: true }])
      const again = await failureOf(stripe.refunds.create({ payment_intent: unpaid.id, amount: 1 }, { idempotencyKey: 'refund:3' }))
      expect(again).toMatchObject({ statusCode: 400, code: 'charge_already_refunded', message: `Charge ${String(api.intents.get(unpaid.id)!.latest_charge)} has already been refunded.` })
      expect(() => api.dashboardRefund(unpaid.id)).toThrow(StandInRefusal)

      expect(await failureOf(stripe.refunds.create({ payment_intent: 'pi_missing' }))).toMatchObject({ statusCode: 400, code: 'resource_missing', param: 'payment_intent' })
      expect(await failureOf(stripe.refunds.create({ payment_intent: unpaid.id, reason: 'changed_mind' }))).toMatchObject({ statusCode: 400, param: 'reason' })
      expect(api.refunds.size).toBe(1)
      expect(api.refundedTotal(unpaid.id)).toBe(1500)
    })

    it('cancels an intent not yet paid, replayed under its Idempotency-Key; a succeeded or canceled one is refused with payment_intent_unexpected_state', async () => {
      const open = await stripe.paymentIntents.create(params('ord_1'))
      const canceled = await stripe.paymentIntents.cancel(open.id, { cancellation_reason: 'requested_by_customer' }, { idempotencyKey: 'cancel:ord_1' })
      expect(canceled).toMatchObject({ id: open.id, status: 'canceled', canceled_at: expect.any(Number), cancellation_reason: 'requested_by_customer' })
      const replayed = await stripe.paymentIntents.cancel(open.id, { cancellation_reason: 'requested_by_customer' }, { idempotencyKey: 'cancel:ord_1' })
      expect(replayed.lastResponse.headers['idempotent-replayed']).toBe('true')
      const twice = await failureOf(stripe.paymentIntents.cancel(open.id, {}, { idempotencyKey: 'cancel:ord_1:again' }))
      expect(twice).toMatchObject({ statusCode: 400, code: 'payment_intent_unexpected_state', payment_intent: { id: open.id, status: 'canceled' } })
      // Stripe never charges a canceled intent.
      expect(() => api.succeed(open.id)).toThrow(StandInRefusal)

      const paid = await paidIntent('ord_2')
      const late = await failureOf(stripe.paymentIntents.cancel(paid, {}, { idempotencyKey: 'cancel:ord_2' }))
      expect(late).toBeInstanceOf(Stripe.errors.StripeInvalidRequestError)
      expect(late).toMatchObject({ statusCode: 400, code: 'payment_intent_unexpected_state', payment_intent: { id: paid, status: 'succeeded' } })
      expect((late as Error).message).toMatch(/^You cannot cancel this PaymentIntent because it has a status of succeeded\./)
      expect(await failureOf(stripe.paymentIntents.cancel('pi_missing', {}, { idempotencyKey: 'cancel:missing' }))).toMatchObject({ statusCode: 404, code: 'resource_missing' })
      expect(api.idempotencyKeyUses('cancel')).toEqual(new Map([['cancel:ord_1', 2], ['cancel:ord_1:again', 1], ['cancel:ord_2', 1], ['cancel:missing', 1]]))
    })

    it('applies faults to refund and cancel calls: a lost answer is replayed under the key (one refund), a 500 and a 429 make nothing; a key forgotten after a day refunds again', async () => {
      const intentId = await paidIntent('ord_1')
      api.script.push({ match: 'create', fault: { kind: 'status', status: 500 } })
      api.script.push({ match: 'refund', fault: { kind: 'drop-after' } }, { match: 'refund', fault: { kind: 'drop-after' } })
      const lost = await failureOf(stripe.refunds.create({ payment_intent: intentId, amount: 500 }, { idempotencyKey: 'refund:a' }))
      expect(lost).toBeInstanceOf(Stripe.errors.StripeConnectionError)
      expect(api.refunds.size).toBe(1)
      const retried = await stripe.refunds.create({ payment_intent: intentId, amount: 500 }, { idempotencyKey: 'refund:a' })
      expect(retried.id).toBe([...api.refunds.keys()][0])
      expect(retried.lastResponse.headers['idempotent-replayed']).toBe('true')
      expect(api.createdRefunds()).toHaveLength(1)
      expect(api.idempotencyKeyUses('refund').get('refund:a')).toBe(3)

      api.script.push({ match: 'refund', fault: { kind: 'status', status: 500 } })
      expect(await failureOf(stripe.refunds.create({ payment_intent: intentId, amount: 200 }, { idempotencyKey: 'refund:b' }))).toMatchObject({ statusCode: 500, rawType: 'api_error' })
      expect(api.refundedTotal(intentId)).toBe(500)
      expect((await stripe.refunds.create({ payment_intent: intentId, amount: 200 }, { idempotencyKey: 'refund:b' })).lastResponse.headers['idempotent-replayed']).toBeUndefined()

      // The create's fault was left for the next create.
      expect(api.script).toEqual([{ match: 'create', fault: { kind: 'status', status: 500 } }])
      expect(await failureOf(stripe.paymentIntents.create(params('ord_2')))).toMatchObject({ statusCode: 500 })
      const open = await stripe.paymentIntents.create(params('ord_2'))
      api.script.push({ match: 'cancel', fault: { kind: 'status', status: 429, retryAfter: '1' } })
      expect(await failureOf(stripe.paymentIntents.cancel(open.id, {}, { idempotencyKey: 'cancel:ord_2' }))).toBeInstanceOf(Stripe.errors.StripeRateLimitError)
      expect(api.intents.get(open.id)!.status).toBe('requires_payment_method')
      expect(api.script).toEqual([])

      api.forgetIdempotencyKeys()
      const anew = await stripe.refunds.create({ payment_intent: intentId, amount: 500 }, { idempotencyKey: 'refund:a' })
      expect(anew.id).not.toBe(retried.id)
      expect(api.refundedTotal(intentId)).toBe(1200)
    })
  })

  it('keeps refunds pending until they settle (a failed one gives its amount back), and sends each change as a signed event the app verifies', async () => {
    const receiver = await webhookReceiver()
    const signed = await startStripeApi({ secretKey, webhook: { url: receiver.url, secret: 'whsec_standin' } })
    try {
      const client = new Stripe(secretKey, { host: '127.0.0.1', port: signed.port, protocol: 'http', maxNetworkRetries: 0 })
      const intent = await client.paymentIntents.create(params('ord_1'))
      signed.succeed(intent.id)
      signed.pendRefunds(1)
      const pending = await client.refunds.create({ payment_intent: intent.id, amount: 500, metadata: { refund_id: 're_app_1' } }, { idempotencyKey: 'refund:re_app_1' })
      expect(pending.status).toBe('pending')
      const settled = await client.refunds.create({ payment_intent: intent.id, amount: 300 }, { idempotencyKey: 'refund:re_app_2' })
      expect(settled.status).toBe('succeeded')
      expect(signed.refundedTotal(intent.id)).toBe(800)

      expect(signed.settleRefund(pending.id, 'failed')).toMatchObject({ status: 'failed', failure_reason: 'declined' })
      expect(() => signed.settleRefund(pending.id, 'succeeded')).toThrow(StandInRefusal)
      expect((await client.refunds.retrieve(pending.id)).status).toBe('failed')
      expect(signed.refundedTotal(intent.id)).toBe(300)
      expect(signed.charge(intent.id)).toMatchObject({ amount_refunded: 300, refunded: false })

      await signed.webhooksIdle()
      expect(signed.webhooks.map(delivery => [delivery.delivered, delivery.attempts])).toEqual(Array.from({ length: 7 }, () => [true, [200]]))
      const events = receiver.received.map(({ headers, body }) => {
        const signature = String(headers['stripe-signature'])
        expect(stripeProvider.verify(deliveryOf(body, { 'stripe-signature': signature }), 'whsec_standin')).toEqual({ ok: true })
        return client.webhooks.constructEvent(body, signature, 'whsec_standin')
      })
      expect(events.map(event => event.type)).toEqual([
        'payment_intent.succeeded', 'refund.created', 'charge.refunded', 'refund.created', 'charge.refunded', 'refund.updated', 'refund.failed',
      ])
      expect(events.map(event => event.id)).toEqual(signed.events.map(event => event.id))
      expect(events[1]).toMatchObject({ request: { idempotency_key: 'refund:re_app_1' }, data: { object: { id: pending.id, status: 'pending' } } })
      // amount_refunded counts the pending refund.
      expect(events[2]).toMatchObject({ request: { idempotency_key: 'refund:re_app_1' }, data: { object: { object: 'charge', amount_refunded: 500 } } })
      expect(events[5]).toMatchObject({ request: { id: null }, data: { object: { id: pending.id, status: 'failed', failure_reason: 'declined' } } })
      expect(events[6]).toMatchObject({ data: { object: { id: pending.id, status: 'failed' } } })
      expect(stripeProvider.parse(events[4], deliveryOf(''))).toMatchObject({ ok: true, event: { type: 'payment.refunded', orderId: 'ord_1', paymentId: intent.id, amount: 800 } })
      expect(stripeProvider.parse(events[6], deliveryOf(''))).toMatchObject({ ok: true, event: { type: 'refund.updated', refund: { providerRefundId: pending.id, refundId: 're_app_1', status: 'failed' } } })
    }
    finally {
      await signed.close()
      await receiver.close()
    }
  })
})

describe('Stripe stand-in: what Stripe documents about refunds, keys, lists and events', () => {
  let api: StripeApi
  let stripe: Stripe
  beforeAll(async () => {
    api = await startStripeApi({ secretKey })
    stripe = new Stripe(secretKey, { host: '127.0.0.1', port: api.port, protocol: 'http', maxNetworkRetries: 0, timeout: 3_000 })
  })
  afterAll(() => api.close())
  beforeEach(() => api.reset())

  const paidIntent = async (amount = 1500) => {
    const intent = await stripe.paymentIntents.create({ amount, currency: 'usd', metadata: { order_id: 'ord_1' } })
    api.succeed(intent.id)
    return intent.id
  }

  it('keeps a scripted stored-error 500 under the Idempotency-Key and answers it again (Idempotent-Replayed), with or without the refund made; a fault may wait for one key', async () => {
    const intentId = await paidIntent()
    api.script.push({ match: 'refund', fault: { kind: 'stored-error', status: 500 } }, { match: 'refund', fault: { kind: 'stored-error', status: 500, performed: true } })
    const first = await failureOf(stripe.refunds.create({ payment_intent: intentId, amount: 100 }, { idempotencyKey: 'refund:kept' }))
    expect(first).toMatchObject({ statusCode: 500, rawType: 'api_error' })
    expect((first as Stripe.errors.StripeError).headers?.['idempotent-replayed']).toBeUndefined()
    // The second fault is taken by this retry, which is answered from the record instead.
    const again = await failureOf(stripe.refunds.create({ payment_intent: intentId, amount: 100 }, { idempotencyKey: 'refund:kept' }))
    expect(again).toMatchObject({ statusCode: 500, headers: expect.objectContaining({ 'idempotent-replayed': 'true' }) })
    expect(api.createdRefunds()).toEqual([])

    api.script.push({ match: 'refund', fault: { kind: 'stored-error', status: 500, performed: true } })
    expect(await failureOf(stripe.refunds.create({ payment_intent: intentId, amount: 200, metadata: { refund_id: 're_app_made' } }, { idempotencyKey: 'refund:made' }))).toMatchObject({ statusCode: 500 })
    expect(await failureOf(stripe.refunds.create({ payment_intent: intentId, amount: 200, metadata: { refund_id: 're_app_made' } }, { idempotencyKey: 'refund:made' })))
      .toMatchObject({ statusCode: 500, headers: expect.objectContaining({ 'idempotent-replayed': 'true' }) })
    expect(api.createdRefunds().map(made => [made.idempotencyKey, made.refund.amount, made.refund.metadata.refund_id])).toEqual([['refund:made', 200, 're_app_made']])

    // A fault for one key (or a pattern of keys) waits for a request under it.
    api.script.push({ match: 'refund', idempotencyKey: /:2$/, fault: { kind: 'status', status: 503 } })
    expect(await stripe.refunds.create({ payment_intent: intentId, amount: 1 }, { idempotencyKey: 'refund:c' })).toMatchObject({ status: 'succeeded' })
    expect(await failureOf(stripe.refunds.create({ payment_intent: intentId, amount: 1 }, { idempotencyKey: 'refund:c:2' }))).toMatchObject({ statusCode: 503 })
    expect(api.script).toEqual([])

    // Forgotten a day later: the key runs anew.
    api.forgetIdempotencyKeys()
    expect(await stripe.refunds.create({ payment_intent: intentId, amount: 100 }, { idempotencyKey: 'refund:kept' })).toMatchObject({ status: 'succeeded', amount: 100 })
    expect(api.refundedTotal(intentId)).toBe(301)
  })

  it('refunds go pending → succeeded | failed | canceled; amount_refunded counts pending ones and gives back failed and canceled ones; each change is an event', async () => {
    const intentId = await paidIntent()
    api.pendRefunds(3)
    const made = await Promise.all([100, 200, 300].map((amount, index) => stripe.refunds.create({ payment_intent: intentId, amount, metadata: { refund_id: `re_app_${index}` } }, { idempotencyKey: `refund:${index}` })))
    expect(made.map(refund => refund.status)).toEqual(['pending', 'pending', 'pending'])
    expect(api.charge(intentId)).toMatchObject({ amount_refunded: 600, refunded: false })
    const dashboard = api.dashboardRefund(intentId, 400, { pending: true })
    expect(dashboard).toMatchObject({ status: 'pending', metadata: {} })
    expect(api.refundedTotal(intentId)).toBe(1000)

    api.settleRefund(made[0]!.id, 'succeeded')
    api.settleRefund(made[1]!.id, 'failed')
    api.settleRefund(made[2]!.id, 'canceled')
    expect(() => api.settleRefund(made[2]!.id, 'succeeded')).toThrow(StandInRefusal)
    expect(() => api.settleRefund(dashboard.id, 'requires_action' as never)).toThrow(StandInRefusal)
    expect((await stripe.refunds.retrieve(made[2]!.id)).status).toBe('canceled')
    expect(api.charge(intentId)).toMatchObject({ amount_refunded: 500 })
    const settled = api.events.slice(-4).map(event => [event.type, event.data.object.id, (event.data.object as { status: string }).status])
    expect(settled).toEqual([
      ['refund.updated', made[0]!.id, 'succeeded'], ['refund.updated', made[1]!.id, 'failed'], ['refund.failed', made[1]!.id, 'failed'], ['refund.updated', made[2]!.id, 'canceled'],
    ])
    expect(api.events.map(event => event.type).slice(0, 3)).toEqual(['payment_intent.succeeded', 'refund.created', 'charge.refunded'])
    expect(stripeProvider.parse(api.event(made[2]!.id, 'refund.updated'), deliveryOf(''))).toMatchObject({ ok: true, event: { refund: { status: 'failed' } } })
  })

  it('lists pages honestly: limit, has_more, starting_after and ending_before (never both), the client\'s auto-pagination sees every refund and intent; the charge shows its newest 10; search pages by next_page', async () => {
    const intentId = await paidIntent(1_000_00)
    for (let index = 0; index < 120; index++) api.dashboardRefund(intentId, 100)
    const newestFirst = [...api.refunds.keys()].reverse()
    const first = await stripe.refunds.list({ payment_intent: intentId, limit: 100 })
    expect([first.data.length, first.has_more]).toEqual([100, true])
    expect(first.data.map(refund => refund.id)).toEqual(newestFirst.slice(0, 100))
    const next = await stripe.refunds.list({ payment_intent: intentId, limit: 100, starting_after: first.data.at(-1)!.id })
    expect([next.data.map(refund => refund.id), next.has_more]).toEqual([newestFirst.slice(100), false])
    const back = await stripe.refunds.list({ payment_intent: intentId, limit: 5, ending_before: newestFirst[10] })
    expect([back.data.map(refund => refund.id), back.has_more]).toEqual([newestFirst.slice(5, 10), true])
    expect(await failureOf(stripe.refunds.list({ payment_intent: intentId, starting_after: newestFirst[1], ending_before: newestFirst[0] }))).toMatchObject({ statusCode: 400 })
    const all: string[] = []
    for await (const refund of stripe.refunds.list({ payment_intent: intentId, limit: 100 })) all.push(refund.id)
    expect(all).toEqual(newestFirst)
    expect(api.charge(intentId)!.refunds).toMatchObject({ has_more: true, data: newestFirst.slice(0, 10).map(id => expect.objectContaining({ id })) })

    const intents = [await paidIntent(), await paidIntent(), await paidIntent()]
    const page = await stripe.paymentIntents.search({ query: 'metadata[\'order_id\']:\'ord_1\'', limit: 2 })
    expect([page.data.length, page.has_more, page.next_page]).toEqual([2, true, 'page_2'])
    const found: string[] = []
    for await (const intent of stripe.paymentIntents.search({ query: 'metadata[\'order_id\']:\'ord_1\'', limit: 2 })) found.push(intent.id)
    expect(found.slice(0, 3)).toEqual([...intents].reverse())
    expect(found).toHaveLength(4)

    // The intents list: newest first, filtered by when they were created.
    const listed: string[] = []
    for await (const intent of stripe.paymentIntents.list({ created: { gte: api.intents.get(intentId)!.created }, limit: 1 })) listed.push(intent.id)
    expect(listed).toEqual([...intents].reverse().concat(intentId))
    expect((await stripe.paymentIntents.list({ created: { gt: Math.floor(Date.now() / 1000) + 60 } })).data).toEqual([])
  })

  it('holds events back, then releases them reversed and twice; redelivers one; the same over the control surface, listed among the controls', async () => {
    const receiver = await webhookReceiver()
    const signed = await startStripeApi({ secretKey, webhook: { url: receiver.url, secret: 'whsec_standin' } })
    try {
      const client = new Stripe(secretKey, { host: '127.0.0.1', port: signed.port, protocol: 'http', maxNetworkRetries: 0 })
      const intent = await client.paymentIntents.create({ amount: 1500, currency: 'usd', metadata: { order_id: 'ord_1' } })
      const control = async (path: string, method = 'POST') => {
        const response = await fetch(`${signed.url}/_stand-in${path}`, { method })
        return { status: response.status, json: await response.json() as any }
      }
      expect(await control('/webhooks/hold')).toEqual({ status: 200, json: { holding: true } })
      signed.succeed(intent.id)
      const refund = await control(`/payment_intents/${intent.id}/refund?amount=500&pending=1`)
      expect(refund.json).toMatchObject({ status: 'pending', amount: 500 })
      expect((await control(`/refunds/${refund.json.id}/fail`)).json).toMatchObject({ status: 'failed' })
      await signed.webhooksIdle()
      expect(receiver.received).toEqual([])
      const made = (await control('/events', 'GET')).json.map((event: { type: string }) => event.type)
      expect(made).toEqual(['payment_intent.succeeded', 'refund.created', 'charge.refunded', 'refund.updated', 'refund.failed'])
      expect((await control('/events?type=refund.failed', 'GET')).json).toHaveLength(1)

      expect(await control('/webhooks/release?order=reversed&duplicate=1')).toEqual({ status: 200, json: { sent: 10 } })
      await signed.webhooksIdle()
      const types = receiver.received.map(({ body }) => (JSON.parse(body) as { type: string }).type)
      expect(types).toEqual([...made].reverse().flatMap(type => [type, type]))
      const [failed] = signed.events.filter(event => event.type === 'refund.failed')
      expect(await control(`/events/${failed!.id}/redeliver`)).toEqual({ status: 200, json: { redelivered: failed!.id } })
      await signed.webhooksIdle()
      expect(JSON.parse(receiver.received.at(-1)!.body)).toMatchObject({ id: failed!.id, type: 'refund.failed' })
      expect((await control('/events/evt_missing/redeliver')).status).toBe(404)
      expect((await control('/idempotency_keys/forget')).json).toEqual({ forgotten: true })
      const canceled = signed.dashboardRefund(intent.id, 100, { pending: true })
      expect((await control(`/refunds/${canceled.id}/cancel`)).json).toMatchObject({ status: 'canceled' })
      expect((await control(`/refunds/${canceled.id}/cancel`)).status).toBe(409)
      expect((await control('/nothing')).json.controls).toEqual(STRIPE_CONTROLS)
      expect(STRIPE_CONTROLS.join('\n')).toMatch(/webhooks\/release/)
    }
    finally {
      await signed.close()
      await receiver.close()
    }
    // Without a webhook URL there is nowhere to redeliver to.
    const event = (await paidIntent(), api.events[0]!)
    expect(() => api.redeliver(event.id)).toThrow(StandInRefusal)
  })
})

describe('Midtrans stand-in, through the official midtrans-client', () => {
  let api: MidtransApi
  let core: InstanceType<typeof midtransClient.CoreApi>
  const bankTransfer = (orderId: string, grossAmount = 150_000) => ({
    payment_type: 'bank_transfer',
    transaction_details: { order_id: orderId, gross_amount: grossAmount },
    bank_transfer: { bank: 'bca' },
    customer_details: { email: 'shopper@example.com' },
  })
  const clientFor = (key: string) => {
    const client = new midtransClient.CoreApi({ isProduction: false, serverKey: key })
    client.apiConfig.getCoreApiBaseUrl = () => api.url
    return client
  }

  beforeAll(async () => {
    api = await startMidtransApi({ serverKey })
    core = clientFor(serverKey)
  })
  afterAll(() => api.close())
  beforeEach(() => api.reset())

  it('charges a bank transfer, refuses the reused order_id with 406, and reads the virtual account back', async () => {
    const charged = await core.charge(bankTransfer('ord_1'))
    expect(charged).toMatchObject({
      status_code: '201', status_message: 'Success, Bank Transfer transaction is created', order_id: 'ord_1', merchant_id: 'G000000000',
      gross_amount: '150000.00', currency: 'IDR', payment_type: 'bank_transfer', transaction_status: 'pending', fraud_status: 'accept',
      va_numbers: [{ bank: 'bca', va_number: expect.stringMatching(/^\d{11}$/) }],
    })
    expect(charged.transaction_time).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/)
    expect(charged.expiry_time).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/)
    expect(api.calls[0]).toMatchObject({
      method: 'POST', path: '/v2/charge', answered: 200, body: bankTransfer('ord_1'),
      authorization: `Basic ${Buffer.from(`${serverKey}:`).toString('base64')}`,
    })

    const reused = await failureOf(core.charge(bankTransfer('ord_1', 160_000)))
    expect(reused).toBeInstanceOf(midtransClient.MidtransError)
    expect(reused).toMatchObject({ httpStatusCode: 406, ApiResponse: { status_code: '406' } })
    expect(api.transactions.size).toBe(1)

    const status = await core.transaction.status('ord_1')
    expect(status).toMatchObject({
      status_code: '201', transaction_status: 'pending', transaction_id: charged.transaction_id, gross_amount: '150000.00', va_numbers: charged.va_numbers,
    })

    const unknown = await failureOf(core.transaction.status('ord_unknown'))
    expect(unknown).toMatchObject({ httpStatusCode: 404, ApiResponse: { status_code: '404', status_message: 'Transaction doesn\'t exist.' } })
  })

  it('charges GoPay with its actions', async () => {
    const charged = await core.charge({ payment_type: 'gopay', transaction_details: { order_id: 'ord_gopay', gross_amount: 20_000 } })
    expect(charged).toMatchObject({ status_code: '201', payment_type: 'gopay', transaction_status: 'pending', gross_amount: '20000.00' })
    const actions = charged.actions as Array<{ name: string, method: string, url: string }>
    expect(actions.map(action => action.name)).toEqual(['generate-qr-code', 'deeplink-redirect', 'get-status', 'cancel'])
    expect(actions[0]!.url).toBe(`${api.url}/v2/gopay/${String(charged.transaction_id)}/qr-code`)
    expect(actions[1]!.url).toMatch(/^gojek:\/\/gopay\/merchanttransfer\?/)
  })

  it('refuses a bad payload (400 with validation_messages) and a wrong server key (401)', async () => {
    const tooLarge = await failureOf(core.charge(bankTransfer('ord_1', 99_000_000_000)))
    expect(tooLarge).toMatchObject({ httpStatusCode: 400, ApiResponse: { status_code: '400', validation_messages: ['transaction_details.gross_amount must be less than 99000000000'] } })
    const incomplete = await failureOf(core.charge({ payment_type: 'bank_transfer', transaction_details: { order_id: 'ord_2' }, bank_transfer: { bank: 'bca' } }))
    expect(incomplete).toMatchObject({ httpStatusCode: 400, ApiResponse: { validation_messages: ['transaction_details.gross_amount is required'] } })

    const denied = await failureOf(clientFor('SB-Mid-server-wrong').charge(bankTransfer('ord_3')))
    expect(denied).toMatchObject({ httpStatusCode: 401, ApiResponse: { status_code: '401', status_message: 'Access denied due to unauthorized transaction, please check client or server key' } })
    expect(api.transactions.size).toBe(0)
  })

  it('applies scripted faults: a denial, a 503 with Retry-After, a lost answer', async () => {
    api.script.push({ match: 'create', fault: { kind: 'deny' } })
    const deniedCharge = await core.charge(bankTransfer('ord_denied'))
    expect(deniedCharge).toMatchObject({ status_code: '202', transaction_status: 'deny', channel_response_message: 'Do not honour' })
    expect(deniedCharge.status_message).toMatch(/^Deny by Bank \[BCA\] with code \[05\]/)
    expect((await core.transaction.status('ord_denied')).transaction_status).toBe('deny')

    api.script.push({ match: 'read', fault: { kind: 'status', status: 503, retryAfter: '5' } })
    const unavailable = await failureOf(core.transaction.status('ord_denied'))
    expect(unavailable).toMatchObject({ httpStatusCode: 503, ApiResponse: { status_code: '503' } })
    // For an HTTP error the client keeps the axios response itself (headers on it, not under .response).
    expect((unavailable as InstanceType<typeof midtransClient.MidtransError>).rawHttpClientData?.headers?.['retry-after']).toBe('5')

    api.script.push({ match: 'create', fault: { kind: 'drop-after' } })
    const lost = await failureOf(core.charge(bankTransfer('ord_lost')))
    expect(lost).toBeInstanceOf(midtransClient.MidtransError)
    expect(lost).toMatchObject({ httpStatusCode: null, ApiResponse: null })
    expect(api.transactions.get('ord_lost')?.transaction_status).toBe('pending')
    expect(await failureOf(core.charge(bankTransfer('ord_lost')))).toMatchObject({ httpStatusCode: 406 })
    expect(api.calls.map(call => call.answered)).toEqual([200, 200, 503, 'dropped', 406])
  })

  it('settles, refunds and expires, and signs notifications the app verifies', async () => {
    await core.charge(bankTransfer('ord_1'))
    api.settle('ord_1')
    expect(await core.transaction.status('ord_1')).toMatchObject({ status_code: '200', transaction_status: 'settlement', settlement_time: expect.any(String) })

    const settled = api.notification('ord_1')
    expect(settled).toMatchObject({ order_id: 'ord_1', status_code: '200', gross_amount: '150000.00', transaction_status: 'settlement', status_message: 'midtrans payment notification' })
    expect(settled.signature_key).toBe(createHash('sha512').update(`ord_1200150000.00${serverKey}`).digest('hex'))
    const body = JSON.stringify(settled)
    expect(midtransProvider.verify(deliveryOf(body), serverKey)).toEqual({ ok: true })
    expect(midtransProvider.parse(settled, deliveryOf(body))).toMatchObject({ ok: true, event: { type: 'payment.succeeded', orderId: 'ord_1', amount: 150_000 } })
    const forged = JSON.stringify(api.notification('ord_1', { gross_amount: '1.00', signature_key: settled.signature_key }))
    expect(midtransProvider.verify(deliveryOf(forged), serverKey)).toMatchObject({ ok: false })

    api.refund('ord_1', 50_000)
    expect(await core.transaction.status('ord_1')).toMatchObject({
      status_code: '200', transaction_status: 'partial_refund', refund_amount: '50000.00', refunds: [{ refund_amount: '50000.00' }],
    })
    api.refund('ord_1')
    expect(await core.transaction.status('ord_1')).toMatchObject({ transaction_status: 'refund', refund_amount: '150000.00', refunds: [{}, { refund_amount: '100000.00' }] })

    await core.charge(bankTransfer('ord_2'))
    api.expire('ord_2')
    expect(await core.transaction.status('ord_2')).toMatchObject({ status_code: '202', transaction_status: 'expire' })
    expect(midtransProvider.parse(api.notification('ord_2'), deliveryOf(''))).toMatchObject({ ok: true, event: { type: 'payment.failed' } })
  })

  describe('refunds and cancellation', () => {
    const settledGopay = async (orderId: string, grossAmount = 20_000) => {
      await core.charge({ payment_type: 'gopay', transaction_details: { order_id: orderId, gross_amount: grossAmount } })
      return api.settle(orderId)
    }

    it('refunds a settled GoPay payment in parts through /refund and /refund/online/direct by refund_key: a repeated key answers its first result and refunds nothing more; the status API shows the refunds', async () => {
      await settledGopay('ord_gp')
      const first = await core.transaction.refund('ord_gp', { refund_key: 'ref-1', amount: 5_000, reason: 'customer asked' })
      expect(first).toMatchObject({
        status_code: '200', status_message: 'Success, refund request is approved', order_id: 'ord_gp', gross_amount: '20000.00', payment_type: 'gopay',
        transaction_status: 'partial_refund', refund_chargeback_id: expect.any(Number), refund_amount: '5000.00', refund_key: 'ref-1',
      })
      expect(api.calls.at(-1)).toMatchObject({ method: 'POST', path: '/v2/ord_gp/refund', body: { refund_key: 'ref-1', amount: 5_000 }, answered: 200 })
      expect(await core.transaction.refund('ord_gp', { refund_key: 'ref-1', amount: 5_000, reason: 'customer asked' })).toEqual(first)
      const otherAmount = await failureOf(core.transaction.refund('ord_gp', { refund_key: 'ref-1', amount: 6_000 }))
      expect(otherAmount).toMatchObject({ httpStatusCode: 406, ApiResponse: { status_code: '406', status_message: 'Duplicate refund ID' } })

      // No amount: all that is left.
      const rest = await core.transaction.refundDirect('ord_gp', { refund_key: 'ref-2' })
      expect(rest).toMatchObject({ status_code: '200', status_message: 'Success, refund request is approved by the bank', transaction_status: 'refund', refund_amount: '15000.00' })
      expect(await core.transaction.status('ord_gp')).toMatchObject({
        status_code: '200', transaction_status: 'refund', refund_amount: '20000.00',
        refunds: [
          { refund_key: 'ref-1', refund_amount: '5000.00', reason: 'customer asked', refund_method: 'online', refund_chargeback_id: first.refund_chargeback_id, created_at: expect.any(String), bank_confirmed_at: expect.any(String) },
          { refund_key: 'ref-2', refund_amount: '15000.00', refund_method: 'online' },
        ],
      })
      // Nothing is left, and a refunded transaction is not settled any more.
      expect(await failureOf(core.transaction.refund('ord_gp', { refund_key: 'ref-3', amount: 1 }))).toMatchObject({ httpStatusCode: 412, ApiResponse: { status_message: 'Merchant cannot modify the status of the transaction' } })

      api.refundKeyReuse = 'duplicate'
      expect(await failureOf(core.transaction.refund('ord_gp', { refund_key: 'ref-1', amount: 5_000, reason: 'customer asked' }))).toMatchObject({ httpStatusCode: 406 })
      api.refundKeyReuse = 'replay'

      expect(api.createdRefunds().map(({ orderId, refund, endpoint }) => [orderId, refund.refund_key, endpoint])).toEqual([['ord_gp', 'ref-1', 'refund'], ['ord_gp', 'ref-2', 'direct']])
      expect(api.refundKeyUses()).toEqual(new Map([['ref-1', 4], ['ref-2', 1], ['ref-3', 1]]))
      expect(api.refundedTotal('ord_gp')).toBe(20_000)
    })

    it('refuses what Midtrans refuses: unpaid, a bank transfer (neither endpoint), more than is left (414), ShopeePay in part, and direct refund for a method only /refund takes', async () => {
      await core.charge({ payment_type: 'gopay', transaction_details: { order_id: 'ord_pending', gross_amount: 20_000 } })
      expect(await failureOf(core.transaction.refund('ord_pending', { refund_key: 'a' }))).toMatchObject({ httpStatusCode: 412 })

      await core.charge(bankTransfer('ord_va'))
      api.settle('ord_va')
      expect(await failureOf(core.transaction.refund('ord_va', { refund_key: 'b' }))).toMatchObject({ httpStatusCode: 412 })
      expect(await failureOf(core.transaction.refundDirect('ord_va', { refund_key: 'b' }))).toMatchObject({ httpStatusCode: 412 })

      await settledGopay('ord_gp')
      expect(await failureOf(core.transaction.refund('ord_gp', { refund_key: 'c', amount: 20_001 }))).toMatchObject({
        httpStatusCode: 414, ApiResponse: { status_code: '414', status_message: 'Refund request is rejected due to invalid amount' },
      })
      expect(await failureOf(core.transaction.refund('ord_gp', { refund_key: 'c', amount: 0 }))).toMatchObject({ httpStatusCode: 414 })
      expect(await failureOf(core.transaction.refund('ord_gp', { refund_key: 'not allowed!' }))).toMatchObject({ httpStatusCode: 400 })

      api.transactions.get('ord_gp')!.payment_type = 'dana'
      expect(await failureOf(core.transaction.refundDirect('ord_gp', { refund_key: 'd' }))).toMatchObject({ httpStatusCode: 412 })
      expect(await core.transaction.refund('ord_gp', { refund_key: 'd', amount: 1_000 })).toMatchObject({ status_code: '200', transaction_status: 'partial_refund' })

      await settledGopay('ord_spay')
      api.transactions.get('ord_spay')!.payment_type = 'shopeepay'
      expect(await failureOf(core.transaction.refund('ord_spay', { refund_key: 'e', amount: 1_000 }))).toMatchObject({ httpStatusCode: 414 })
      expect(await core.transaction.refund('ord_spay', { refund_key: 'e' })).toMatchObject({ transaction_status: 'refund', refund_amount: '20000.00' })

      expect(await failureOf(core.transaction.refund('ord_unknown', { refund_key: 'f' }))).toMatchObject({ httpStatusCode: 404, ApiResponse: { status_message: 'Transaction doesn\'t exist.' } })
      expect(api.createdRefunds().map(({ refund }) => refund.refund_key)).toEqual(['d', 'e'])
      // A dashboard refund is recorded whatever the method: a bank transfer is refunded outside Midtrans.
      api.refund('ord_va', 50_000)
      expect(api.createdRefunds().at(-1)).toMatchObject({ orderId: 'ord_va', endpoint: 'dashboard', refund: { refund_method: 'offline', refund_amount: '50000.00' } })
    })

    it('cancels a pending transaction (then status_code 202, cancel); a canceled or settled one is refused with 412', async () => {
      const charged = await core.charge(bankTransfer('ord_1'))
      const canceled = await core.transaction.cancel('ord_1')
      expect(canceled).toMatchObject({ status_code: '200', status_message: 'Success, transaction is canceled', order_id: 'ord_1', transaction_status: 'cancel', gross_amount: '150000.00' })
      expect(await core.transaction.status('ord_1')).toMatchObject({ status_code: '202', transaction_status: 'cancel' })
      expect(await failureOf(core.transaction.cancel(String(charged.transaction_id)))).toMatchObject({
        httpStatusCode: 412, ApiResponse: { status_message: 'Merchant cannot modify the status of the transaction' },
      })

      await settledGopay('ord_2')
      expect(await failureOf(core.transaction.cancel('ord_2'))).toMatchObject({ httpStatusCode: 412 })
      expect(await failureOf(core.transaction.cancel('ord_unknown'))).toMatchObject({ httpStatusCode: 404 })
      expect(api.calls.filter(call => call.path.endsWith('/cancel')).map(call => call.answered)).toEqual([200, 412, 412, 404])
    })

    it('applies faults to refund and cancel calls: a lost refund is answered again under its key (one refund); a bank denial refunds nothing and leaves the key free; a 503 cancels nothing', async () => {
      await settledGopay('ord_1')
      api.script.push({ match: 'create', fault: { kind: 'deny' } })
      api.script.push({ match: 'refund', fault: { kind: 'drop-after' } })
      const lost = await failureOf(core.transaction.refund('ord_1', { refund_key: 'ref-1', amount: 5_000 }))
      expect(lost).toMatchObject({ httpStatusCode: null, ApiResponse: null })
      expect(api.transactions.get('ord_1')!.transaction_status).toBe('partial_refund')
      const again = await core.transaction.refund('ord_1', { refund_key: 'ref-1', amount: 5_000 })
      expect(again).toMatchObject({ status_code: '200', refund_key: 'ref-1', refund_amount: '5000.00' })
      expect(api.createdRefunds()).toHaveLength(1)

      api.script.push({ match: 'refund', fault: { kind: 'deny' } })
      const denied = await core.transaction.refundDirect('ord_1', { refund_key: 'ref-2', amount: 1_000 })
      expect(denied).toMatchObject({ status_code: '202', status_message: 'Refund denied by the bank', transaction_status: 'partial_refund', refund_amount: '0.00', refund_key: 'ref-2' })
      expect(api.refundedTotal('ord_1')).toBe(5_000)
      expect(await core.transaction.refundDirect('ord_1', { refund_key: 'ref-2', amount: 1_000 })).toMatchObject({ status_code: '200', refund_amount: '1000.00' })
      expect(api.refundedTotal('ord_1')).toBe(6_000)
      expect(api.refundKeyUses()).toEqual(new Map([['ref-1', 2], ['ref-2', 2]]))

      // The charge's denial was left for the next charge.
      expect(api.script).toEqual([{ match: 'create', fault: { kind: 'deny' } }])
      api.script.length = 0
      await core.charge(bankTransfer('ord_2'))
      api.script.push({ match: 'cancel', fault: { kind: 'status', status: 503 } })
      expect(await failureOf(core.transaction.cancel('ord_2'))).toMatchObject({ httpStatusCode: 503 })
      expect(api.transactions.get('ord_2')!.transaction_status).toBe('pending')
    })

    it('holds refunds in flight: not listed, amount held, the refund_key answered 406 until the refund finishes; a caller that timed out never hears, one that waits gets 200; the notification carries the refunds so far', async () => {
      await settledGopay('ord_1')
      api.holdRefunds(2)
      const impatient = clientFor(serverKey)
      impatient.httpClient.http_client.defaults.timeout = 200
      const timedOut = await failureOf(impatient.transaction.refund('ord_1', { refund_key: 'ref-1', amount: 5_000 }))
      expect(timedOut).toMatchObject({ httpStatusCode: null, ApiResponse: null })
      expect(api.refundsInFlight()).toEqual([{ orderId: 'ord_1', refundKey: 'ref-1', amount: 5_000, endpoint: 'refund' }])
      expect(await core.transaction.status('ord_1')).toMatchObject({ transaction_status: 'settlement' })
      expect((await core.transaction.status('ord_1')).refunds).toBeUndefined()
      // The same refund_key, asked again, at either endpoint and even with replay on: 406.
      expect(await failureOf(core.transaction.refund('ord_1', { refund_key: 'ref-1', amount: 5_000 }))).toMatchObject({ httpStatusCode: 406, ApiResponse: { status_message: 'Duplicate refund ID' } })
      expect(await failureOf(core.transaction.refundDirect('ord_1', { refund_key: 'ref-1', amount: 5_000 }))).toMatchObject({ httpStatusCode: 406 })
      // Its amount is held: 15,000 is left to refund.
      expect(await failureOf(core.transaction.refund('ord_1', { refund_key: 'ref-2', amount: 15_001 }))).toMatchObject({ httpStatusCode: 414 })
      expect(() => api.refund('ord_1', 15_001)).toThrow('Cannot refund 15001 of ord_1: 15000 is left to refund')
      const waiting = core.transaction.refund('ord_1', { refund_key: 'ref-2', amount: 15_000 })
      await pollUntil('the second refund is in flight', async () => api.refundsInFlight().length === 2)

      const first = api.finishRefund('ref-1')
      expect(first).toMatchObject({ refund_key: 'ref-1', refund_amount: '5000.00', refund_method: 'online' })
      expect(api.finishRefund('ref-2')).toMatchObject({ refund_key: 'ref-2', refund_amount: '15000.00' })
      expect(await waiting).toMatchObject({ status_code: '200', refund_key: 'ref-2', refund_amount: '15000.00', transaction_status: 'refund' })
      expect(api.refundsInFlight()).toEqual([])
      expect(await core.transaction.status('ord_1')).toMatchObject({
        transaction_status: 'refund', refund_amount: '20000.00', refunds: [{ refund_key: 'ref-1', refund_amount: '5000.00' }, { refund_key: 'ref-2', refund_amount: '15000.00' }],
      })
      expect(api.notification('ord_1')).toMatchObject({ transaction_status: 'refund', refund_amount: '20000.00', refunds: [{ refund_key: 'ref-1' }, { refund_key: 'ref-2' }] })
      // Finished, the key is used: its first answer is lost, so the retry is replayed the made refund.
      expect(await core.transaction.refund('ord_1', { refund_key: 'ref-1', amount: 5_000 })).toMatchObject({ status_code: '200', refund_key: 'ref-1', refund_chargeback_id: first.refund_chargeback_id })
      const refundCalls = api.calls.filter(call => call.path.startsWith('/v2/ord_1/refund'))
      expect(refundCalls.map(call => call.answered)).toEqual(['dropped', 406, 406, 414, 200, 200])
      expect(api.createdRefunds().map(({ refund }) => refund.refund_key)).toEqual(['ref-1', 'ref-2'])
      expect(() => api.finishRefund('ref-1')).toThrow(StandInRefusal)
    })

    it('a refund in flight that the bank refuses: answered as a denial, nothing refunded, its refund_key and amount free again', async () => {
      await settledGopay('ord_1')
      api.holdRefunds(1)
      const held = core.transaction.refundDirect('ord_1', { refund_key: 'ref-1' })
      await pollUntil('the refund is in flight', async () => api.refundsInFlight().length === 1)
      api.failRefund('ref-1')
      expect(await held).toMatchObject({ status_code: '202', status_message: 'Refund denied by the bank', refund_key: 'ref-1', refund_amount: '0.00' })
      expect(api.refundedTotal('ord_1')).toBe(0)
      expect(await core.transaction.refundDirect('ord_1', { refund_key: 'ref-1' })).toMatchObject({ status_code: '200', refund_amount: '20000.00', transaction_status: 'refund' })
      expect(api.createdRefunds()).toHaveLength(1)
    })

    it('charges back a settled card payment, in part then the rest, each notified; a charged-back payment takes no refund (412); other methods and other states are refused', async () => {
      await settledGopay('ord_gp')
      expect(() => api.chargeback('ord_gp')).toThrow('Midtrans charges back card payments only; ord_gp is gopay')
      await core.charge({ payment_type: 'gopay', transaction_details: { order_id: 'ord_card', gross_amount: 20_000 } })
      api.transactions.get('ord_card')!.payment_type = 'credit_card'
      expect(() => api.chargeback('ord_card')).toThrow('Midtrans charges back only a settled transaction; ord_card is pending')
      api.settle('ord_card')
      api.holdRefunds(1)
      const held = core.transaction.refund('ord_card', { refund_key: 'ref-0', amount: 1_000 })
      await pollUntil('the refund is in flight', async () => api.refundsInFlight().length === 1)
      expect(() => api.chargeback('ord_card')).toThrow('A refund of ord_card is still in flight: finish or fail it first')
      api.failRefund('ref-0')
      expect(await held).toMatchObject({ status_code: '202' })
      expect(api.chargeback('ord_card', 5_000).transaction_status).toBe('partial_chargeback')
      expect(api.notification('ord_card')).toMatchObject({ status_code: '200', transaction_status: 'partial_chargeback', gross_amount: '20000.00' })
      expect(() => api.chargeback('ord_card', 1_000)).toThrow('A partial_chargeback moves only to chargeback: charge back all 15000 that is left of ord_card')
      expect(await failureOf(core.transaction.refund('ord_card', { refund_key: 'ref-1', amount: 1_000 }))).toMatchObject({ httpStatusCode: 412 })
      expect(api.chargeback('ord_card').transaction_status).toBe('chargeback')
      expect(api.transactions.get('ord_card')!.chargebacks.map(taken => taken.amount)).toEqual([5_000, 15_000])
      expect(await core.transaction.status('ord_card')).toMatchObject({ status_code: '200', transaction_status: 'chargeback' })
      expect(() => api.chargeback('ord_card')).toThrow(StandInRefusal)
      expect(midtransProvider.parse(api.notification('ord_card'), deliveryOf(''))).toMatchObject({ ok: true, event: { type: 'payment.updated', eventId: 'ord_card:200:20000.00:chargeback' } })
    })

    it('takes the holds, finishes and failures, and chargebacks at its control surface, and lists the refunds in flight', async () => {
      await settledGopay('ord_1')
      await settledGopay('ord_card')
      api.transactions.get('ord_card')!.payment_type = 'credit_card'
      const control = async (path: string, body?: Record<string, unknown>) => {
        const response = await fetch(`${api.url}/_stand-in${path}`, { method: 'POST', ...(body && { body: JSON.stringify(body) }) })
        return { status: response.status, json: await response.json() as Record<string, unknown> }
      }
      expect(await control('/refunds/hold', { count: 2 })).toEqual({ status: 200, json: { held: 2 } })
      expect(await control('/refunds/hold', { count: 'many' })).toEqual({ status: 409, json: { error: 'count must be a whole number, not many' } })
      const first = core.transaction.refundDirect('ord_1', { refund_key: 'ref-1', amount: 1_000 })
      const second = core.transaction.refundDirect('ord_1', { refund_key: 'ref-2', amount: 2_000 })
      await pollUntil('both refunds are in flight', async () => api.refundsInFlight().length === 2)
      const listed = await (await fetch(`${api.url}/_stand-in`)).json() as { refundsInFlight: unknown[] }
      expect(listed.refundsInFlight).toEqual([
        { orderId: 'ord_1', refundKey: 'ref-1', amount: 1_000, endpoint: 'direct' }, { orderId: 'ord_1', refundKey: 'ref-2', amount: 2_000, endpoint: 'direct' },
      ])
      expect(await control('/refunds/ref-1/finish')).toMatchObject({ status: 200, json: { refund_key: 'ref-1', refund_amount: '1000.00' } })
      expect(await control('/refunds/ref-2/fail')).toEqual({ status: 200, json: { refund_key: 'ref-2', failed: true } })
      expect(await control('/refunds/ref-2/fail')).toMatchObject({ status: 404 })
      expect(await first).toMatchObject({ status_code: '200' })
      expect(await second).toMatchObject({ status_code: '202' })
      // The hold is spent: the next refund is made at once.
      expect(await core.transaction.refundDirect('ord_1', { refund_key: 'ref-3', amount: 3_000 })).toMatchObject({ status_code: '200', refund_amount: '3000.00' })
      expect(await control('/transactions/ord_card/chargeback', { amount: 4_000 })).toMatchObject({ status: 200, json: { transaction_status: 'partial_chargeback' } })
      expect(await control('/transactions/ord_1/chargeback')).toMatchObject({ status: 409 })
    })

    it('sends each change as a signed notification the app verifies', async () => {
      const receiver = await webhookReceiver()
      const notifying = await startMidtransApi({ serverKey, webhookUrl: receiver.url })
      try {
        const client = new midtransClient.CoreApi({ isProduction: false, serverKey })
        client.apiConfig.getCoreApiBaseUrl = () => notifying.url
        await client.charge({ payment_type: 'gopay', transaction_details: { order_id: 'ord_1', gross_amount: 20_000 } })
        notifying.settle('ord_1')
        await client.transaction.refund('ord_1', { refund_key: 'ref-1', amount: 5_000 })
        await notifying.webhooksIdle()
        const notifications = receiver.received.map(({ body }) => {
          expect(midtransProvider.verify(deliveryOf(body), serverKey)).toEqual({ ok: true })
          return JSON.parse(body) as Record<string, unknown>
        })
        expect(notifications.map(n => [n.transaction_status, n.status_code, n.status_message])).toEqual([
          ['pending', '201', 'midtrans payment notification'], ['settlement', '200', 'midtrans payment notification'], ['partial_refund', '200', 'midtrans payment notification'],
        ])
        expect(notifications[2]).toMatchObject({ refund_amount: '5000.00', refunds: [{ refund_key: 'ref-1' }] })
        expect(notifying.webhooks.every(delivery => delivery.delivered)).toBe(true)
      }
      finally {
        await notifying.close()
        await receiver.close()
      }
    })
  })
})

describe('npm run stand-in', () => {
  it('runs the Stripe stand-in on its own: prints the env the app accepts, answers the official client, takes the shopper\'s controls and sends signed webhooks', { timeout: 60_000 }, async () => {
    const receiver = await webhookReceiver()
    const child = spawnManaged({
      label: 'stand-in',
      args: [`${projectRoot}node_modules/jiti/lib/jiti-cli.mjs`, 'scripts/stand-in.ts', 'stripe', '--port', '0', '--webhook-url', receiver.url],
      env: process.env,
    })
    try {
      await pollUntil('the stand-in prints its environment', async () => /npm run dev\n/.test(child.output()), { timeoutMs: 45_000 })
      const [, url = ''] = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(child.output()) ?? []
      const envLine = /^ {2}(PAYMENT_PROVIDER=stripe .*) npm run dev$/m.exec(child.output())?.[1] ?? ''
      const env = Object.fromEntries(envLine.split(' ').map(pair => pair.split('=', 2) as [string, string]))
      expect(env).toEqual({ PAYMENT_PROVIDER: 'stripe', STRIPE_API_BASE: url, STRIPE_SECRET_KEY: expect.stringMatching(/^sk_test_/), WEBHOOK_STRIPE_SECRET: expect.stringMatching(/^whsec_/) })
      expect(parseConfig(env)).toMatchObject({ PAYMENT_PROVIDER: 'stripe', STRIPE_API_BASE: url, webhookProviders: expect.arrayContaining(['stripe']) })
      // The same settings start a built server: parsed as above, i.e. outside `nuxt dev`.
      expect(child.output()).toContain(`\n  ${envLine} npm start\n`)

      const port = Number(new URL(url).port)
      const client = new Stripe(env.STRIPE_SECRET_KEY!, { host: '127.0.0.1', port, protocol: 'http', maxNetworkRetries: 0 })
      const intent = await client.paymentIntents.create({ amount: 1500, currency: 'usd', metadata: { order_id: 'ord_1' } })
      const control = (path: string) => fetch(`${url}/_stand-in${path}`, { method: 'POST' })
      const paid = await control(`/payment_intents/${intent.id}/succeed`)
      expect(paid.status).toBe(200)
      expect(await paid.json()).toMatchObject({ id: intent.id, status: 'succeeded' })
      expect((await control(`/payment_intents/${intent.id}/succeed`)).status).toBe(409)
      expect((await control('/payment_intents/pi_missing/succeed')).status).toBe(404)
      const refund = await fetch(`${url}/_stand-in/payment_intents/${intent.id}/refund`, { method: 'POST', body: JSON.stringify({ amount: 500 }) })
      expect(await refund.json()).toMatchObject({ object: 'refund', amount: 500, metadata: {} })
      expect((await client.paymentIntents.retrieve(intent.id)).status).toBe('succeeded')

      await pollUntil('the three webhooks have arrived', async () => receiver.received.length === 3)
      const types = receiver.received.map(({ headers, body }) => {
        expect(stripeProvider.verify(deliveryOf(body, { 'stripe-signature': String(headers['stripe-signature']) }), env.WEBHOOK_STRIPE_SECRET!)).toEqual({ ok: true })
        return (JSON.parse(body) as { type: string }).type
      })
      expect(types).toEqual(['payment_intent.succeeded', 'refund.created', 'charge.refunded'])
    }
    finally {
      await child.stop()
      await receiver.close()
    }
    expect(await child.exited).toBe(0)
  })
})
