import { generateKeyPairSync, randomUUID, sign } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import ky, { HTTPError, type RetryOptions } from 'ky'
import { FetchError, type FetchOptions, type FetchResponse, ofetch } from 'ofetch'
import { Webhook as StandardWebhook } from 'standardwebhooks'
import Stripe from 'stripe'
import { Webhook as SvixWebhook } from 'svix'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { stripeClientOptions } from '../../server/payments/stripe'
import { fastJobsEnv, stopAll, testSecrets } from '../support/app'
import { request, type TestResponse } from '../support/http'
import { untilRequestInFlight } from '../support/in-flight'
import { expectProblem, type OrdersStack, postOrder, startOrdersStack, validOrderBody } from '../support/orders'
import {
  historyOf, jobsOf, orderWhen, placeOrder, processedEvents, type ProviderStack, settledJob, startProviderStack, stripeCreates, stripeEnv,
  stripeIntentsOf, stripeSecretKey, usdOrderBody, webhookEventsOf,
} from '../support/providers'
import { describeWithServices } from '../support/services'
import { type StripeApi, startStripeApi } from '../support/stripe-api'
import { deliver, newWebhookId, nowSeconds, type SignedDelivery, standardBody, webhookRowCounts } from '../support/webhooks'

// The clients people use against this API, not the project's own helpers, against the built server
// on Postgres and Redis: ofetch (Nuxt's $fetch) and ky configured as docs/clients.md recommends,
// under the commit faults (a duplicate while the first is in flight, an answer lost after the
// commit); the key minted in a per-attempt hook, which defeats idempotency; Standard Webhooks
// deliveries signed by the standardwebhooks and svix packages; and stripe-node, the app's own client
// of Stripe, against the Stripe stand-in. Each claim of docs/clients.md names its test here.

// docs/clients.md quotes these two option objects verbatim: keep them in step.

/** ofetch retries a POST only when `retry` is set; it counts a request that got no response as a 500. */
const ofetchRetryOptions = {
  retry: 3,
  retryStatusCodes: [408, 409, 425, 429, 500, 502, 503, 504],
  // ofetch ignores Retry-After by itself; this API sends it in seconds.
  retryDelay: ({ response }) => Number(response?.headers.get('retry-after') ?? 0.5) * 1000,
} satisfies FetchOptions

/** ky retries network errors of the listed methods; it waits Retry-After only for `afterStatusCodes`. */
const kyRetryOptions = {
  limit: 3,
  methods: ['post'],
  statusCodes: [408, 409, 429, 500, 502, 503, 504],
  afterStatusCodes: [409, 413, 429, 503],
} satisfies RetryOptions

/** One request a client put on the wire, and what came back. */
interface Attempt {
  idempotencyKey: string | null
  fault: string | null
  status: number | 'no response'
  retryAfter: string | null
  replayed: string | null
  /** Date.now() when sent. */
  at: number
}

/**
 * The network under a client (its `fetch` option): records every attempt, and sends the first with
 * `X-Fault: firstAttemptFault`, so the incident happens once and the client's retries go clean.
 */
function recordingFetch(firstAttemptFault?: string) {
  const attempts: Attempt[] = []
  const recorded = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const outgoing = new Request(input, init)
    if (firstAttemptFault && attempts.length === 0) outgoing.headers.set('x-fault', firstAttemptFault)
    const attempt: Attempt = {
      idempotencyKey: outgoing.headers.get('idempotency-key'),
      fault: outgoing.headers.get('x-fault'),
      status: 'no response',
      retryAfter: null,
      replayed: null,
      at: Date.now(),
    }
    attempts.push(attempt)
    const response = await fetch(outgoing)
    Object.assign(attempt, { status: response.status, retryAfter: response.headers.get('retry-after'), replayed: response.headers.get('idempotent-replayed') })
    return response
  }
  return { fetch: recorded, attempts }
}

interface Target { baseUrl: string, secretKey: string, fetch: typeof fetch }

