import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { fastJobsEnv, stopAll } from '../support/app'
import { request, type TestResponse } from '../support/http'
import { effectsPerOrder } from '../support/jobs'
import { opsRequest } from '../support/ops'
import { expectProblem, newIdempotencyKey, type OrdersStack, postOrder, requestIdPattern, startOrdersStack, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { type PrismProxy, startPrism } from '../support/prism'
import type { HistoryView } from '../support/providers'
import { describeWithServices } from '../support/services'
import {
  deliver,
  newWebhookId,
  nowSeconds,
  type SignedDelivery,
  standardBody,
  standardDelivery,
  type StandardEventType,
  stripeBody,
  stripeDelivery,
  type StripeEventType,
  webhookRowCounts,
} from '../support/webhooks'

// docs/webhooks.md: POST /api/webhooks/:provider against the built server on real Postgres and
// Redis, with the in-app worker applying what was accepted. A delivery is verified on its raw
// bytes, stored once with its webhook.apply job, answered at once, and applied by precedence; rows
// are read straight from the app's database to check what each answer claims. Deliveries and reads
// go through Prism, which checks every exchange against the OpenAPI document; those the document
// itself calls invalid (or that Prism cannot parse to forward) go to the server directly, through
// `sendDirect`.

/** A Standard Webhooks secret the app does not have. */
const foreignStandardSecret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`

interface CreatedOrder { id: string, amount: number, currency: string }

interface StoredEvent {
  id: string
  provider: string
  eventId: string
  type: string
  orderId: string
  paymentId: string | null
  amount: number | null
  currency: string | null
  rawBody: string
  signatureHeaders: Record<string, string>
  status: string
  requestId: string
  processed: boolean
}

/** A status change as these tests read it: without the job that made it. */
type HistoryRow = Omit<HistoryView, 'jobId'>

describeWithServices('POST /api/webhooks/:provider with the in-app worker', ['postgres', 'redis'], () => {
  let stack: OrdersStack
  let prism: PrismProxy

  beforeAll(async () => {
    stack = await startOrdersStack('webhooks-api', fastJobsEnv)
    prism = await startPrism({ upstream: stack.app.url, label: 'webhooks-api prism' })
  })

  afterAll(async () => {
    await prism?.stop()
    await stack?.close()
    await stopAll()
  })

  const sql = () => stack.sql
  /** Checked by Prism against the document. */
  const api = () => prism.url
  const send = (delivery: SignedDelivery) => deliver(api(), delivery)
  /** Past Prism, which would refuse the delivery (or fail to parse it) before the server saw it. */
  const sendDirect = (delivery: SignedDelivery) => deliver(stack.app.url, delivery)

  /** A fresh pending order through the API (IDR 150 000). */
  async function createOrder(): Promise<CreatedOrder> {
    const created = await postOrder(api(), { secretKey: stack.tenant.secretKey, key: newIdempotencyKey(), body: validOrderBody() })
    expect(created.status, created.text).toBe(201)
    return { id: created.json.id, amount: created.json.amount, currency: created.json.currency }
  }

  const paymentData = (order: CreatedOrder, overrides: { amount?: number } = {}) =>
    ({ orderId: order.id, paymentId: `pay_${order.id}`, amount: overrides.amount ?? order.amount, currency: order.currency })

  /** A signed Standard Webhooks delivery of a new event about `order`. */
  function standardEvent(type: StandardEventType, order: CreatedOrder, options: { webhookId?: string, amount?: number, at?: number } = {}) {
    const webhookId = options.webhookId ?? newWebhookId()
    const body = standardBody(type, paymentData(order, options))
    return { webhookId, body, delivery: standardDelivery(webhookId, body, { at: options.at }) }
  }

  /** The 200 a provider gets for an event: its id, and whether this delivery was a redelivery. */
  function expectReceived(response: TestResponse, eventId: string, replayed: boolean): void {
    expect(response.status, response.text).toBe(200)
    expect(response.headers.get('content-type')).toMatch(/^application\/json\b/)
    expect(response.json).toEqual({ received: true, eventId, idempotency: { key: eventId, replayed } })
    expect(response.headers.get('idempotent-replayed')).toBe(replayed ? 'true' : null)
    expect(response.headers.get('x-request-id')).toMatch(requestIdPattern)
  }

  async function eventsOfOrder(orderId: string): Promise<StoredEvent[]> {
    return sql()<StoredEvent[]>`
      select id, provider, event_id as "eventId", type, order_id as "orderId", payment_id as "paymentId", amount::int as amount,
        currency, raw_body as "rawBody", signature_headers as "signatureHeaders", status, request_id as "requestId",
        processed_at is not null as processed
      from webhook_events where order_id = ${orderId} order by received_at, id`
  }

  async function eventsWithId(provider: string, eventId: string): Promise<StoredEvent[]> {
    return sql()<StoredEvent[]>`
      select id, provider, event_id as "eventId", type, order_id as "orderId", payment_id as "paymentId", amount::int as amount,
        currency, raw_body as "rawBody", signature_headers as "signatureHeaders", status, request_id as "requestId",
        processed_at is not null as processed
      from webhook_events where provider = ${provider} and event_id = ${eventId}`
  }

  async function historyOf(orderId: string): Promise<HistoryRow[]> {
    return sql()<HistoryRow[]>`
      select from_status as "fromStatus", requested_status as "requestedStatus", to_status as "toStatus", outcome, reason,
        webhook_event_id as "webhookEventId"
      from order_status_history where order_id = ${orderId} order by id`
  }

  async function applyJobsOf(orderId: string) {
    return sql()<Array<{ id: string, status: string, idempotencyKey: string | null, attempt: number, lastError: string | null }>>`
      select id, status, idempotency_key as "idempotencyKey", attempt, last_error as "lastError"
      from jobs where kind = 'webhook.apply' and resource_id = ${`order:${orderId}`} order by created_at, id`
  }

  async function jobKindsOf(orderId: string): Promise<string[]> {
    const rows = await sql()<Array<{ kind: string }>>`select kind from jobs where resource_id = ${`order:${orderId}`} order by kind`
    return rows.map(row => row.kind)
  }

  async function idempotencyRecordsFor(eventId: string) {
    return sql()<Array<{ scope: string, route: string, status: string, responseStatus: number | null }>>`
      select scope, route, status, response_status as "responseStatus" from idempotency_records where key = ${eventId}`
  }

  async function orderStatus(orderId: string): Promise<string | undefined> {
    const [row] = await sql()<Array<{ status: string }>>`select status from orders where id = ${orderId}`
    return row?.status
  }

  async function mailSubjects(orderId: string): Promise<string[]> {
    const rows = await sql()<Array<{ subject: string }>>`select subject from mailbox where order_id = ${orderId} order by subject`
    return rows.map(row => row.subject)
  }

  async function effectMarkers(orderId: string): Promise<string[]> {
    const rows = await sql()<Array<{ effect: string }>>`select effect from side_effects where order_id = ${orderId} order by effect`
    return rows.map(row => row.effect)
  }

  async function orderCount(): Promise<number> {
    const [row] = await sql()<Array<{ count: number }>>`select count(*)::int as count from orders`
    return row!.count
  }

  /**
   * Every event of the order applied or ignored and every job of the order (its payment intent, the
   * applies, the effects they enqueued) completed: nothing more will change on its own.
   */
  async function settled(orderId: string): Promise<void> {
    await pollUntil(`the events and jobs of order ${orderId} are done`, async () => {
      const [row] = await sql()<Array<{ received: number, unfinished: number }>>`
        select (select count(*)::int from webhook_events where order_id = ${orderId} and status = 'received') as received,
               (select count(*)::int from jobs where resource_id = ${`order:${orderId}`} and status <> 'completed') as unfinished`
      return row!.received === 0 && row!.unfinished === 0
    }, { timeoutMs: 20_000, intervalMs: 50 })
  }

  /** Effects once each, as the order's state implies them; `intents` is the order's own payment.create_intent. */
  async function expectEffectsOnce(orderId: string, expected: { confirmed: boolean, refunded: boolean, partlyRefunded?: boolean }): Promise<void> {
    const notices = [...(expected.refunded ? [`Order ${orderId} refunded`] : []), ...(expected.partlyRefunded ? [`Part of order ${orderId} refunded`] : [])]
    const markers = [...(expected.confirmed ? ['confirmation_email', 'invoice'] : []), ...notices.map(() => 'refund_notice')]
    const subjects = [...(expected.confirmed ? [`Order ${orderId} confirmed`] : []), ...notices]
    // A refund notice's marker names its refund: compared by kind.
    expect((await effectMarkers(orderId)).map(marker => marker.replace(/^refund_notice:re_.+$/, 'refund_notice')).sort()).toEqual(markers.sort())
    expect(await mailSubjects(orderId)).toEqual(subjects.sort())
    expect((await effectsPerOrder(sql(), [orderId])).get(orderId))
      .toEqual({ emails: subjects.length, invoices: expected.confirmed ? 1 : 0, markers: markers.length, intents: 1 })
  }

  /**
   * The server reads its clock in whole seconds after the request arrives: sign a "301 s in the
   * future" timestamp early in a second, so the server's second cannot have moved on (shrinking
   * the skew to 300 s, which is allowed) by the time it checks.
   */
  async function startOfASecond(): Promise<void> {
    const intoSecond = Date.now() % 1000
    if (intoSecond > 300) await sleep(1000 - intoSecond)
  }

  describe('standard (Standard Webhooks)', () => {
    it('accepts a new event: 200 received, one stored event with the exact raw body, one record and one job; the worker pays the order once', async () => {
      const order = await createOrder()
      const before = await webhookRowCounts(sql())
      const { webhookId, body, delivery } = standardEvent('payment.succeeded', order)

      const response = await send(delivery)

      expectReceived(response, webhookId, false)
      const [stored, ...otherEvents] = await eventsWithId('standard', webhookId)
      expect(otherEvents).toEqual([])
      expect(stored).toEqual({
        id: expect.stringMatching(/^whe_/),
        provider: 'standard',
        eventId: webhookId,
        type: 'payment.succeeded',
        orderId: order.id,
        paymentId: `pay_${order.id}`,
        amount: order.amount,
        currency: order.currency,
        rawBody: body,
        signatureHeaders: {
          'webhook-id': webhookId,
          'webhook-timestamp': delivery.headers['webhook-timestamp'],
          'webhook-signature': delivery.headers['webhook-signature'],
        },
        // Stored before it is applied; the worker may already be done by now.
        status: expect.stringMatching(/^(received|applied)$/),
        requestId: response.headers.get('x-request-id'),
        processed: expect.any(Boolean),
      })
      expect(await idempotencyRecordsFor(webhookId))
        .toEqual([{ scope: 'provider:standard', route: 'POST /api/webhooks/standard', status: 'succeeded', responseStatus: 200 }])
      const applyJobs = await applyJobsOf(order.id)
      expect(applyJobs).toEqual([expect.objectContaining({ idempotencyKey: webhookId })])

      await settled(order.id)
      expect(await orderStatus(order.id)).toBe('paid')
      const fetched = await request(api(), `/api/orders/${order.id}`, { headers: { authorization: `Bearer ${stack.tenant.secretKey}` } })
      expect(fetched.status, fetched.text).toBe(200)
      expect(fetched.json).toMatchObject({ id: order.id, status: 'paid' })
      expect(await eventsOfOrder(order.id)).toEqual([{ ...stored, status: 'applied', processed: true }])
      expect(await historyOf(order.id)).toEqual([
        { fromStatus: 'pending_payment', requestedStatus: 'paid', toStatus: 'paid', outcome: 'applied', reason: null, webhookEventId: stored!.id },
      ])
      expect(await applyJobsOf(order.id)).toEqual([{ ...applyJobs[0], status: 'completed', attempt: 1, lastError: null }])
      await expectEffectsOnce(order.id, { confirmed: true, refunded: false })
      expect(await jobKindsOf(order.id)).toEqual(['order.issue_invoice', 'order.send_confirmation', 'payment.create_intent', 'webhook.apply'])
      // One event, its record, its job, the two effect jobs it caused and one history row.
      expect(await webhookRowCounts(sql())).toEqual({
        webhookEvents: before.webhookEvents + 1,
        idempotencyRecords: before.idempotencyRecords + 1,
        jobs: before.jobs + 3,
        history: before.history + 1,
      })
    })

    it('replays a redelivery (same webhook-id, new timestamp and signature) with replayed:true and changes nothing', async () => {
      const order = await createOrder()
      const webhookId = newWebhookId()
      const body = standardBody('payment.succeeded', paymentData(order))
      const first = await send(standardDelivery(webhookId, body, { at: nowSeconds() - 60 }))
      expectReceived(first, webhookId, false)
      await settled(order.id)
      const before = await webhookRowCounts(sql())
      const events = await eventsOfOrder(order.id)

      const redelivery = standardDelivery(webhookId, body)
      expect(redelivery.headers['webhook-signature']).not.toBe(events[0]!.signatureHeaders['webhook-signature'])
      const replay = await send(redelivery)

      expectReceived(replay, webhookId, true)
      expect(replay.text).toBe(first.text.replace('"replayed":false', '"replayed":true'))
      // Nothing was stored or enqueued, so there is nothing for the worker to run again.
      expect(await webhookRowCounts(sql())).toEqual(before)
      expect(await eventsOfOrder(order.id)).toEqual(events)
      expect(await applyJobsOf(order.id)).toHaveLength(1)
      expect(await historyOf(order.id)).toHaveLength(1)
      expect(await orderStatus(order.id)).toBe('paid')
      await expectEffectsOnce(order.id, { confirmed: true, refunded: false })
    })

    it('50 concurrent identical deliveries of a new event: all 200, exactly one not replayed, one event, one job, effects once', async () => {
      const order = await createOrder()
      const before = await webhookRowCounts(sql())
      const { webhookId, delivery } = standardEvent('payment.succeeded', order)

      const responses = await Promise.all(Array.from({ length: 50 }, () => send(delivery)))

      expect(responses.map(response => response.status)).toEqual(Array(50).fill(200))
      const firsts = responses.filter(response => response.json.idempotency.replayed === false)
      expect(firsts).toHaveLength(1)
      for (const response of responses) expectReceived(response, webhookId, response !== firsts[0])

      await settled(order.id)
      expect(await eventsWithId('standard', webhookId)).toHaveLength(1)
      expect(await idempotencyRecordsFor(webhookId)).toHaveLength(1)
      expect(await applyJobsOf(order.id)).toEqual([expect.objectContaining({ status: 'completed', idempotencyKey: webhookId })])
      expect(await historyOf(order.id)).toEqual([expect.objectContaining({ outcome: 'applied', toStatus: 'paid' })])
      expect(await orderStatus(order.id)).toBe('paid')
      await expectEffectsOnce(order.id, { confirmed: true, refunded: false })
      expect(await webhookRowCounts(sql())).toEqual({
        webhookEvents: before.webhookEvents + 1,
        idempotencyRecords: before.idempotencyRecords + 1,
        jobs: before.jobs + 3,
        history: before.history + 1,
      })
    })

    it('rejects bad signatures and timestamps with 401 and stores nothing; a rotation list with one valid signature is accepted', async () => {
      const order = await createOrder()
      const before = await webhookRowCounts(sql())
      // One webhook-id for every attempt: if any rejected one had claimed it, the last would be a replay.
      const { webhookId, body, delivery } = standardEvent('payment.succeeded', order)
      const withoutSignature: Record<string, string> = { ...delivery.headers }
      delete withoutSignature['webhook-signature']

      const rejected: Array<[string, () => SignedDelivery | Promise<SignedDelivery>]> = [
        ['tampered body', () => ({ ...delivery, body: body.replace(`"amount":${order.amount}`, `"amount":${order.amount - 1}`) })],
        ['wrong secret', () => standardDelivery(webhookId, body, { secret: foreignStandardSecret })],
        ['missing webhook-signature', () => ({ ...delivery, headers: withoutSignature })],
        ['timestamp 301 s old', () => standardDelivery(webhookId, body, { at: nowSeconds() - 301 })],
        // 302, not 301: see the Stripe case below.
        ['timestamp 302 s in the future', async () => {
          await startOfASecond()
          return standardDelivery(webhookId, body, { at: nowSeconds() + 302 })
        }],
      ]
      for (const [what, make] of rejected) {
        const attempt = await make()
        // webhook-signature is the route's security scheme in the document: Prism answers its absence itself.
        const response = await (attempt.headers['webhook-signature'] === undefined ? sendDirect : send)(attempt)
        expectProblem(response, 'webhook-signature-invalid')
        expect(response.headers.get('idempotent-replayed'), what).toBeNull()
        expect(await webhookRowCounts(sql()), what).toEqual(before)
      }
      expect(await eventsWithId('standard', webhookId)).toEqual([])
      expect(await idempotencyRecordsFor(webhookId)).toEqual([])
      expect(await orderStatus(order.id)).toBe('pending_payment')

      // During a key rotation the sender signs with every active secret; one match is enough.
      const rotation = standardDelivery(webhookId, body, {
        extraSignatures: [standardDelivery(webhookId, body, { secret: foreignStandardSecret }).headers['webhook-signature']!, 'v1,bm90IGEgc2lnbmF0dXJl'],
      })
      expect(rotation.headers['webhook-signature']!.split(' ')).toHaveLength(3)
      expectReceived(await send(rotation), webhookId, false)
      await settled(order.id)
      expect(await orderStatus(order.id)).toBe('paid')
      expect(await eventsWithId('standard', webhookId)).toEqual([expect.objectContaining({ status: 'applied', rawBody: body })])
    })

    it('answers 404 not-found for an unknown provider and 400 payload-invalid for a signed body that is no known event; nothing stored', async () => {
      const order = await createOrder()
      const before = await webhookRowCounts(sql())
      const { webhookId, delivery } = standardEvent('payment.succeeded', order)

      // Direct: the document's operation for unknown providers takes no body, so Prism refuses this one's (422).
      const unknownProvider = await sendDirect({ ...delivery, path: '/api/webhooks/paypal' })
      expectProblem(unknownProvider, 'not-found')
      expect(await webhookRowCounts(sql())).toEqual(before)

      const unknownEvent = standardDelivery(webhookId, JSON.stringify({ type: 'payment.disputed', timestamp: '2026-11-29T10:00:00.000Z', data: paymentData(order) }))
      // Direct: Prism itself answers an event type the document does not have, and a body that is not JSON.
      const notUnderstood = await sendDirect(unknownEvent)
      expectProblem(notUnderstood, 'payload-invalid')
      expect(notUnderstood.json.detail).toContain('type')
      const notJson = await sendDirect(standardDelivery(webhookId, 'this is not json'))
      expectProblem(notJson, 'payload-invalid')
      expect(await webhookRowCounts(sql())).toEqual(before)

      // The key stayed free: the real event under the same webhook-id is new.
      expectReceived(await send(delivery), webhookId, false)
      await settled(order.id)
    })

    it('answers 422 idempotency-key-reused for the same webhook-id with another validly signed event, and keeps the first', async () => {
      const order = await createOrder()
      const { webhookId, body, delivery } = standardEvent('payment.succeeded', order)
      expectReceived(await send(delivery), webhookId, false)
      await settled(order.id)
      const before = await webhookRowCounts(sql())

      const reused = await send(standardDelivery(webhookId, standardBody('payment.failed', paymentData(order))))

      expectProblem(reused, 'idempotency-key-reused')
      expect(reused.headers.get('idempotent-replayed')).toBeNull()
      expect(await webhookRowCounts(sql())).toEqual(before)
      expect(await eventsWithId('standard', webhookId)).toEqual([expect.objectContaining({ type: 'payment.succeeded', rawBody: body, status: 'applied' })])
      expect(await orderStatus(order.id)).toBe('paid')
    })
  })

  describe('stripe', () => {
    const stripeEvent = (type: StripeEventType, order: CreatedOrder) => {
      const eventId = `evt_${randomUUID().replaceAll('-', '')}`
      // Stripe writes currencies in lower case; the order's is upper case.
      return { eventId, body: stripeBody(eventId, type, order.id, order.amount, order.currency.toLowerCase()) }
    }

    it('accepts a valid Stripe-Signature (also next to a v1=bad) and applies the events; v0 only, or a timestamp beyond 300 s, is 401', async () => {
      const order = await createOrder()
      const paid = stripeEvent('payment_intent.succeeded', order)
      const response = await send(stripeDelivery(paid.body))
      expectReceived(response, paid.eventId, false)
      await settled(order.id)
      expect(await orderStatus(order.id)).toBe('paid')
      expect(await eventsWithId('stripe', paid.eventId)).toEqual([expect.objectContaining({
        type: 'payment.succeeded',
        orderId: order.id,
        paymentId: `pi_${order.id}`,
        amount: order.amount,
        currency: order.currency,
        rawBody: paid.body,
        status: 'applied',
        signatureHeaders: { 'stripe-signature': expect.stringMatching(/^t=\d+,v1=[0-9a-f]{64}$/) },
      })])
      expect(await idempotencyRecordsFor(paid.eventId)).toEqual([expect.objectContaining({ scope: 'provider:stripe', status: 'succeeded' })])

      const refund = stripeEvent('charge.refunded', order)
      const before = await webhookRowCounts(sql())
      const valid = stripeDelivery(refund.body)
      const v0Only = { ...valid, headers: { ...valid.headers, 'stripe-signature': valid.headers['stripe-signature']!.replace('v1=', 'v0=') } }
      const rejected: Array<[string, () => SignedDelivery | Promise<SignedDelivery>]> = [
        ['only a v0 signature', () => v0Only],
        ['timestamp 301 s old', () => stripeDelivery(refund.body, { at: nowSeconds() - 301 })],
        // 302: the server reads its clock in whole seconds when the request arrives, which under
        // load can be the next second; 301 then looked exactly 300 s ahead and was accepted.
        ['timestamp 302 s in the future', async () => {
          await startOfASecond()
          return stripeDelivery(refund.body, { at: nowSeconds() + 302 })
        }],
        ['wrong secret', () => stripeDelivery(refund.body, { secret: 'not_the_stripe_secret' })],
      ]
      for (const [what, make] of rejected) {
        const rejection = await send(await make())
        expectProblem(rejection, 'webhook-signature-invalid')
        expect(await webhookRowCounts(sql()), what).toEqual(before)
      }
      expect(await orderStatus(order.id)).toBe('paid')

      // A v1 that does not match is skipped while another matches (Stripe signs once per active secret).
      const refunded = await send(stripeDelivery(refund.body, { extraParts: ['v1=bad'] }))
      expectReceived(refunded, refund.eventId, false)
      await settled(order.id)
      expect(await orderStatus(order.id)).toBe('refunded')
      expect(await eventsWithId('stripe', refund.eventId)).toEqual([expect.objectContaining({ type: 'payment.refunded', status: 'applied', paymentId: `pi_${order.id}` })])
      await expectEffectsOnce(order.id, { confirmed: true, refunded: true })
    })

    it('answers 400 payload-invalid for a validly signed event type it does not handle, and stores nothing', async () => {
      const order = await createOrder()
      const before = await webhookRowCounts(sql())
      const eventId = `evt_${randomUUID().replaceAll('-', '')}`
      const body = JSON.stringify({ id: eventId, object: 'event', type: 'customer.created', created: nowSeconds(), data: { object: { id: 'cus_1', object: 'customer', metadata: { order_id: order.id } } } })

      const response = await send(stripeDelivery(body))

      expectProblem(response, 'payload-invalid')
      expect(response.json.detail).toContain('customer.created')
      expect(await webhookRowCounts(sql())).toEqual(before)
      expect(await idempotencyRecordsFor(eventId)).toEqual([])
      expect(await orderStatus(order.id)).toBe('pending_payment')
    })

    it('a partial refund (charge.refunded with amount_refunded < amount) makes a paid order partially_refunded: one provider refund, a notice for the part', async () => {
      const order = await createOrder()
      const paid = stripeEvent('payment_intent.succeeded', order)
      expectReceived(await send(stripeDelivery(paid.body)), paid.eventId, false)
      await settled(order.id)
      expect(await orderStatus(order.id)).toBe('paid')

      const refundId = `evt_${randomUUID().replaceAll('-', '')}`
      const partlyRefunded = 50_000
      const refundBody = stripeBody(refundId, 'charge.refunded', order.id, order.amount, order.currency.toLowerCase(), partlyRefunded)
      // In Stripe's units: IDR in hundredths of a rupiah.
      expect(order.currency).toBe('IDR')
      expect(JSON.parse(refundBody).data.object).toMatchObject({ amount: order.amount * 100, amount_refunded: partlyRefunded * 100, refunded: false })
      expectReceived(await send(stripeDelivery(refundBody)), refundId, false)
      await settled(order.id)

      expect(await orderStatus(order.id)).toBe('partially_refunded')
      const events = await eventsOfOrder(order.id)
      expect(events.map(event => [event.eventId, event.type, event.amount, event.status])).toEqual([
        [paid.eventId, 'payment.succeeded', order.amount, 'applied'],
        [refundId, 'payment.refunded', partlyRefunded, 'applied'],
      ])
      expect(await historyOf(order.id)).toEqual([
        { fromStatus: 'pending_payment', requestedStatus: 'paid', toStatus: 'paid', outcome: 'applied', reason: null, webhookEventId: events[0]!.id },
        { fromStatus: 'paid', requestedStatus: 'refunded', toStatus: 'partially_refunded', outcome: 'applied', reason: 'refund_at_provider', webhookEventId: events[1]!.id },
      ])
      expect(await sql()`select amount::int, status, source from refunds where order_id = ${order.id}`).toEqual([{ amount: partlyRefunded, status: 'succeeded', source: 'provider' }])
      await expectEffectsOnce(order.id, { confirmed: true, refunded: false, partlyRefunded: true })
    })
  })

  describe('applying events', () => {
    it('out of order (refunded, then succeeded, then failed): the refund waits for its payment, then the order ends refunded, each effect once', async () => {
      const order = await createOrder()
      const sent: string[] = []
      // One at a time, each applied before the next arrives, so the history has a known order.
      for (const type of ['payment.refunded', 'payment.succeeded', 'payment.failed'] as const) {
        const { webhookId, delivery } = standardEvent(type, order)
        expectReceived(await send(delivery), webhookId, false)
        sent.push(webhookId)
        await settled(order.id)
      }

      expect(await orderStatus(order.id)).toBe('refunded')
      const events = await eventsOfOrder(order.id)
      expect(events.map(event => [event.eventId, event.type, event.status])).toEqual([
        [sent[0], 'payment.refunded', 'ignored'],
        [sent[1], 'payment.succeeded', 'applied'],
        [sent[2], 'payment.failed', 'ignored'],
      ])
      expect(await historyOf(order.id)).toEqual([
        { fromStatus: 'pending_payment', requestedStatus: 'refunded', toStatus: 'pending_payment', outcome: 'ignored', reason: 'awaiting_payment', webhookEventId: events[0]!.id },
        { fromStatus: 'pending_payment', requestedStatus: 'paid', toStatus: 'refunded', outcome: 'applied', reason: null, webhookEventId: events[1]!.id },
        { fromStatus: 'refunded', requestedStatus: 'payment_failed', toStatus: 'refunded', outcome: 'ignored', reason: 'lower_precedence', webhookEventId: events[2]!.id },
      ])
      // The payment found the refund waiting: confirmation, invoice and refund notice, each once.
      await expectEffectsOnce(order.id, { confirmed: true, refunded: true })
      expect(await jobKindsOf(order.id)).toEqual([
        'order.issue_invoice', 'order.send_confirmation', 'order.send_refund_notice', 'payment.create_intent',
        'webhook.apply', 'webhook.apply', 'webhook.apply',
      ])
    })

    it('a success for another amount leaves the order pending_payment: history ignored amount_mismatch, no effects', async () => {
      const order = await createOrder()
      const { webhookId, delivery } = standardEvent('payment.succeeded', order, { amount: order.amount - 1 })

      expectReceived(await send(delivery), webhookId, false)
      await settled(order.id)

      expect(await orderStatus(order.id)).toBe('pending_payment')
      const [event] = await eventsOfOrder(order.id)
      expect(event).toMatchObject({ eventId: webhookId, amount: order.amount - 1, status: 'ignored', processed: true })
      expect(await historyOf(order.id)).toEqual([
        { fromStatus: 'pending_payment', requestedStatus: 'paid', toStatus: 'pending_payment', outcome: 'ignored', reason: 'amount_mismatch', webhookEventId: event!.id },
      ])
      await expectEffectsOnce(order.id, { confirmed: false, refunded: false })
      expect(await jobKindsOf(order.id)).toEqual(['payment.create_intent', 'webhook.apply'])
    })

    it('an event for an unknown order is accepted, then its webhook.apply job retries and dead-letters; no order appears', async () => {
      const ordersBefore = await orderCount()
      const unknownOrder: CreatedOrder = { id: `ord_unknown_${randomUUID().replaceAll('-', '')}`, amount: 150_000, currency: 'IDR' }
      const { webhookId, delivery } = standardEvent('payment.succeeded', unknownOrder)

      expectReceived(await send(delivery), webhookId, false)

      let job: Awaited<ReturnType<typeof applyJobsOf>>[number] | undefined
      // Eight attempts with the short backoff (0.1 s doubling, capped at 1 s): a few seconds.
      await pollUntil(`the webhook.apply job of ${webhookId} is a dead letter`, async () => {
        ;[job] = await applyJobsOf(unknownOrder.id)
        return job?.status === 'dead_letter'
      }, { timeoutMs: 30_000, intervalMs: 100 })
      expect(job).toMatchObject({
        idempotencyKey: webhookId,
        attempt: 8,
        lastError: `RetryableJobError: order ${unknownOrder.id} not found (yet) for standard event ${webhookId}`,
      })
      expect(await orderCount()).toBe(ordersBefore)
      expect(await eventsOfOrder(unknownOrder.id)).toEqual([expect.objectContaining({ eventId: webhookId, status: 'received', processed: false })])
      expect(await historyOf(unknownOrder.id)).toEqual([])

      const listed = await opsRequest(api(), '/api/ops/jobs?status=dead_letter&kind=webhook.apply')
      expect(listed.status, listed.text).toBe(200)
      expect(listed.json.object).toBe('list')
      expect(listed.json.data).toEqual([expect.objectContaining({
        id: job!.id,
        kind: 'webhook.apply',
        status: 'dead_letter',
        attempt: 8,
        maxAttempts: 8,
        resourceId: `order:${unknownOrder.id}`,
        idempotencyKey: webhookId,
      })])
    })
  })
})
