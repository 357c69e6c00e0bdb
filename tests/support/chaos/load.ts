import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import type { PaymentStatus } from '../../../server/orders/payment-state'
import type { PaymentEventType } from '../../../server/payments/types'
import { requestedStatusOf } from '../../../server/webhooks/types'
import { isRetryable } from '../cluster'
import { request, type TestResponse } from '../http'
import { postOrder, problemSlug, validOrderBody } from '../orders'
import { deliver, newWebhookId, type SignedDelivery, standardBody, standardDelivery, stripeBody, stripeDelivery, type StripeEventType } from '../webhooks'
import type { AnswerLog, RequestKind } from './answers'
import { balancerHeader } from './balancer'
import type { AcceptedEvent, CancelOutcome, OrderModel, PaymentPath, Provider, RefundIntent } from './model'

/**
 * The chaos run's load: a fixed number of virtual clients, each looping over intents until the
 * run's time is up. An intent is an order (a new key and cart; some fired as 2–3 identical copies
 * at once at different instances, some first attempts carrying a drop- or crash-after-commit
 * fault), then its payment through mockpay or through signed webhooks of one provider, each event
 * delivered several times, concurrently and later, sometimes in reversed order. A paid mockpay
 * order may then be refunded: in full or in parts through the API (keys fired as concurrent copies
 * and replayed later, several keys at once on one order), in mockpay's dashboard, or both at once;
 * an unpaid one canceled, sometimes while the shopper pays; one paid through another provider's
 * webhooks is sometimes refunded, which mockpay refuses. Every request is retried with the same
 * key or event until it has a final answer, as a careful client or a provider would. What was
 * acknowledged is remembered: it is the model the database is checked against.
 *
 * Stock (docs/inventory.md): both SKUs the orders name are tracked, their counts set at the start.
 * Every order reserves SKU-CHAOS, of which there is plenty; some also SKU-SCARCE, which runs out (a
 * few ask for more than there ever is), so some keys are refused 409 insufficient-stock — stored and
 * replayed like any answer — until cancels and restocking refunds (half the API refunds ask for
 * `restock: true`) put units back. The counts are read every half second while the load runs.
 */

/** Marks the load generator's requests, so the balancer does not count them a second time. */
export const loadClientHeader = 'x-chaos-client'

const unitPrice = 75_000
/** The counts set at the start: plenty of one SKU, few of the other. */
export const trackedStock = { 'SKU-CHAOS': 1_000_000, 'SKU-SCARCE': 30 } as const
/** Every 20th intent is a bulk order of more SKU-SCARCE than there ever is: refused whatever else happens. */
const bulkEvery = 20
const bulkUnits = 1_000
const stockSampleMs = 500
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
  /** How long the worker may take to bring an order where a client waits for it (its intent, its payment). */
  workDeadlineMs: number
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
  /** Units of SKU-SCARCE asked for (0: none): only such an order may be refused for stock. */
  scarceUnits: number
  copies: number
  fault?: 'drop-after-commit' | 'crash-after-commit'
  /** Each copy's final answer (a problem's slug with it), or undefined when it never got one. */
  finals: Array<{ status: number, orderId?: string, problem?: string } | undefined>
}

/** The counts of one tracked SKU as GET /api/inventory answered them during the run. */
export interface StockSample { atMs: number, sku: string, onHand: number, reserved: number, available: number }

export interface LoadFigures {
  intents: number
  duplicatedIntents: { twoCopies: number, threeCopies: number }
  faults: { 'drop-after-commit': number, 'crash-after-commit': number }
  webhooks: Record<Provider, { events: number, deliveries: number, concurrentCopies: number, laterRedeliveries: number, replayedAnswers: number }>
  /** refund: the dashboard's; refused: a 409 of the provider (an intent canceled first, less left than asked). */
  mockpay: Record<'succeed' | 'fail' | 'refund', { actions: number, deliveriesScheduled: number, refused: number }>
  refunds: { 'keys': number, 'requests': number, 'laterReplays': number, 'drop-after-commit': number, 'created': number, 'replayedAnswers': number, 'refund-exceeds-remaining': number }
  cancels: { 'keys': number, 'requests': number, 'racingThePayment': number, 'canceled': number, 'order-not-cancelable': number, 'paidAfterCancel': number }
  /** scarceIntents: intents asking for SKU-SCARCE (bulk: more than there ever is); refused: keys answered 409 insufficient-stock. */
  stock: { scarceIntents: number, bulkIntents: number, refused: number, restockingRefundKeys: number, samples: number }
  /** Final answers nobody should have got (a 4xx to a valid request, say), with what they were. */
  unexpectedFinals: string[]
  /** Requests that had no final answer when their deadline passed, and orders that never reached what was waited for. */
  abandoned: string[]
  /** The orders those concern, for the evidence locker. */
  stalledOrders: string[]
}

