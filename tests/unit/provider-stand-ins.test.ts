import { createHash } from 'node:crypto'
import midtransClient from 'midtrans-client'
import Stripe from 'stripe'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { midtransProvider } from '../../server/webhooks/providers/midtrans'
import { stripeProvider } from '../../server/webhooks/providers/stripe'
import type { WebhookDelivery } from '../../server/webhooks/types'
import { type MidtransApi, startMidtransApi } from '../support/midtrans-api'
import { pollUntil } from '../support/poll'
import { type StripeApi, startStripeApi, stripeSignature } from '../support/stripe-api'

/**
 * The provider stand-ins, driven by the official SDKs: what the clients send is what the stand-ins
 * parse, and what the stand-ins answer (successes, each error shape, lost responses) is what the
 * clients turn into the results and error classes the app handles.
 */

const secretKey = 'sk_test_standin_0123456789abcdef'
const serverKey = 'SB-Mid-server-standin0123456789'

/** Rejects with what `promise` threw, or fails the test when it resolved. */
async function failureOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise
  }
  catch (error) {
    return error
  }
  throw new Error('expected the call to fail, it succeeded')
}

const deliveryOf = (body: string, headers: Record<string, string> = {}): WebhookDelivery => ({
  body: Buffer.from(body),
  header: name => headers[name.toLowerCase()],
  nowSeconds: Math.floor(Date.now() / 1000),
})

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
})
