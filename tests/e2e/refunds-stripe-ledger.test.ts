import { randomUUID } from 'node:crypto'
import { afterAll, expect, it } from 'vitest'
import { toStripeAmount } from '../../server/payments/currencies'
import { fastJobsEnv, stopAll } from '../support/app'
import { validOrderBody } from '../support/orders'
import {
  effectsOf, getOrder, ops, orderWhen, placeOrder, postRefund, postStripeEvent, processedEvents, type ProviderStack, settledJob, settledRefundJob,
  startProviderStack, stripeEnv, stripeIntentsOf, withStripeStack,
} from '../support/providers'
import { pollUntil } from '../support/poll'
import { describeWithServices } from '../support/services'
import type { StripeApi, StripeEvent } from '../support/stripe-api'

// Our ledger against Stripe's (docs/payments-and-refunds.md, "Stripe"): whatever Stripe reports about
// a refund, in whatever order and however often its events arrive, the order's refunds are the
// refunds Stripe holds, each with its amount and final state, and the shopper hears only of those
// that succeeded. The events are the stand-in's own, made as Stripe makes them: refund.created and
// charge.refunded when a refund is made (amount_refunded counting it while it is pending), then
// refund.updated and refund.failed when Stripe fails it.

/** A killed instance's jobs are rescued, and its order locks expire, about a second later. */
const RESCUE_FAST = { JOB_HEARTBEAT_TIMEOUT_MS: '1000', JOB_LOCK_TTL_MS: '1000' }
/** validOrderBody's amount: IDR 150,000. */
const ORDER_AMOUNT = 150_000
const REFUND_AMOUNT = 40_000

/** Each refund of the order as [Stripe's id, amount in Stripe's units, state], ours or the stand-in's; canceled is failed to us. */
type LedgerLine = [string, number, string]