export interface LoadResult {
  orderIntents: OrderIntent[]
  orders: OrderModel[]
  figures: LoadFigures
  stockSamples: StockSample[]
}

type Target = { url: string, route: 'direct' | 'balancer' }
/** What the signed webhooks of the run ask for; a refund's total is all of the order. */
type WebhookStatus = Extract<PaymentStatus, 'payment_failed' | 'paid' | 'refunded'>

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
    },
    mockpay: { succeed: { actions: 0, deliveriesScheduled: 0, refused: 0 }, fail: { actions: 0, deliveriesScheduled: 0, refused: 0 }, refund: { actions: 0, deliveriesScheduled: 0, refused: 0 } },
    refunds: { 'keys': 0, 'requests': 0, 'laterReplays': 0, 'drop-after-commit': 0, 'created': 0, 'replayedAnswers': 0, 'refund-exceeds-remaining': 0 },
    cancels: { 'keys': 0, 'requests': 0, 'racingThePayment': 0, 'canceled': 0, 'order-not-cancelable': 0, 'paidAfterCancel': 0 },
    stock: { scarceIntents: 0, bulkIntents: 0, refused: 0, restockingRefundKeys: 0, samples: 0 },
    unexpectedFinals: [],
    abandoned: [],
    stalledOrders: [],
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
   * pause. Undefined when the deadline passed first (`orderId`: the order the request is about).
   */
  async function untilFinal(kind: RequestKind, label: string, target: (attempt: number) => Target, send: (baseUrl: string, attempt: number) => Promise<TestResponse>, orderId?: string): Promise<TestResponse | undefined> {
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
    if (orderId) figures.stalledOrders.push(orderId)
    return undefined
  }

  const unexpected = (what: string, response: TestResponse) =>
    figures.unexpectedFinals.push(`${what}: ${response.status} ${response.text.slice(0, 300)}`)

  async function orderIntent(n: number): Promise<OrderIntent> {
    const key = `chaos-${runId}-${n}`
    const quantity = 1 + Math.floor(Math.random() * 4)
    const bulk = n % bulkEvery === 0
    const scarceUnits = bulk ? bulkUnits : Math.random() < 0.3 ? 1 + Math.floor(Math.random() * 2) : 0
    if (scarceUnits) figures.stock.scarceIntents++
    if (bulk) figures.stock.bulkIntents++
    const body = validOrderBody({
      cartId: `crt_chaos-${runId}-${n}`,
      amount: (quantity + scarceUnits) * unitPrice,
      items: [{ sku: 'SKU-CHAOS', quantity, unitPrice }, ...(scarceUnits ? [{ sku: 'SKU-SCARCE', quantity: scarceUnits, unitPrice }] : [])],
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
    // Short of SKU-SCARCE is a final answer, not a finding: the invariants check that it made no order.
    const refusedForStock = (final: TestResponse) => scarceUnits > 0 && final.status === 409 && problemSlug(final) === 'insufficient-stock'
    for (const final of finals) if (final && final.status !== 201 && !refusedForStock(final)) unexpected(`order ${key}`, final)
    if (finals.some(final => final && refusedForStock(final))) figures.stock.refused++
    return {
      key,
      cartId: body.cartId,
      amount: body.amount,
      scarceUnits,
      copies,
      ...(fault && { fault }),
      finals: finals.map(final => final && { status: final.status, orderId: final.json?.id, problem: problemSlug(final) }),
    }
  }

  /** GET until 200 (retrying like any other request), then polls until `condition` holds; undefined at the deadline. */
  async function orderWhen(orderId: string, what: string, condition: (order: any) => boolean): Promise<any> {
    const deadline = Date.now() + options.workDeadlineMs
    while (Date.now() < deadline) {
      const read = await untilFinal('order read', orderId, viaBalancer, url => request(url, `/api/orders/${orderId}`, { headers: auth }), orderId)
      if (!read) return undefined
      if (read.status !== 200) {
        unexpected(`GET order ${orderId}`, read)
        return undefined
      }
      if (condition(read.json)) return read.json
      await sleep(intentPollMs)
    }
    figures.abandoned.push(`order ${orderId}: not ${what} within ${options.workDeadlineMs} ms`)
    figures.stalledOrders.push(orderId)
    return undefined
  }

  /** The intent the worker created for the order at mockpay. */
  async function paymentIntentOf(orderId: string): Promise<string | undefined> {
    return (await orderWhen(orderId, 'given its paymentIntentId', read => Boolean(read.paymentIntentId)))?.paymentIntentId
  }

  /**
   * An action at mockpay's page or dashboard: 'done', 'refused' (409, allowed only where the action
   * may race another: a payment the cancel got to first, a refund of more than is left), or
   * undefined when it never got a final answer.
   */
  async function mockpayAction(intentId: string, action: 'succeed' | 'fail' | 'refund', { amount, mayBeRefused = false }: { amount?: number, mayBeRefused?: boolean } = {}): Promise<'done' | 'refused' | undefined> {
    // mockpay's own chaos: extra copies, delays, the earlier events sent again.
    const chaos = { duplicates: Math.floor(Math.random() * 3), maxDelayMs: 500, reorder: true }
    const path = `/api/mockpay/intents/${intentId}/${action === 'refund' ? 'refund' : 'confirm'}`
    const body = action === 'refund' ? { chaos, ...(amount !== undefined && { amount }) } : { outcome: action, chaos }
    const answer = await untilFinal('mockpay action', `${action} ${intentId}`, viaBalancer, url => request(url, path, { method: 'POST', headers: auth, body }))
    if (!answer) return undefined
    if (answer.status === 409 && mayBeRefused && problemSlug(answer) === 'payment-state-conflict') {
      figures.mockpay[action].refused++
      return 'refused'
    }
    if (answer.status !== 200) {
      unexpected(`mockpay ${action} ${intentId}`, answer)
      return undefined
    }
    figures.mockpay[action].actions++
    figures.mockpay[action].deliveriesScheduled += answer.json.deliveriesScheduled
    return 'done'
  }

  /**
   * One refund through the API under one key: fired as `copies` concurrent copies at different
   * instances (the first attempt of one maybe dropped after its commit), and sometimes asked again
   * once the answer came, which must replay it. `mayBeRefused`: a 409 refund-exceeds-remaining (with
   * remaining 0 for an order refunded meanwhile) is a final answer for it, not a finding.
   */
  async function refund(orderId: string, label: string, { amount, mayBeRefused = false }: { amount?: number, mayBeRefused?: boolean } = {}): Promise<RefundIntent> {
    const key = `refund-${runId}-${label}`
    const copies = Math.random() < 0.3 ? 2 + Math.floor(Math.random() * 2) : 1
    const fault = Math.random() < 0.1 ? 'drop-after-commit' as const : undefined
    // All the payment took and no earlier refund put back: after the first such refund, nothing.
    const restock = Math.random() < 0.5
    const counts = figures.refunds
    counts.keys++
    if (fault) counts[fault]++
    if (restock) figures.stock.restockingRefundKeys++
    const ask = (target: (attempt: number) => Target, faultOnFirst: boolean) => untilFinal('refund', `${key} ${orderId}`, target, (url, attempt) => {
      counts.requests++
      return request(url, `/api/orders/${orderId}/refunds`, {
        method: 'POST',
        headers: { ...auth, 'idempotency-key': key, ...(faultOnFirst && attempt === 0 && fault ? { 'x-fault': fault } : {}) },
        body: { ...(amount !== undefined && { amount }), reason: 'requested_by_customer', ...(restock && { restock: true }) },
      })
    }, orderId)
    const answers = await Promise.all(Array.from({ length: copies }, (_, copy) => ask(copies > 1 ? direct(copy) : viaBalancer, copy === 0)))
    if (Math.random() < 0.3) {
      counts.laterReplays++
      answers.push(await ask(viaBalancer, false))
    }
    const finals = answers.map((answer) => {
      if (!answer) return undefined
      const problem = problemSlug(answer)
      const refusal = problem === 'refund-exceeds-remaining' ? problem : undefined
      if (answer.status === 201) {
        if (answer.json.idempotency?.replayed) counts.replayedAnswers++
      }
      else if (answer.status === 409 && mayBeRefused && refusal) counts[refusal]++
      else unexpected(`refund ${key} of ${orderId}`, answer)
      return { status: answer.status, ...(answer.status === 201 ? { refundId: answer.json.id as string } : { problem }) }
    })
    if (finals.some(final => final?.status === 201)) counts.created++
    return { key, orderId, ...(amount !== undefined && { amount }), ...(restock && { restock }), copies: answers.length, ...(fault && { fault }), finals }
  }

  /**
   * The shop cancels the order under one key (1–2 concurrent copies, sometimes asked again later):
   * canceled, or not cancelable when `mayBePaid` and the shopper's payment came first.
   */
  async function cancel(orderId: string, { mayBePaid }: { mayBePaid: boolean }): Promise<CancelOutcome | undefined> {
    const key = `cancel-${runId}-${orderId}`
    const copies = Math.random() < 0.3 ? 2 : 1
    const counts = figures.cancels
    counts.keys++
    const ask = (target: (attempt: number) => Target) => untilFinal('cancel', `${key} ${orderId}`, target, (url) => {
      counts.requests++
      return request(url, `/api/orders/${orderId}/cancel`, { method: 'POST', headers: { ...auth, 'idempotency-key': key } })
    }, orderId)
    const answers = await Promise.all(Array.from({ length: copies }, (_, copy) => ask(copies > 1 ? direct(copy) : viaBalancer)))
    if (Math.random() < 0.3) answers.push(await ask(viaBalancer))
    const outcomes = new Set<CancelOutcome>()
    for (const answer of answers) {
      if (!answer) continue
      if (answer.status === 200 && answer.json.status === 'canceled') outcomes.add('canceled')
      else if (answer.status === 409 && mayBePaid && problemSlug(answer) === 'order-not-cancelable') outcomes.add('not_cancelable')
      else unexpected(`cancel ${key} of ${orderId}`, answer)
    }
    if (outcomes.size > 1) figures.unexpectedFinals.push(`cancel ${key} of ${orderId}: copies were told ${[...outcomes].join(' and ')}`)
    const [outcome] = outcomes
    if (outcome === 'canceled') counts.canceled++
    if (outcome === 'not_cancelable') counts['order-not-cancelable']++
    return outcome
  }

  /** Refunds of a paid order, in one of several plans; 30 %, 40 %… of an amount of whole 75,000s are whole. */
  async function refundPaidOrder(order: { id: string, amount: number }, intentId: string, n: number): Promise<RefundIntent[]> {
    const share = (fraction: number) => Math.round(order.amount * fraction)
    const plan = pick(['full', 'concurrent parts', 'part, then the rest', 'dashboard part, then a part', 'dashboard racing the API'] as const)
    if (plan === 'full') return [await refund(order.id, `${n}-full`)]
    if (plan === 'concurrent parts') {
      // Several keys at once, each 40 %: the balance admits two, the others are refused.
      const keys = 2 + Math.floor(Math.random() * 3)
      return Promise.all(Array.from({ length: keys }, (_, i) => refund(order.id, `${n}-part-${i}`, { amount: share(0.4), mayBeRefused: true })))
    }
    if (plan === 'part, then the rest') {
      const part = await refund(order.id, `${n}-part`, { amount: share(0.3) })
      return [part, await refund(order.id, `${n}-rest`)]
    }
    // mockpay's dashboard refunds a part, before or while the API asks for one; 70 % and 40 % do not
    // both fit, so one is refused — by our balance (409) when the dashboard's total came in first, by
    // mockpay when ours was admitted before it: our refund then fails, and the total its hold had
    // covered is recorded then.
    const dashboard = () => mockpayAction(intentId, 'refund', { amount: share(pick([0.2, 0.3, 0.7])), mayBeRefused: true })
    const part = () => refund(order.id, `${n}-part`, { amount: share(0.4), mayBeRefused: true })
    if (plan === 'dashboard part, then a part') {
      await dashboard()
      return [await part()]
    }
    const [, partIntent] = await Promise.all([dashboard(), part()])
    return [partIntent]
  }

  type MockpayOutcome = Pick<OrderModel, 'intentId' | 'cancel' | 'refunds'>

  /** The shopper at mockpay's page, and the shop's cancel or refunds; the events are read from mockpay's ledger once the run settled. */
  async function payWithMockpay(order: { id: string, amount: number }, n: number): Promise<MockpayOutcome> {
    const intentId = await paymentIntentOf(order.id)
    if (!intentId) return { refunds: [] }
    const scenario = pick([
      ['succeed'], ['fail'], ['fail', 'succeed'], ['succeed', 'refund'], ['fail', 'succeed', 'refund'],
      ['succeed', 'api refunds'], ['succeed', 'api refunds'], ['succeed', 'api refunds'],
      ['cancel', 'succeed'], ['cancel racing succeed'], ['succeed', 'cancel'],
    ] as const)
    let cancelOutcome: CancelOutcome | undefined
    let paidAtMockpay = false
    let refunds: RefundIntent[] = []
    for (const step of scenario) {
      if (step === 'api refunds') {
        const paid = await orderWhen(order.id, 'paid', read => read.status === 'paid')
        if (!paid) break
        refunds = await refundPaidOrder(order, intentId, n)
      }
      else if (step === 'cancel') {
        // Paid just before: the cancel races the payment's webhook.
        cancelOutcome = await cancel(order.id, { mayBePaid: paidAtMockpay })
      }
      else if (step === 'cancel racing succeed') {
        figures.cancels.racingThePayment++
        const [outcome, paid] = await Promise.all([cancel(order.id, { mayBePaid: true }), mockpayAction(intentId, 'succeed', { mayBeRefused: true })])
        cancelOutcome = outcome
        paidAtMockpay = paid === 'done'
      }
      else {
        // A dashboard refund has no key: one retried after its answer was lost may find nothing left.
        const done = await mockpayAction(intentId, step, { mayBeRefused: step === 'refund' || (step === 'succeed' && cancelOutcome !== undefined) })
        if (!done) break
        if (step === 'succeed') paidAtMockpay = done === 'done'
      }
    }
    // The payment beat the cancel at mockpay: the order is canceled and its payment given back automatically.
    if (cancelOutcome === 'canceled' && paidAtMockpay) figures.cancels.paidAfterCancel++
    return { intentId, ...(cancelOutcome && { cancel: cancelOutcome }), refunds }
  }

  /** One provider event, ready to be (re)delivered: a fresh signature and timestamp per delivery. */
  function providerEvent(provider: Provider, order: { id: string, amount: number }, requested: WebhookStatus | null): AcceptedEvent & { delivery: () => SignedDelivery } {
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
    const scenario: Array<WebhookStatus | null> = [...pick([
      ['paid'], ['payment_failed'], ['payment_failed', 'paid'], ['paid', 'refunded'], ['refunded', 'paid'], ['paid', 'payment_failed'],
    ] as const)]
    const counts = figures.webhooks[provider]
    const accepted = new Map<string, AcceptedEvent>()
    const later: Array<() => Promise<void>> = []
    const deliverOnce = async (event: ReturnType<typeof providerEvent>, target: (attempt: number) => Target, copy: string): Promise<void> => {
      counts.deliveries++
      const answer = await untilFinal(`webhook ${provider}`, `${event.eventId} ${copy}`, target, url => deliver(url, withClientHeader(event.delivery())), order.id)
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

  /**
   * An order paid through another provider's webhooks, without a refund event, is sometimes refunded
   * through the API: accepted (201), then refused by the configured provider (mockpay never took
   * that payment), so it fails and frees its amount.
   */
  async function refundPaidElsewhere(order: { id: string, amount: number }, events: AcceptedEvent[], n: number): Promise<RefundIntent[]> {
    const paidOnly = events.some(event => event.requested === 'paid') && !events.some(event => event.requested === 'refunded')
    if (!paidOnly || Math.random() >= 0.3) return []
    const paid = await orderWhen(order.id, 'paid', read => read.status === 'paid')
    return paid ? [await refund(order.id, `${n}-elsewhere`)] : []
  }

  /** The counts as the shop reads them, every stockSampleMs until the clients are done; a failed read is only an answer in the log. */
  const stockSamples: StockSample[] = []
  let clientsDone = false
  async function watchStock(): Promise<void> {
    while (!clientsDone) {
      const sentAt = Date.now()
      try {
        const read = await request(options.balancerUrl, '/api/inventory', { headers: auth })
        const fromBalancer = read.headers.has(balancerHeader)
        options.answers.record('inventory read', 'balancer', fromBalancer ? 'balancer 502' : read.status, read.headers.get('retry-after'), Date.now() - sentAt)
        if (read.status === 200 && !fromBalancer) {
          for (const row of read.json.data) stockSamples.push({ atMs: options.clock(), sku: row.sku, onHand: row.onHand, reserved: row.reserved, available: row.available })
          figures.stock.samples++
        }
      }
      catch {
        options.answers.record('inventory read', 'balancer', 'network error', null, Date.now() - sentAt)
      }
      await sleep(stockSampleMs)
    }
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
      const path: PaymentPath = roll < 0.5 ? 'mockpay' : roll < 0.9 ? pick(['standard', 'stripe'] as const) : 'unpaid'
      const model = { orderId: order.id, key: intent.key, amount: order.amount, path }
      if (path === 'mockpay') {
        orders.push({ ...model, events: [], ...await payWithMockpay(order, n) })
      }
      else if (path === 'unpaid') {
        const canceled = Math.random() < 0.5 ? await cancel(order.id, { mayBePaid: false }) : undefined
        orders.push({ ...model, events: [], ...(canceled && { cancel: canceled }), refunds: [] })
      }
      else {
        const events = await payWithWebhooks(path, order)
        orders.push({ ...model, events, refunds: await refundPaidElsewhere(order, events, n) })
      }
    }
  }

  // The counts first, as a shop sets them before it sells (a count is idempotent: retried until answered).
  for (const [sku, onHand] of Object.entries(trackedStock)) {
    const set = await untilFinal('inventory set', sku, viaBalancer, url => request(url, `/api/inventory/${sku}`, { method: 'PUT', headers: auth, body: { onHand } }))
    if (set && set.status !== 200) unexpected(`PUT /api/inventory/${sku}`, set)
  }
  const watching = watchStock()
  await Promise.all(Array.from({ length: options.clients }, () => virtualClient()))
  clientsDone = true
  await watching
  return { orderIntents, orders, figures, stockSamples }
}

/**
 * Once the run has settled: the events mockpay recorded for each intent (what it delivers until a
 * 2xx) become its order's accepted events, each refund's with the total refunded when it happened.
 * Read after the refunds' jobs and the automatic refund of a payment that beat its cancel are done.
 */
export async function readMockpayEvents(baseUrl: string, secretKey: string, load: LoadResult): Promise<void> {
  for (const order of load.orders) {
    if (!order.intentId) continue
    const intent = await request(baseUrl, `/api/mockpay/intents/${order.intentId}`, { headers: { authorization: `Bearer ${secretKey}`, [loadClientHeader]: 'ledger' } })
    if (intent.status !== 200) {
      load.figures.unexpectedFinals.push(`GET mockpay intent ${order.intentId}: ${intent.status} ${intent.text.slice(0, 300)}`)
      continue
    }
    const recorded = intent.json.events as Array<{ id: string, type: PaymentEventType, amount?: number }>
    // mockpay records a cancel as its intent's last event and never delivers it: nobody is told of the merchant's own act.
    const delivered = intent.json.status === 'canceled' ? recorded.slice(0, -1) : recorded
    order.events = delivered.map(event => ({
      provider: 'mockpay',
      eventId: event.id,
      requested: requestedStatusOf[event.type],
      ...(event.type === 'payment.refunded' && event.amount !== undefined && { refundedTotal: event.amount }),
    }))
  }
}

function withClientHeader(delivery: SignedDelivery): SignedDelivery {
  return { ...delivery, headers: { ...delivery.headers, [loadClientHeader]: 'load' } }
}