/** How a client's call ended: its final response, or none at all. */
type Outcome = { status: number, replayed: string | null, body: any } | { noResponse: true }

interface ClientUnderTest {
  name: string
  /** The hook the client runs before every attempt, retries included. */
  perAttemptHook: string
  /** The recommended configuration: `key` minted once for the operation, outside any hook. */
  post: (target: Target, path: string, body: unknown, key: string) => Promise<Outcome>
  /** The trap: a key minted inside `perAttemptHook`. */
  postMintingKeyInHook: (target: Target, path: string, body: unknown) => Promise<Outcome>
}

async function ofetchOutcome(call: Promise<FetchResponse<any>>): Promise<Outcome> {
  try {
    const response = await call
    return { status: response.status, replayed: response.headers.get('idempotent-replayed'), body: response._data }
  }
  catch (error) {
    if (!(error instanceof FetchError)) throw error
    if (!error.response) return { noResponse: true }
    return { status: error.response.status, replayed: error.response.headers.get('idempotent-replayed'), body: error.data }
  }
}

async function kyOutcome(call: Promise<Response>): Promise<Outcome> {
  try {
    const response = await call
    return { status: response.status, replayed: response.headers.get('idempotent-replayed'), body: await response.json() }
  }
  catch (error) {
    if (error instanceof HTTPError) return { status: error.response.status, replayed: error.response.headers.get('idempotent-replayed'), body: await error.response.json() }
    // fetch's own failure: the connection closed without an answer, on the last attempt too.
    if (error instanceof TypeError) return { noResponse: true }
    throw error
  }
}

const ofetchClient: ClientUnderTest = {
  name: 'ofetch',
  perAttemptHook: 'onRequest',
  post: ({ baseUrl, secretKey, fetch }, path, body, key) => ofetchOutcome(
    ofetch.create({ baseURL: baseUrl, headers: { authorization: `Bearer ${secretKey}` }, ...ofetchRetryOptions }, { fetch })
      .raw(path, { method: 'POST', body: body as Record<string, unknown>, headers: { 'Idempotency-Key': key } })),
  postMintingKeyInHook: ({ baseUrl, secretKey, fetch }, path, body) => ofetchOutcome(
    ofetch.create({
      baseURL: baseUrl,
      headers: { authorization: `Bearer ${secretKey}` },
      ...ofetchRetryOptions,
      onRequest({ options }) {
        options.headers.set('Idempotency-Key', randomUUID())
      },
    }, { fetch }).raw(path, { method: 'POST', body: body as Record<string, unknown> })),
}

const kyClient: ClientUnderTest = {
  name: 'ky',
  perAttemptHook: 'beforeRequest',
  post: ({ baseUrl, secretKey, fetch }, path, body, key) => kyOutcome(
    ky.create({ prefixUrl: baseUrl, headers: { authorization: `Bearer ${secretKey}` }, retry: kyRetryOptions, fetch })
      .post(path, { json: body, headers: { 'Idempotency-Key': key } })),
  postMintingKeyInHook: ({ baseUrl, secretKey, fetch }, path, body) => kyOutcome(
    ky.create({
      prefixUrl: baseUrl,
      headers: { authorization: `Bearer ${secretKey}` },
      retry: kyRetryOptions,
      fetch,
      hooks: {
        beforeRequest: [(outgoing) => {
          outgoing.headers.set('Idempotency-Key', randomUUID())
        }],
      },
    }).post(path, { json: body })),
}

const standardSecret = testSecrets.webhookStandardSecret

/** A sender of Standard Webhooks: its package's signature, under its header names. */
interface WebhookSender { library: string, headerPrefix: 'webhook' | 'svix', sign: (id: string, at: number, body: string) => string }

