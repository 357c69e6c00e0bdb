import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import type { PaymentStatus } from '../../../server/orders/payment-state'
import { requestedStatusOf, type PaymentEventType } from '../../../server/webhooks/types'
import { isRetryable } from '../cluster'
import { request, type TestResponse } from '../http'
import { postOrder, validOrderBody } from '../orders'
import { deliver, midtransDelivery, midtransStatusCode, newWebhookId, type SignedDelivery, standardBody, standardDelivery, stripeBody, stripeDelivery, type StripeEventType } from '../webhooks'
import type { AnswerLog, RequestKind } from './answers'
import { balancerHeader } from './balancer'
import type { AcceptedEvent, OrderModel, PaymentPath, Provider } from './model'

/**
 * The chaos run's load: a fixed number of virtual clients, each looping over intents until the
 * run's time is up. An intent is an order (a new key and cart; some fired as 2–3 identical copies
 * at once at different instances, some first attempts carrying a drop- or crash-after-commit
 * fault), then its payment through mockpay or through signed webhooks of one provider, each event
 * delivered several times, concurrently and later, sometimes in reversed order. Every request is
 * retried with the same key or event until it has a final answer, as a careful client or a
 * provider would. What was acknowledged is remembered: it is the model the database is checked against.
 */

/** Marks the load generator's requests, so the balancer does not count them a second time. */
export const loadClientHeader = 'x-chaos-client'

const unitPrice = 75_000
/** Retry-After is honoured but capped, so a client does not sit out a whole outage in one sleep. */
const maxRetrySleepMs = 500
const networkRetrySleepMs = 150
const intentPollMs = 250

export interface LoadOptions {
  balancerUrl: string
  liveAppUrls: () => string[]
  /** How many app instances there are when all are up. */
  appCount: number
  secretKey: string
  clients: number
  durationMs: number
  /** How long a request is retried before it counts as lost (outlives any outage of the run). */
  requestDeadlineMs: number
  maxCrashFaults: number
  answers: AnswerLog
  clock: () => number
  /** Prints one line with the run's time. */
  note: (line: string) => void
}

export interface OrderIntent {
  key: string
  cartId: string
  amount: number
  copies: number
  fault?: 'drop-after-commit' | 'crash-after-commit'
  /** Each copy's final answer, or undefined when it never got one. */
  finals: Array<{ status: number, orderId?: string } | undefined>
}

export interface LoadFigures {
  intents: number
  duplicatedIntents: { twoCopies: number, threeCopies: number }
  faults: { 'drop-after-commit': number, 'crash-after-commit': number }
  webhooks: Record<Provider, { events: number, deliveries: number, concurrentCopies: number, laterRedeliveries: number, replayedAnswers: number }>
  mockpay: Record<'succeed' | 'fail' | 'refund', { actions: number, deliveriesScheduled: number }>
  /** Final answers nobody should have got (a 4xx to a valid request, say), with what they were. */
  unexpectedFinals: string[]
  /** Requests that had no final answer when their deadline passed. */
  abandoned: string[]
}

export interface LoadResult {
  orderIntents: OrderIntent[]
  orders: OrderModel[]
  figures: LoadFigures
}

type Target = { url: string, route: 'direct' | 'balancer' }

const pick = <T>(choices: readonly T[]): T => choices[Math.floor(Math.random() * choices.length)]!
const shuffled = <T>(items: T[]): T[] => items.map(item => ({ item, order: Math.random() })).sort((a, b) => a.order - b.order).map(({ item }) => item)