describeWithServices('a Stripe refund\'s ledger agrees with Stripe\'s, whatever order its events come in', ['postgres', 'redis'], () => {
  let api: StripeApi
  let stack: ProviderStack
  withStripeStack('refunds_stripe_ledger', fastJobsEnv, (started, startedStack) => {
    api = started
    stack = startedStack
  }, api => api.pendRefunds(0))
  afterAll(async () => {
    await stopAll()
  })

  async function paidOrder(on: ProviderStack = stack): Promise<{ orderId: string, intentId: string }> {
    const orderId = await placeOrder(on, validOrderBody())
    expect(await settledJob(on.sql, orderId, 'payment.create_intent')).toMatchObject({ status: 'completed' })
    const [intent] = stripeIntentsOf(api, orderId)
    api.succeed(intent!.id)
    const paid = api.events.find(event => event.type === 'payment_intent.succeeded' && event.data.object.id === intent!.id)!
    const delivered = await postStripeEvent(on.app.url, paid)
    expect(delivered.status, delivered.text).toBe(200)
    await orderWhen(on, orderId, 'is paid', order => order.status === 'paid')
    return { orderId, intentId: intent!.id }
  }

  /** The stand-in's refund and charge events about the intent, in the order Stripe made them. */
  const refundEventsOf = (intentId: string): StripeEvent[] => api.events.filter(event =>
    event.type !== 'payment_intent.succeeded' && 'payment_intent' in event.data.object && event.data.object.payment_intent === intentId)

  /** Delivers `events[index]` to the app for each index of `order` (repeats allowed), each processed before the next. */
  async function deliverInOrder(orderId: string, events: StripeEvent[], order: number[]): Promise<void> {
    for (const index of order) {
      const delivered = await postStripeEvent(stack.app.url, events[index])
      expect(delivered.status, delivered.text).toBe(200)
      await processedEvents(stack.sql, orderId)
    }
  }

  const stripeLedger = (intentId: string): LedgerLine[] => api.createdRefunds().filter(made => made.refund.payment_intent === intentId)
    .map(({ refund }) => [refund.id, refund.amount, refund.status === 'canceled' ? 'failed' : refund.status] as LedgerLine).sort()

  /** Our refunds Stripe made (a refusal made none), in Stripe's units. */
  async function ourLedger(orderId: string): Promise<LedgerLine[]> {
    const rows = await stack.sql<Array<{ providerRefundId: string | null, amount: number, currency: string, status: string }>>`
      select provider_refund_id as "providerRefundId", amount, currency, status from refunds where order_id = ${orderId}`
    return rows.filter(row => row.providerRefundId !== null || row.status !== 'failed')
      .map(row => [row.providerRefundId ?? '(unnamed)', toStripeAmount(row.amount, row.currency), row.status] as LedgerLine).sort()
  }

  // Indexes into the events as made: 0 refund.created, 1 charge.refunded (amount_refunded 40,000
  // while pending), 2 refund.updated (failed), 3 refund.failed.
  it.each([
    ['as made', [0, 1, 2, 3]],
    ['reversed: the failure first, the total that still counts the refund last', [3, 2, 1, 0]],
    ['the total between the two failure events', [2, 1, 3, 0]],
    ['each twice, the total again after the failure', [1, 0, 1, 3, 2, 3, 0, 2, 1]],
  ])('a pending refund Stripe then fails, its events %s: the order stays paid, the refund failed, no provider refund, no notice', async (_, order) => {
    const { orderId, intentId } = await paidOrder()
    api.pendRefunds(1)
    const created = await postRefund(stack, orderId, `refund-${randomUUID()}`, { amount: REFUND_AMOUNT })
    expect(created.status, created.text).toBe(201)
    const refundId = created.json.id as string
    expect(await settledRefundJob(stack.sql, refundId)).toMatchObject({ status: 'completed', attempt: 1, errors: [] })
    const [atStripe] = api.createdRefunds().filter(made => made.refund.payment_intent === intentId)
    expect(atStripe!.refund).toMatchObject({ status: 'pending', amount: toStripeAmount(REFUND_AMOUNT, 'IDR'), metadata: { refund_id: refundId } })
    expect(api.charge(intentId)!.amount_refunded).toBe(toStripeAmount(REFUND_AMOUNT, 'IDR'))

    api.settleRefund(atStripe!.refund.id, 'failed')
    const events = refundEventsOf(intentId)
    expect(events.map(event => event.type)).toEqual(['refund.created', 'charge.refunded', 'refund.updated', 'refund.failed'])
    expect(events[1]!.data.object).toMatchObject({ object: 'charge', amount_refunded: toStripeAmount(REFUND_AMOUNT, 'IDR') })
    expect(api.charge(intentId)!.amount_refunded).toBe(0)

    await deliverInOrder(orderId, events, order)

    const settled = (await getOrder(stack, orderId)).json
    expect(settled).toMatchObject({ status: 'paid', amountRefunded: 0 })
    expect(settled.refunds.map((refund: any) => [refund.id, refund.amount, refund.status, refund.source])).toEqual([[refundId, REFUND_AMOUNT, 'failed', 'api']])
    expect(await stack.sql`select count(*)::int as count from refunds where order_id = ${orderId} and source = 'provider'`).toEqual([{ count: 0 }])
    expect(await effectsOf(stack.sql, orderId)).toEqual({ emails: [`Order ${orderId} confirmed`], invoices: 1, markers: ['confirmation_email', 'invoice'] })
    expect(await ourLedger(orderId)).toEqual(stripeLedger(intentId))
    expect(stripeLedger(intentId)).toEqual([[atStripe!.refund.id, toStripeAmount(REFUND_AMOUNT, 'IDR'), 'failed']])
  })

  // Indexes as above, about a refund made in the dashboard (no metadata: found by its payment).
  it.each([
    ['as made', [0, 1, 2, 3]],
    ['reversed', [3, 2, 1, 0]],
    ['the failure first, the total after the refund.created', [2, 0, 1, 3]],
    // The total lists the refund as pending and made elsewhere: it counts for nothing until its own events settle it.
    ['the total first', [1, 3, 0, 2]],
  ])('a dashboard refund left pending that Stripe then fails, its events %s: recorded failed by its name, the order paid, no notice', async (_, order) => {
    const { orderId, intentId } = await paidOrder()
    const dashboard = api.dashboardRefund(intentId, toStripeAmount(REFUND_AMOUNT, 'IDR'), { pending: true })
    api.settleRefund(dashboard.id, 'failed')
    const events = refundEventsOf(intentId)
    expect(events.map(event => event.type)).toEqual(['refund.created', 'charge.refunded', 'refund.updated', 'refund.failed'])
    await deliverInOrder(orderId, events, order)
    const settled = (await getOrder(stack, orderId)).json
    expect(settled).toMatchObject({ status: 'paid', amountRefunded: 0 })
    expect(settled.refunds.map((refund: any) => [refund.amount, refund.status, refund.source])).toEqual([[REFUND_AMOUNT, 'failed', 'provider']])
    expect(await ourLedger(orderId)).toEqual(stripeLedger(intentId))
    expect((await effectsOf(stack.sql, orderId)).emails).toEqual([`Order ${orderId} confirmed`])
  })

  // Two dashboard refunds, the second left pending and then succeeded. Indexes into the events as
  // made: 0 refund.created (the first, succeeded), 1 charge.refunded (listing it), 2 refund.created
  // (the second, pending), 3 charge.refunded (listing both), 4 refund.updated (the second succeeded).
  it.each([
    ['as made', [0, 1, 2, 3, 4]],
    // The first total came before either refund's own event: the pending second fits inside it, but the listing named it.
    ['the first total first, then the pending second', [1, 2, 0, 3, 4]],
    ['reversed', [4, 3, 2, 1, 0]],
  ])('two dashboard refunds, the second pending then succeeded, their events %s: each recorded once by its name, one notice each, the order refunded', async (_, order) => {
    const { orderId, intentId } = await paidOrder()
    const first = api.dashboardRefund(intentId, toStripeAmount(111_000, 'IDR'))
    const second = api.dashboardRefund(intentId, toStripeAmount(ORDER_AMOUNT - 111_000, 'IDR'), { pending: true })
    api.settleRefund(second.id, 'succeeded')
    const events = refundEventsOf(intentId)
    expect(events.map(event => [event.type, event.data.object.id === first.id ? 'first' : event.data.object.id === second.id ? 'second' : 'charge'])).toEqual([
      ['refund.created', 'first'], ['charge.refunded', 'charge'], ['refund.created', 'second'], ['charge.refunded', 'charge'], ['refund.updated', 'second'],
    ])
    await deliverInOrder(orderId, events, order)
    const settled = (await getOrder(stack, orderId)).json
    expect(settled).toMatchObject({ status: 'refunded', amountRefunded: ORDER_AMOUNT })
    expect(await ourLedger(orderId)).toEqual(stripeLedger(intentId))
    expect(stripeLedger(intentId)).toEqual([[first.id, toStripeAmount(111_000, 'IDR'), 'succeeded'], [second.id, toStripeAmount(39_000, 'IDR'), 'succeeded']].sort())
    const named = await stack.sql<Array<{ id: string }>>`select id from refunds where order_id = ${orderId} and source = 'provider' order by id`
    expect(named).toHaveLength(2)
    await pollUntil('both refund notices are sent', async () => (await effectsOf(stack.sql, orderId)).emails.filter(subject => subject.endsWith('refunded')).length >= 2)
    const effects = await effectsOf(stack.sql, orderId)
    expect(effects.markers.filter(marker => marker.startsWith('refund_notice:'))).toEqual(named.map(({ id }) => `refund_notice:${id}`))
    expect(effects.emails.filter(subject => subject.endsWith('refunded'))).toHaveLength(2)
  })

  it('Stripe fails our pending refund of all of it, then the dashboard refunds all of it; the dashboard\'s events come before any of ours: the total\'s listing names ours failed, the dashboard\'s refund is recorded by name, once', async () => {
    const { orderId, intentId } = await paidOrder()
    api.pendRefunds(1)
    const created = await postRefund(stack, orderId, `refund-${randomUUID()}`)
    expect(created.status, created.text).toBe(201)
    const refundId = created.json.id as string
    expect(await settledRefundJob(stack.sql, refundId)).toMatchObject({ status: 'completed', attempt: 1, errors: [] })
    const [ours] = api.createdRefunds().filter(made => made.refund.payment_intent === intentId)
    api.settleRefund(ours!.refund.id, 'failed')
    const dashboard = api.dashboardRefund(intentId)
    const events = refundEventsOf(intentId)
    expect(events.map(event => [event.type, event.data.object.id === dashboard.id ? 'dashboard' : event.data.object.id === ours!.refund.id ? 'ours' : 'charge'])).toEqual([
      ['refund.created', 'ours'], ['charge.refunded', 'charge'], ['refund.updated', 'ours'], ['refund.failed', 'ours'], ['refund.created', 'dashboard'], ['charge.refunded', 'charge'],
    ])

    // The dashboard's refund.created does not fit beside ours, which still holds all of it here; the
    // total after it lists ours failed and the dashboard's succeeded: ours fails, the dashboard's is recorded.
    await deliverInOrder(orderId, events, [4])
    expect((await getOrder(stack, orderId)).json).toMatchObject({ status: 'paid', amountRefunded: 0 })
    await deliverInOrder(orderId, events, [5])
    const refunded = (await getOrder(stack, orderId)).json
    expect(refunded).toMatchObject({ status: 'refunded', amountRefunded: ORDER_AMOUNT })
    expect(refunded.refunds.map((refund: any) => [refund.amount, refund.status, refund.source])).toEqual([[ORDER_AMOUNT, 'failed', 'api'], [ORDER_AMOUNT, 'succeeded', 'provider']])

    // Ours' own events, and the older total that listed it pending, change nothing.
    await deliverInOrder(orderId, events, [1, 0, 3, 2, 5])
    const settled = (await getOrder(stack, orderId)).json
    expect(settled).toEqual(refunded)
    expect(await ourLedger(orderId)).toEqual(stripeLedger(intentId))
    const [notice] = await stack.sql<Array<{ id: string }>>`select id from refunds where order_id = ${orderId} and source = 'provider'`
    expect(await effectsOf(stack.sql, orderId)).toEqual({
      emails: [`Order ${orderId} confirmed`, `Order ${orderId} refunded`], invoices: 1, markers: ['confirmation_email', 'invoice', `refund_notice:${notice!.id}`],
    })
  })

  it('a charge.refunded without order metadata (a charge made elsewhere, its intent ours) is taken by its payment_intent: the dashboard refund is recorded', async () => {
    const { orderId, intentId } = await paidOrder()
    api.dashboardRefund(intentId, toStripeAmount(REFUND_AMOUNT, 'IDR'))
    const charged = refundEventsOf(intentId).find(event => event.type === 'charge.refunded')!
    const bare = { ...charged, data: { object: { ...charged.data.object, metadata: {} } } }
    const delivered = await postStripeEvent(stack.app.url, bare)
    expect(delivered.status, delivered.text).toBe(200)
    expect((await processedEvents(stack.sql, orderId)).map(event => [event.type, event.status])).toEqual([['payment.succeeded', 'applied'], ['payment.refunded', 'applied']])
    expect((await getOrder(stack, orderId)).json).toMatchObject({ status: 'partially_refunded', amountRefunded: REFUND_AMOUNT })
  })

  it('a 500 Stripe keeps under the refund\'s key: the retry finds no refund by its metadata and asks under refund:<id>:2; succeeded, one refund at Stripe', async () => {
    const { orderId, intentId } = await paidOrder()
    api.script.push({ match: 'refund', fault: { kind: 'stored-error', status: 500 } })
    const created = await postRefund(stack, orderId, `refund-${randomUUID()}`, { amount: REFUND_AMOUNT })
    expect(created.status, created.text).toBe(201)
    const refundId = created.json.id as string
    expect(await settledRefundJob(stack.sql, refundId)).toMatchObject({ status: 'completed', attempt: 2 })
    const asked = api.calls.filter(call => call.method === 'POST' && call.path === '/v1/refunds' && call.body.payment_intent === intentId)
    expect(asked.map(call => [call.idempotencyKey, call.answered])).toEqual([[`refund:${refundId}`, 500], [`refund:${refundId}`, 500], [`refund:${refundId}:2`, 200]])
    expect(api.createdRefunds().filter(made => made.refund.payment_intent === intentId)).toEqual([
      expect.objectContaining({ idempotencyKey: `refund:${refundId}:2`, refund: expect.objectContaining({ status: 'succeeded', metadata: expect.objectContaining({ refund_id: refundId }) }) }),
    ])
    expect((await getOrder(stack, orderId)).json).toMatchObject({ status: 'partially_refunded', amountRefunded: REFUND_AMOUNT })
    expect(await ourLedger(orderId)).toEqual(stripeLedger(intentId))
  })

  it('SIGKILL after Stripe made the refund under refund:<id>:2, before the commit: the rescued run walks the same keys, finds it by its metadata and asks for none; one refund', async () => {
    const killStack = await startProviderStack('refunds_stripe_ledger_kill', { ...stripeEnv(api), ...fastJobsEnv, ...RESCUE_FAST })
    try {
      const { orderId, intentId } = await paidOrder(killStack)
      api.script.push(
        { match: 'refund', fault: { kind: 'stored-error', status: 500 } },
        { match: 'refund', idempotencyKey: /:2$/, fault: { kind: 'hold-answer', ms: 60_000 } },
      )
      const created = await postRefund(killStack, orderId, `refund-${randomUUID()}`, { amount: REFUND_AMOUNT })
      expect(created.status, created.text).toBe(201)
      const refundId = created.json.id as string
      await pollUntil('Stripe made the refund under the second key and holds its answer', async () => api.createdRefunds().some(made => made.refund.payment_intent === intentId))

      const killed = killStack.app
      killed.kill('SIGKILL')
      expect(await killed.exited).toBeNull()
      const again = await killStack.startInstance('refunds-stripe-ledger-again')
      await pollUntil(`the payment.refund job of ${refundId} is rescued`, async () => {
        const rescue = await ops(again.url, '/api/ops/tasks/jobs:rescue', 'POST')
        expect(rescue.status, rescue.text).toBe(200)
        const [job] = await killStack.sql<Array<{ status: string }>>`select status from jobs where kind = 'payment.refund' and dedupe_key = ${refundId}`
        return job!.status !== 'running'
      }, { timeoutMs: 20_000, intervalMs: 250 })
      expect(await settledRefundJob(killStack.sql, refundId)).toMatchObject({ status: 'completed', attempt: 3, lastError: null })

      const asked = api.calls.filter(call => call.method === 'POST' && call.path === '/v1/refunds' && call.body.payment_intent === intentId)
      expect(asked.map(call => [call.idempotencyKey, call.answered])).toEqual([
        [`refund:${refundId}`, 500], [`refund:${refundId}`, 500], [`refund:${refundId}:2`, 'dropped'], [`refund:${refundId}`, 500],
      ])
      const [made] = api.createdRefunds().filter(refund => refund.refund.payment_intent === intentId)
      expect(api.createdRefunds().filter(refund => refund.refund.payment_intent === intentId)).toHaveLength(1)
      expect(made).toMatchObject({ idempotencyKey: `refund:${refundId}:2`, refund: { status: 'succeeded', metadata: { refund_id: refundId } } })
      expect((await getOrder({ app: again, tenant: killStack.tenant }, orderId)).json).toMatchObject({ status: 'partially_refunded', amountRefunded: REFUND_AMOUNT })
      const [row] = await killStack.sql<Array<{ providerRefundId: string }>>`select provider_refund_id as "providerRefundId" from refunds where id = ${refundId}`
      expect(row!.providerRefundId).toBe(made!.refund.id)
    }
    finally {
      await killStack.close()
    }
  })
})