const standardwebhooksSender: WebhookSender = {
  library: 'standardwebhooks',
  headerPrefix: 'webhook',
  sign: (id, at, body) => new StandardWebhook(standardSecret).sign(id, new Date(at * 1000), body),
}
const svixSender: WebhookSender = {
  library: 'svix',
  headerPrefix: 'svix',
  sign: (id, at, body) => new SvixWebhook(standardSecret).sign(id, new Date(at * 1000), body),
}

function senderDelivery(sender: WebhookSender, id: string, body: string, at: number, signature = sender.sign(id, at, body)): SignedDelivery {
  const prefix = sender.headerPrefix
  return {
    path: '/api/webhooks/standard',
    headers: { 'content-type': 'application/json', [`${prefix}-id`]: id, [`${prefix}-timestamp`]: String(at), [`${prefix}-signature`]: signature },
    body,
  }
}

/** An asymmetric (ed25519) Standard Webhooks signature, which the app does not verify. */
function v1aSignature(id: string, at: number, body: string): string {
  const { privateKey } = generateKeyPairSync('ed25519')
  return `v1a,${sign(null, Buffer.from(`${id}.${at}.${body}`), privateKey).toString('base64')}`
}

/**
 * Sends early in a second what `send` builds from that second, and keeps the answer only if the
 * clock still shows the same second after it: the server, on this machine's clock, then read that
 * second too, so the skew it judged is exactly the one signed. Otherwise sends again.
 */
async function sentWithinOneSecond<T>(send: (now: number) => Promise<T>): Promise<T> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const intoSecond = Date.now() % 1000
    if (intoSecond > 200) await sleep(1000 - intoSecond)
    const now = nowSeconds()
    const answer = await send(now)
    if (nowSeconds() === now) return answer
  }
  throw new Error('five sends in a row crossed a second boundary')
}

function expectReceived(response: TestResponse, eventId: string, replayed: boolean): void {
  expect(response.status, response.text).toBe(200)
  expect(response.json).toEqual({ received: true, eventId, idempotency: { key: eventId, replayed } })
  expect(response.headers.get('idempotent-replayed')).toBe(replayed ? 'true' : null)
}