export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const runId = randomUUID().slice(0, 8)
  const orderIntents: OrderIntent[] = []
  const orders: OrderModel[] = []
  const figures: LoadFigures = {
    intents: 0,
    duplicatedIntents: { twoCopies: 0, threeCopies: 0 },
    faults: { 'drop-after-commit': 0, 'crash-after-commit': 0 },
    webhooks: {
      standard: { events: 0, deliveries: 0, concurrentCopies: 0, laterRedeliveries: 0, replayedAnswers: 0 },
      stripe: { events: 0, deliveries: 0, concurrentCopies: 0, laterRedeliveries: 0, replayedAnswers: 0 },
      midtrans: { events: 0, deliveries: 0, concurrentCopies: 0, laterRedeliveries: 0, replayedAnswers: 0 },
    },
    mockpay: { succeed: { actions: 0, deliveriesScheduled: 0 }, fail: { actions: 0, deliveriesScheduled: 0 }, refund: { actions: 0, deliveriesScheduled: 0 } },
    unexpectedFinals: [],
    abandoned: [],
  }
  const auth = { authorization: `Bearer ${options.secretKey}`, [loadClientHeader]: 'load' }
  const viaBalancer = (): Target => ({ url: options.balancerUrl, route: 'balancer' })
  /** Copy `copy` of a duplicated request: its own instance, and the next live one on each retry. */
  const direct = (copy: number) => (attempt: number): Target => {
    const urls = options.liveAppUrls()
    return urls.length ? { url: urls[(copy + attempt) % urls.length]!, route: 'direct' } : viaBalancer()
  }

  /**
   * Sends until a final answer: network errors, the balancer's 502, any 5xx and 409
   * request-in-progress are retried (same key, same event) after Retry-After (capped) or a short
   * pause. Undefined when the deadline passed first.
   */
  async function untilFinal(kind: RequestKind, label: string, target: (attempt: number) => Target, send: (baseUrl: string, attempt: number) => Promise<TestResponse>): Promise<TestResponse | undefined> {
    const deadline = Date.now() + options.requestDeadlineMs
    for (let attempt = 0; Date.now() < deadline; attempt++) {
      const { url, route } = target(attempt)
      const sentAt = Date.now()
      let response: TestResponse
      try {
        response = await send(url, attempt)
      }
      catch {
        options.answers.record(kind, route, 'network error', null, Date.now() - sentAt)
        await sleep(networkRetrySleepMs + Math.random() * 100)
        continue
      }
      const fromBalancer = response.headers.has(balancerHeader)
      options.answers.record(kind, route, fromBalancer ? 'balancer 502' : response.status, response.headers.get('retry-after'), Date.now() - sentAt)
      if (!fromBalancer && !isRetryable(response) && response.status < 500) return response
      const retryAfterSeconds = Number(response.headers.get('retry-after'))
      const pause = retryAfterSeconds > 0 ? Math.min(retryAfterSeconds * 1000, maxRetrySleepMs) : networkRetrySleepMs
      await sleep(pause + Math.random() * 100)
    }
    figures.abandoned.push(`${kind} ${label}: no final answer within ${options.requestDeadlineMs} ms`)
    return undefined
  }

  const unexpected = (what: string, response: TestResponse) =>
    figures.unexpectedFinals.push(`${what}: ${response.status} ${response.text.slice(0, 300)}`)

  async function orderIntent(n: number): Promise<OrderIntent> {
    const key = `chaos-${runId}-${n}`
    const quantity = 1 + Math.floor(Math.random() * 4)
    const body = validOrderBody({
      cartId: `crt_chaos-${runId}-${n}`,
      amount: quantity * unitPrice,
      items: [{ sku: 'SKU-CHAOS', quantity, unitPrice }],
      // One shopper per order: the audit's business-duplicate heuristic has nothing to report.
      customer: { email: `shopper-${runId}-${n}@chaos.test` },
    })
    const duplicated = Math.random() < 0.25
    const copies = duplicated ? (Math.random() < 0.5 ? 2 : 3) : 1
    if (copies === 2) figures.duplicatedIntents.twoCopies++
    if (copies === 3) figures.duplicatedIntents.threeCopies++
    const faultRoll = Math.random()
    // A crash only while every instance is up: with a scheduled kill at the same moment, one is still left.
    const mayCrash = figures.faults['crash-after-commit'] < options.maxCrashFaults && options.liveAppUrls().length === options.appCount
    const fault = faultRoll < 0.05
      ? 'drop-after-commit' as const
      : faultRoll < 0.06 && mayCrash ? 'crash-after-commit' as const : undefined
    if (fault) {
      figures.faults[fault]++
      if (fault === 'crash-after-commit') options.note(`X-Fault crash-after-commit on order ${key}`)
    }
    const finals = await Promise.all(Array.from({ length: copies }, (_, copy) => untilFinal(
      'order',
      `${key} copy ${copy + 1}`,
      copies > 1 ? direct(n + copy) : viaBalancer,
      (url, attempt) => postOrder(url, {
        secretKey: options.secretKey,
        key,
        body,
        headers: { [loadClientHeader]: 'load', ...(copy === 0 && attempt === 0 && fault ? { 'x-fault': fault } : {}) },
      }),
    )))
    for (const final of finals) if (final && final.status !== 201) unexpected(`order ${key}`, final)
    return {
      key,
      cartId: body.cartId,
      amount: body.amount,
      copies,
      ...(fault && { fault }),
      finals: finals.map(final => final && { status: final.status, orderId: final.json?.id }),
    }
  }

  /** GET until 200 (retrying like any other request), then polls until the worker stored the intent. */
  async function paymentIntentOf(orderId: string): Promise<string | undefined> {
    const deadline = Date.now() + options.requestDeadlineMs
    while (Date.now() < deadline) {
      const read = await untilFinal('order read', orderId, viaBalancer, url => request(url, `/api/orders/${orderId}`, { headers: auth }))
      if (!read) return undefined
      if (read.status !== 200) {
        unexpected(`GET order ${orderId}`, read)
        return undefined
      }
      if (read.json.paymentIntentId) return read.json.paymentIntentId
      await sleep(intentPollMs)
    }
    figures.abandoned.push(`order ${orderId}: no paymentIntentId within ${options.requestDeadlineMs} ms`)
    return undefined
  }

  async function payWithMockpay(orderId: string): Promise<AcceptedEvent[]> {
    const intentId = await paymentIntentOf(orderId)
    if (!intentId) return []
    const scenario = pick([['succeed'], ['fail'], ['fail', 'succeed'], ['succeed', 'refund'], ['fail', 'succeed', 'refund']] as const)
    for (const action of scenario) {
      // mockpay's own chaos: extra copies, delays, the earlier events sent again.
      const chaos = { duplicates: Math.floor(Math.random() * 3), maxDelayMs: 500, reorder: true }
      const path = `/api/mockpay/intents/${intentId}/${action === 'refund' ? 'refund' : 'confirm'}`
      const body = action === 'refund' ? { chaos } : { outcome: action, chaos }
      const answer = await untilFinal('mockpay action', `${action} ${intentId}`, viaBalancer, url => request(url, path, { method: 'POST', headers: auth, body }))
      if (!answer) break
      if (answer.status !== 200) {
        unexpected(`mockpay ${action} ${intentId}`, answer)
        break
      }
      figures.mockpay[action].actions++
      figures.mockpay[action].deliveriesScheduled += answer.json.deliveriesScheduled
    }
    // The provider's ledger: every event it recorded is delivered until a 2xx (or dead-lettered, which is checked).
    const intent = await untilFinal('mockpay intent read', intentId, viaBalancer, url => request(url, `/api/mockpay/intents/${intentId}`, { headers: auth }))
    if (!intent || intent.status !== 200) {
      if (intent) unexpected(`GET mockpay intent ${intentId}`, intent)
      return []
    }
    return (intent.json.events as Array<{ id: string, type: PaymentEventType }>)
      .map(event => ({ provider: 'mockpay', eventId: event.id, requested: requestedStatusOf[event.type] }))
  }

  /** One provider event, ready to be (re)delivered: a fresh signature and timestamp per delivery. */
  function providerEvent(provider: Provider, order: { id: string, amount: number }, requested: PaymentStatus | null): AcceptedEvent & { delivery: () => SignedDelivery } {
    if (provider === 'midtrans') {
      const transactionStatus = requested ? ({ pending_payment: 'pending', payment_failed: 'deny', paid: 'settlement', refunded: 'refund' } as const)[requested] : 'pending'
      const transactionId = `tx-${order.id}`
      const grossAmount = `${order.amount}.00`
      const delivery = midtransDelivery({ orderId: order.id, transactionId, transactionStatus, grossAmount, currency: 'IDR' })
      // A Midtrans refund shares its signed fields with the settlement: informational, it asks for nothing.
      const eventId = `${order.id}:${midtransStatusCode(transactionStatus)}:${grossAmount}:${transactionStatus}`
      return { provider, eventId, requested: transactionStatus === 'refund' ? null : requested, delivery: () => delivery }
    }
    if (provider === 'stripe') {
      const eventId = `evt_${randomUUID().replaceAll('-', '')}`
      const type: StripeEventType = requested === 'paid' ? 'payment_intent.succeeded' : requested === 'refunded' ? 'charge.refunded' : 'payment_intent.payment_failed'
      const body = stripeBody(eventId, type, order.id, order.amount, 'idr')
      return { provider, eventId, requested, delivery: () => stripeDelivery(body) }
    }
    const webhookId = newWebhookId()
    const type = requested === 'paid' ? 'payment.succeeded' : requested === 'refunded' ? 'payment.refunded' : 'payment.failed'
    const body = standardBody(type, { orderId: order.id, paymentId: `pay_${order.id}`, amount: order.amount, currency: 'IDR' }, new Date().toISOString())
    return { provider, eventId: webhookId, requested, delivery: () => standardDelivery(webhookId, body) }
  }

  async function payWithWebhooks(provider: Provider, order: { id: string, amount: number }): Promise<AcceptedEvent[]> {
    // Reversed orders on purpose: a refund before its success, a failure after it.
    const scenario: Array<PaymentStatus | null> = [...pick([
      ['paid'], ['payment_failed'], ['payment_failed', 'paid'], ['paid', 'refunded'], ['refunded', 'paid'], ['paid', 'payment_failed'],
    ] as const)]
    // Midtrans announces a pending transaction first: informational, it moves nothing.
    if (provider === 'midtrans' && Math.random() < 0.5) scenario.unshift(null)
    const counts = figures.webhooks[provider]
    const accepted = new Map<string, AcceptedEvent>()
    const later: Array<() => Promise<void>> = []
    const deliverOnce = async (event: ReturnType<typeof providerEvent>, target: (attempt: number) => Target, copy: string): Promise<void> => {
      counts.deliveries++
      const answer = await untilFinal(`webhook ${provider}`, `${event.eventId} ${copy}`, target, url => deliver(url, withClientHeader(event.delivery())))
      if (!answer) return
      if (answer.status !== 200) {
        unexpected(`${provider} event ${event.eventId} (${copy})`, answer)
        return
      }
      if (answer.json?.idempotency?.replayed) counts.replayedAnswers++
      accepted.set(event.eventId, { provider: event.provider, eventId: event.eventId, requested: event.requested })
    }
    for (const requested of scenario) {
      const event = providerEvent(provider, order, requested)
      counts.events++
      const copies = 2 + Math.floor(Math.random() * 3)
      const now = 1 + Math.floor(Math.random() * copies)
      counts.concurrentCopies += now - 1
      counts.laterRedeliveries += copies - now
      await Promise.all(Array.from({ length: now }, (_, copy) => deliverOnce(event, copy === 0 ? viaBalancer : direct(copy), `copy ${copy + 1}`)))
      for (let copy = now; copy < copies; copy++) later.push(() => deliverOnce(event, viaBalancer, `redelivery ${copy + 1}`))
    }
    for (const redeliver of shuffled(later)) await redeliver()
    return [...accepted.values()]
  }

  let nextIntent = 0
  async function virtualClient(): Promise<void> {
    while (options.clock() < options.durationMs) {
      const n = nextIntent++
      figures.intents++
      const intent = await orderIntent(n)
      orderIntents.push(intent)
      const created = intent.finals.find(final => final?.status === 201)
      if (!created?.orderId) continue
      const order = { id: created.orderId, amount: intent.amount }
      const roll = Math.random()
      const path: PaymentPath = roll < 0.45 ? 'mockpay' : roll < 0.9 ? pick(['standard', 'stripe', 'midtrans'] as const) : 'unpaid'
      const events = path === 'mockpay' ? await payWithMockpay(order.id) : path === 'unpaid' ? [] : await payWithWebhooks(path, order)
      orders.push({ orderId: order.id, key: intent.key, path, events })
    }
  }

  await Promise.all(Array.from({ length: options.clients }, () => virtualClient()))
  return { orderIntents, orders, figures }
}

function withClientHeader(delivery: SignedDelivery): SignedDelivery {
  return { ...delivery, headers: { ...delivery.headers, [loadClientHeader]: 'load' } }
}