describeWithServices('third-party clients against the built server', ['postgres', 'redis'], () => {
  /** On mockpay: the clients and webhook senders. */
  let stack: OrdersStack
  let stripeApi: StripeApi
  /** On the Stripe stand-in: stripe-node. */
  let stripeStack: ProviderStack

  beforeAll(async () => {
    // Side by side: each app mostly waits on its own start-up.
    const started = await Promise.allSettled([
      startOrdersStack('third-party-clients', { ...fastJobsEnv, MOCKPAY_DUPLICATES: '0', MOCKPAY_MAX_DELAY_MS: '0' }).then((mockpayStack) => {
        stack = mockpayStack
      }),
      startStripeApi({ secretKey: stripeSecretKey }).then(async (api) => {
        stripeApi = api
        stripeStack = await startProviderStack('third_party_clients_stripe', { ...stripeEnv(api), ...fastJobsEnv })
      }),
    ])
    for (const start of started) if (start.status === 'rejected') throw start.reason
  })

  afterAll(async () => {
    await stack?.close()
    await stripeStack?.close()
    await stripeApi?.close()
    await stopAll()
  })

  describe('on mockpay, with the in-app worker', () => {
    const target = (wire: { fetch: typeof fetch }): Target => ({ baseUrl: stack.app.url, secretKey: stack.tenant.secretKey, fetch: wire.fetch })

    const ordersOfCart = (cartId: string) =>
      stack.sql<Array<{ id: string, idempotencyKey: string }>>`select id, idempotency_key as "idempotencyKey" from orders where cart_id = ${cartId} order by created_at`

    const refundsOf = (orderId: string) =>
      stack.sql<Array<{ id: string, amount: number, idempotencyKey: string }>>`
        select id, amount::int as amount, idempotency_key as "idempotencyKey" from refunds where order_id = ${orderId} order by created_at, id`

    /** An order paid through mockpay (its intent confirmed, its webhook applied). */
    async function paidOrder(): Promise<string> {
      const created = await postOrder(stack.app.url, { secretKey: stack.tenant.secretKey, key: randomUUID(), body: validOrderBody() })
      expect(created.status, created.text).toBe(201)
      const orderId: string = created.json.id
      const { paymentIntentId } = await orderWhen(stack, orderId, 'has a mockpay intent', order => order.paymentIntentId !== null)
      const confirmed = await request(stack.app.url, `/api/mockpay/intents/${paymentIntentId}/confirm`, { method: 'POST', body: { outcome: 'succeed', chaos: { duplicates: 0, maxDelayMs: 0 } } })
      expect(confirmed.status, confirmed.text).toBe(200)
      await orderWhen(stack, orderId, 'is paid', order => order.status === 'paid')
      return orderId
    }

    describe.each([ofetchClient, kyClient])('$name, configured as docs/clients.md recommends', (client) => {
      it('a duplicate sent while the first is in flight gets 409 request-in-progress, waits its Retry-After, and ends with the first order\'s replay: one order', async () => {
        const key = randomUUID()
        const body = validOrderBody()
        const firstWire = recordingFetch('delay-before-commit=800')
        const first = client.post(target(firstWire), 'api/orders', body, key)
        await untilRequestInFlight(stack.sql, { app: stack.app, scope: `tenant:${stack.tenant.tenantId}`, key })

        const duplicateWire = recordingFetch()
        const duplicate = await client.post(target(duplicateWire), 'api/orders', body, key)
        const original = await first

        expect(original).toEqual({ status: 201, replayed: null, body: expect.objectContaining({ object: 'order', cartId: body.cartId, idempotency: { key, replayed: false } }) })
        expect(duplicate).toEqual({ status: 201, replayed: 'true', body: { ...(original as { body: object }).body, idempotency: { key, replayed: true } } })
        expect(firstWire.attempts.map(attempt => [attempt.idempotencyKey, attempt.status])).toEqual([[key, 201]])
        const attempts = duplicateWire.attempts
        const waited = attempts.slice(0, -1)
        expect(waited.length).toBeGreaterThanOrEqual(1)
        expect(waited.map(attempt => [attempt.idempotencyKey, attempt.status, attempt.retryAfter])).toEqual(waited.map(() => [key, 409, '1']))
        expect(attempts.at(-1)).toMatchObject({ idempotencyKey: key, status: 201, replayed: 'true' })
        // Each retry came after the 1 s the 409 asked for.
        for (let index = 1; index < attempts.length; index++) expect(attempts[index]!.at - attempts[index - 1]!.at).toBeGreaterThanOrEqual(950)
        expect(await ordersOfCart(body.cartId)).toEqual([{ id: (original as { body: { id: string } }).body.id, idempotencyKey: key }])
      })

      it('an answer lost after the commit (drop-after-commit) is retried under the same key and replayed: 201, Idempotent-Replayed, one order', async () => {
        const key = randomUUID()
        const body = validOrderBody()
        const wire = recordingFetch('drop-after-commit')

        const outcome = await client.post(target(wire), 'api/orders', body, key)

        expect(wire.attempts.map(attempt => [attempt.idempotencyKey, attempt.fault, attempt.status])).toEqual([[key, 'drop-after-commit', 'no response'], [key, null, 201]])
        const [order, ...others] = await ordersOfCart(body.cartId)
        expect(others).toEqual([])
        expect(order).toEqual({ id: expect.stringMatching(/^ord_/), idempotencyKey: key })
        expect(outcome).toEqual({ status: 201, replayed: 'true', body: expect.objectContaining({ id: order!.id, cartId: body.cartId, idempotency: { key, replayed: true } }) })
      })

      it(`the trap, a key minted in ${client.perAttemptHook}: the lost answer's retry is a new request under a new key; the cart's constraint answers 409 cart-already-ordered to each, and the client never gets its order`, async () => {
        const body = validOrderBody()
        const wire = recordingFetch('drop-after-commit')

        const outcome = await client.postMintingKeyInHook(target(wire), 'api/orders', body)

        const keys = wire.attempts.map(attempt => attempt.idempotencyKey)
        expect(new Set(keys).size).toBe(4)
        expect(wire.attempts.map(attempt => attempt.status)).toEqual(['no response', 409, 409, 409])
        // One order only because an order has a natural key, its cart; see the refund below for what has none.
        const [order, ...others] = await ordersOfCart(body.cartId)
        expect(others).toEqual([])
        expect(order!.idempotencyKey).toBe(keys[0])
        expect(outcome).toEqual({ status: 409, replayed: null, body: expect.objectContaining({ type: '/problems/cart-already-ordered', orderId: order!.id }) })
      })

      it(`the trap on a refund, which has no natural key: with the key minted in ${client.perAttemptHook} a lost answer makes two refunds; minted once, one`, async () => {
        const orderId = await paidOrder()
        const path = `api/orders/${orderId}/refunds`
        const trapWire = recordingFetch('drop-after-commit')

        const trapped = await client.postMintingKeyInHook(target(trapWire), path, { amount: 10_000 })

        const trapKeys = trapWire.attempts.map(attempt => attempt.idempotencyKey)
        expect(trapWire.attempts.map(attempt => attempt.status)).toEqual(['no response', 201])
        expect(trapKeys[0]).not.toBe(trapKeys[1])
        const twice = await refundsOf(orderId)
        expect(twice).toEqual([
          { id: expect.stringMatching(/^re_/), amount: 10_000, idempotencyKey: trapKeys[0] },
          { id: expect.stringMatching(/^re_/), amount: 10_000, idempotencyKey: trapKeys[1] },
        ])
        expect(trapped).toEqual({ status: 201, replayed: null, body: expect.objectContaining({ id: twice[1]!.id, amount: 10_000, idempotency: { key: trapKeys[1], replayed: false } }) })

        const key = randomUUID()
        const wire = recordingFetch('drop-after-commit')
        const once = await client.post(target(wire), path, { amount: 10_000 }, key)

        expect(wire.attempts.map(attempt => [attempt.idempotencyKey, attempt.status])).toEqual([[key, 'no response'], [key, 201]])
        const refunds = await refundsOf(orderId)
        expect(refunds).toEqual([...twice, { id: expect.stringMatching(/^re_/), amount: 10_000, idempotencyKey: key }])
        expect(once).toEqual({ status: 201, replayed: 'true', body: expect.objectContaining({ id: refunds[2]!.id, idempotency: { key, replayed: true } }) })
      })
    })

    it('ofetch with retryStatusCodes lacking 500 does not retry a lost answer: it counts a request that got no response as a 500', async () => {
      const key = randomUUID()
      const body = validOrderBody()
      const wire = recordingFetch('drop-after-commit')
      const api = ofetch.create({ baseURL: stack.app.url, headers: { authorization: `Bearer ${stack.tenant.secretKey}` }, ...ofetchRetryOptions, retryStatusCodes: [409, 503] }, { fetch: wire.fetch })

      const outcome = await ofetchOutcome(api.raw('api/orders', { method: 'POST', body, headers: { 'Idempotency-Key': key } }))

      expect(outcome).toEqual({ noResponse: true })
      expect(wire.attempts.map(attempt => attempt.status)).toEqual(['no response'])
      expect(await ordersOfCart(body.cartId)).toEqual([{ id: expect.stringMatching(/^ord_/), idempotencyKey: key }])
    })

    describe('Standard Webhooks senders to POST /api/webhooks/standard', () => {
      async function createOrder() {
        const created = await postOrder(stack.app.url, { secretKey: stack.tenant.secretKey, key: randomUUID(), body: validOrderBody() })
        expect(created.status, created.text).toBe(201)
        const { id, amount, currency } = created.json
        return { id: id as string, body: standardBody('payment.succeeded', { orderId: id, paymentId: `pay_${id}`, amount, currency }) }
      }

      const eventsWithId = (eventId: string) => stack.sql`select id from webhook_events where provider = 'standard' and event_id = ${eventId}`

      it.each([standardwebhooksSender, svixSender])('$library: what it signs (under its own header names) is accepted and applied once; the same id re-signed at a new timestamp is the first delivery\'s replay, applied once', async (sender) => {
        const order = await createOrder()
        const webhookId = newWebhookId()
        const firstDelivery = senderDelivery(sender, webhookId, order.body, nowSeconds() - 60)
        expect(Object.keys(firstDelivery.headers)).toEqual(['content-type', `${sender.headerPrefix}-id`, `${sender.headerPrefix}-timestamp`, `${sender.headerPrefix}-signature`])

        const first = await deliver(stack.app.url, firstDelivery)

        expectReceived(first, webhookId, false)
        // Stored with the headers it was verified by, under the names it was sent with.
        const { 'content-type': _, ...signedWith } = firstDelivery.headers
        expect(await stack.sql`select signature_headers as "signatureHeaders" from webhook_events where provider = 'standard' and event_id = ${webhookId}`).toEqual([{ signatureHeaders: signedWith }])
        expect(await processedEvents(stack.sql, order.id)).toEqual([expect.objectContaining({ provider: 'standard', eventId: webhookId, type: 'payment.succeeded', status: 'applied' })])
        expect(await historyOf(stack.sql, order.id)).toEqual([expect.objectContaining({ fromStatus: 'pending_payment', toStatus: 'paid', outcome: 'applied' })])
        const before = await webhookRowCounts(stack.sql)

        const redelivery = senderDelivery(sender, webhookId, order.body, nowSeconds())
        expect(redelivery.headers[`${sender.headerPrefix}-signature`]).not.toBe(firstDelivery.headers[`${sender.headerPrefix}-signature`])
        const replay = await deliver(stack.app.url, redelivery)

        expectReceived(replay, webhookId, true)
        expect(replay.text).toBe(first.text.replace('"replayed":false', '"replayed":true'))
        expect(await webhookRowCounts(stack.sql)).toEqual(before)
        expect(await webhookEventsOf(stack.sql, order.id)).toHaveLength(1)
        expect(await jobsOf(stack.sql, order.id, 'webhook.apply')).toEqual([expect.objectContaining({ status: 'completed' })])
        expect(await historyOf(stack.sql, order.id)).toHaveLength(1)
      })

      it('a rotation list: a v1a (asymmetric) entry is skipped and the valid v1 beside it accepted; v1a alone is 401 and stores nothing', async () => {
        const order = await createOrder()
        const webhookId = newWebhookId()
        const at = nowSeconds()
        const v1a = v1aSignature(webhookId, at, order.body)
        const before = await webhookRowCounts(stack.sql)

        const v1aOnly = await deliver(stack.app.url, senderDelivery(standardwebhooksSender, webhookId, order.body, at, v1a))

        expectProblem(v1aOnly, 'webhook-signature-invalid')
        expect(await webhookRowCounts(stack.sql)).toEqual(before)
        const rotation = `${v1a} ${standardwebhooksSender.sign(webhookId, at, order.body)}`
        // The id was not taken by the refusal: the first accepted delivery is not a replay.
        expectReceived(await deliver(stack.app.url, senderDelivery(standardwebhooksSender, webhookId, order.body, at, rotation)), webhookId, false)
        expect(await eventsWithId(webhookId)).toHaveLength(1)
      })

      it('timestamps: exactly 300 s old or ahead are accepted, 301 s either way 401 webhook-signature-invalid with nothing stored (the specification\'s 5 minutes)', async () => {
        const order = await createOrder()
        for (const offset of [-301, -300, 300, 301]) {
          const { webhookId, response } = await sentWithinOneSecond(async (now) => {
            const id = newWebhookId()
            return { webhookId: id, response: await deliver(stack.app.url, senderDelivery(standardwebhooksSender, id, order.body, now + offset)) }
          })
          if (Math.abs(offset) <= 300) {
            expectReceived(response, webhookId, false)
            expect(await eventsWithId(webhookId), `${offset} s`).toHaveLength(1)
          }
          else {
            expectProblem(response, 'webhook-signature-invalid')
            expect(response.json.detail, `${offset} s`).toContain(`timestamp 301 s ${offset < 0 ? 'old' : 'in the future'} (tolerance 300 s)`)
            expect(await eventsWithId(webhookId), `${offset} s`).toEqual([])
          }
        }
      })
    })
  })

  describe('stripe-node, the app\'s own client of Stripe, against the Stripe stand-in', () => {
    const CREATE = 'payment.create_intent'

    beforeEach(() => {
      stripeApi.calls.length = 0
      stripeApi.script.length = 0
    })

    it('a 500 with Stripe-Should-Retry: false is not resent by stripe-node, even with its own retries on; the job asks again later under order:<id>:payment; one PaymentIntent', async () => {
      const doNotRetry = { match: 'create', fault: { kind: 'status', status: 500, headers: { 'stripe-should-retry': 'false' } } } as const
      // The app's client options, but stripe-node's default of 2 retries: the header alone stops it.
      const retrying = new Stripe(stripeSecretKey, { ...stripeClientOptions({ STRIPE_SECRET_KEY: stripeSecretKey, STRIPE_API_BASE: stripeApi.url, PAYMENT_PROVIDER_TIMEOUT_MS: 5_000 }), maxNetworkRetries: 2 })
      const directKey = `clients-direct-${randomUUID()}`
      stripeApi.script.push(doNotRetry)
      await expect(retrying.paymentIntents.create({ amount: 4_200, currency: 'usd' }, { idempotencyKey: directKey })).rejects.toMatchObject({ type: 'StripeAPIError', statusCode: 500 })
      expect(stripeApi.idempotencyKeyUses('create')).toEqual(new Map([[directKey, 1]]))

      stripeApi.script.push(doNotRetry)
      const orderId = await placeOrder(stripeStack, usdOrderBody())
      const job = await settledJob(stripeStack.sql, orderId, CREATE)

      expect(job).toMatchObject({ status: 'completed', attempt: 2, lastError: null })
      expect(job.errors).toEqual([expect.objectContaining({ attempt: 1, errorClass: 'retryable', message: expect.stringContaining('Stripe api_error (HTTP 500): ') })])
      expect(stripeCreates(stripeApi, orderId).map(call => [call.idempotencyKey, call.answered])).toEqual([[`order:${orderId}:payment`, 500], [`order:${orderId}:payment`, 200]])
      const intents = stripeIntentsOf(stripeApi, orderId)
      expect(intents).toHaveLength(1)
      expect((await orderWhen(stripeStack, orderId, 'holds its intent', order => order.paymentIntentId !== null)).paymentIntentId).toBe(intents[0]!.id)
    })

    it('a connection the stand-in closes without answering is resent by stripe-node itself under the same key: one PaymentIntent, the job done at its first attempt', async () => {
      stripeApi.script.push({ match: 'create', fault: { kind: 'drop-before' } })
      const orderId = await placeOrder(stripeStack, usdOrderBody())
      const job = await settledJob(stripeStack.sql, orderId, CREATE)

      expect(job).toMatchObject({ status: 'completed', attempt: 1, errors: [], lastError: null })
      expect(stripeCreates(stripeApi, orderId).map(call => [call.idempotencyKey, call.answered])).toEqual([[`order:${orderId}:payment`, 'dropped'], [`order:${orderId}:payment`, 200]])
      const intents = stripeIntentsOf(stripeApi, orderId)
      expect(intents).toHaveLength(1)
      expect((await orderWhen(stripeStack, orderId, 'holds its intent', order => order.paymentIntentId !== null)).paymentIntentId).toBe(intents[0]!.id)
    })
  })
})
