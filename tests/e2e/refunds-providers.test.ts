import { randomUUID } from 'node:crypto'
import { afterAll, describe, expect, it } from 'vitest'
import { fastJobsEnv, stopAll, testSecrets } from '../support/app'
import type { MidtransApi } from '../support/midtrans-api'
import { expectCreatedRefund, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import {
  clearOfScheduledReconcile, getOrder, getRefund, midtransCallsOf, midtransEnv, ops, orderWhen, paidStripeOrder, placeOrder, postCancel,
  postMidtransNotification, postRefund, postStripeEvent, processedEvents, type ProviderStack, refundReasonsOf, runReconcile, settledJob,
  settledRefundJob, startProviderStack, stripeEnv, stripeIntentsOf, stripeRefundCalls, stripeSecretKey, usdOrderBody, withMidtransStack,
  withStripeStack,
} from '../support/providers'
import { describeWithServices } from '../support/services'
import type { StandInPaymentIntent, StripeApi } from '../support/stripe-api'

// Refunds and cancellation (docs/payments-and-refunds.md#refunds-and-cancellation) through the real
// adapters in the built app, against the Stripe and Midtrans stand-ins: each refund asked once
// under its own key (refund:<id>, Midtrans' refund_key), whatever happens to the call — a lost
// answer, 5xx, 429, a refusal, the app killed between the provider's refund and its commit — and
// settled by the answer, a webhook or reconciliation; a payment canceled, or refunded once when the
// shopper paid first. Asserted on the stand-ins' calls and refunds and on the API's answers.

const CREATE = 'payment.create_intent'
const CANCEL = 'payment.cancel'
/** validOrderBody's amount: IDR 150,000 (Stripe counts IDR in hundredths: 15,000,000). */
const ORDER_AMOUNT = 150_000
const AFTER_ZERO = { PAYMENT_RECONCILE_AFTER_SECONDS: '0', WORKER_ENABLED: 'false' }
/** A killed instance's jobs are rescued, and its order locks expire, about a second later. */
const RESCUE_FAST = { JOB_HEARTBEAT_TIMEOUT_MS: '1000', JOB_LOCK_TTL_MS: '1000' }

const newKey = () => `refund-${randomUUID()}`

/** The API's refund as the order lists it: the 201's body without its idempotency block, with `status`. */
function listed(created: { json: Record<string, unknown> }, status: string) {
  const { idempotency: _, ...refund } = created.json
  return { ...refund, status }
}

/** Runs the rescue task (scheduled every 15 s) now, until a dead instance's running refund job is rescued. */
async function rescueRefundJob(stack: ProviderStack, baseUrl: string, refundId: string): Promise<void> {
  await pollUntil(`the payment.refund job of ${refundId} is rescued`, async () => {
    const rescue = await ops(baseUrl, '/api/ops/tasks/jobs:rescue', 'POST')
    expect(rescue.status, rescue.text).toBe(200)
    const [job] = await stack.sql<Array<{ status: string }>>`select status from jobs where kind = 'payment.refund' and dedupe_key = ${refundId}`
    return job!.status !== 'running'
  }, { timeoutMs: 20_000, intervalMs: 250 })
}

describeWithServices('refunds and cancellation against the Stripe and Midtrans stand-ins', ['postgres', 'redis'], () => {
  afterAll(async () => {
    await stopAll()
  })

  describe('Stripe', () => {
    let api: StripeApi
    let stack: ProviderStack
    withStripeStack('refunds_stripe', fastJobsEnv, (started, startedStack) => {
      api = started
      stack = startedStack
    }, api => api.pendRefunds(0))

    /** An IDR order paid at the stand-in, its payment_intent.succeeded applied. */
    const paidOrder = (on: ProviderStack = stack) => paidStripeOrder(api, on)

    const refundsAtStripe = (intentId: string) => api.createdRefunds().filter(made => made.refund.payment_intent === intentId)

    it('a part, then the rest: each asked once under refund:<id> with Stripe\'s units and our ids in its metadata; partially_refunded, then refunded; Stripe\'s charge.refunded adds nothing', async () => {
      const { orderId, intentId } = await paidOrder()
      const firstKey = newKey()
      const first = await postRefund(stack, orderId, firstKey, { amount: 60_000, reason: 'requested_by_customer' })
      expectCreatedRefund(first, { orderId, amount: 60_000, currency: 'IDR', key: firstKey, reason: 'requested_by_customer' })
      const firstId = first.json.id as string
      expect(await settledRefundJob(stack.sql, firstId)).toMatchObject({ status: 'completed', attempt: 1, snoozes: 0, errors: [] })

      const partly = (await getOrder(stack, orderId)).json
      expect(partly).toMatchObject({ status: 'partially_refunded', amountRefunded: 60_000 })
      expect(partly.refunds).toEqual([listed(first, 'succeeded')])
      expect(await getRefund(stack, orderId, firstId)).toEqual(listed(first, 'succeeded'))
      const [asked] = stripeRefundCalls(api, intentId)
      expect(asked).toMatchObject({ idempotencyKey: `refund:${firstId}`, authorization: `Bearer ${stripeSecretKey}`, answered: 200 })
      expect(asked!.body).toEqual({
        payment_intent: intentId,
        amount: String(60_000 * 100),
        reason: 'requested_by_customer',
        metadata: { order_id: orderId, refund_id: firstId, reason: 'requested_by_customer' },
      })

      const restKey = newKey()
      const rest = await postRefund(stack, orderId, restKey)
      expectCreatedRefund(rest, { orderId, amount: ORDER_AMOUNT - 60_000, currency: 'IDR', key: restKey })
      const restId = rest.json.id as string
      expect(await settledRefundJob(stack.sql, restId)).toMatchObject({ status: 'completed', attempt: 1, errors: [] })
      const refunded = (await getOrder(stack, orderId)).json
      expect(refunded).toMatchObject({ status: 'refunded', amountRefunded: ORDER_AMOUNT })
      expect(refunded.refunds).toEqual([listed(first, 'succeeded'), listed(rest, 'succeeded')])

      const calls = stripeRefundCalls(api, intentId)
      expect(calls.map(call => [call.idempotencyKey, call.answered])).toEqual([[`refund:${firstId}`, 200], [`refund:${restId}`, 200]])
      // Stripe takes only its own reasons: none is sent for a refund without one.
      expect(calls[1]!.body).toEqual({ payment_intent: intentId, amount: String(90_000 * 100), metadata: { order_id: orderId, refund_id: restId } })
      expect(refundsAtStripe(intentId).map(({ refund, idempotencyKey, dashboard }) => [refund.amount, refund.status, idempotencyKey, dashboard])).toEqual([
        [6_000_000, 'succeeded', `refund:${firstId}`, false],
        [9_000_000, 'succeeded', `refund:${restId}`, false],
      ])
      expect(api.refundedTotal(intentId)).toBe(ORDER_AMOUNT * 100)

      // Stripe's charge.refunded for the same money names no refund of ours: it adds none.
      const charged = await postStripeEvent(stack.app.url, api.event(api.charge(intentId)!.id, 'charge.refunded'))
      expect(charged.status, charged.text).toBe(200)
      expect((await processedEvents(stack.sql, orderId)).map(event => [event.type, event.status])).toEqual([['payment.succeeded', 'applied'], ['payment.refunded', 'ignored']])
      expect((await getOrder(stack, orderId)).json).toMatchObject({ status: 'refunded', amountRefunded: ORDER_AMOUNT, refunds: [expect.anything(), expect.anything()] })
      expect(await refundReasonsOf(stack.sql, orderId)).toEqual(['refund_requested', 'refund_succeeded', 'refund_requested', 'refund_succeeded', 'no_refund'])
    })

    it('a lost answer, twice (the client\'s own resend, then the job\'s retry): asked three times under one key, one refund at Stripe', async () => {
      const { orderId, intentId } = await paidOrder()
      api.script.push({ match: 'refund', fault: { kind: 'drop-after' } }, { match: 'refund', fault: { kind: 'drop-after' } })
      const created = await postRefund(stack, orderId, newKey())
      expect(created.status, created.text).toBe(201)
      const refundId = created.json.id as string
      const job = await settledRefundJob(stack.sql, refundId)
      expect(job).toMatchObject({ status: 'completed', attempt: 2, lastError: null })
      expect(job.errors).toEqual([expect.objectContaining({ attempt: 1, errorClass: 'retryable', message: expect.stringContaining('Stripe StripeConnectionError') })])

      expect(stripeRefundCalls(api, intentId).map(call => [call.idempotencyKey, call.answered])).toEqual([
        [`refund:${refundId}`, 'dropped'], [`refund:${refundId}`, 'dropped'], [`refund:${refundId}`, 200],
      ])
      expect(refundsAtStripe(intentId)).toEqual([expect.objectContaining({ idempotencyKey: `refund:${refundId}`, refund: expect.objectContaining({ amount: ORDER_AMOUNT * 100 }) })])
      expect((await getOrder(stack, orderId)).json).toMatchObject({ status: 'refunded', amountRefunded: ORDER_AMOUNT, refunds: [listed(created, 'succeeded')] })
    })

    it('500, then 429 with Retry-After: 1: retried under the same key (the 429 snoozed, no attempt spent), one refund at Stripe', async () => {
      const { orderId, intentId } = await paidOrder()
      api.script.push({ match: 'refund', fault: { kind: 'status', status: 500 } }, { match: 'refund', fault: { kind: 'status', status: 429, retryAfter: '1' } })
      const created = await postRefund(stack, orderId, newKey(), { amount: 10_000 })
      expect(created.status, created.text).toBe(201)
      const refundId = created.json.id as string
      const job = await settledRefundJob(stack.sql, refundId)
      expect(job).toMatchObject({ status: 'completed', attempt: 2, snoozes: 1, lastError: null })
      expect(job.errors).toEqual([expect.objectContaining({ attempt: 1, errorClass: 'retryable', message: expect.stringContaining('Stripe api_error (HTTP 500): ') })])

      const calls = stripeRefundCalls(api, intentId)
      expect(calls.map(call => [call.idempotencyKey, call.answered])).toEqual([[`refund:${refundId}`, 500], [`refund:${refundId}`, 429], [`refund:${refundId}`, 200]])
      expect(calls[2]!.at - calls[1]!.at).toBeGreaterThanOrEqual(950)
      expect(refundsAtStripe(intentId)).toHaveLength(1)
      expect((await getOrder(stack, orderId)).json).toMatchObject({ status: 'partially_refunded', amountRefunded: 10_000 })
    })

    it('refused for good after the dashboard refunded first: amount_too_large and charge_already_refunded fail the refund and free its amount; the dashboard\'s refunds appear once their events come', async () => {
      // The dashboard took 100,000 of 150,000; its webhook has not come.
      const partial = await paidOrder()
      api.dashboardRefund(partial.intentId, 100_000 * 100)
      const tooLarge = await postRefund(stack, partial.orderId, newKey(), { amount: 100_000 })
      expect(tooLarge.status, tooLarge.text).toBe(201)
      const tooLargeId = tooLarge.json.id as string
      expect(await settledRefundJob(stack.sql, tooLargeId)).toMatchObject({ status: 'completed', attempt: 1, errors: [] })
      expect(stripeRefundCalls(api, partial.intentId).map(call => [call.idempotencyKey, call.answered])).toEqual([[`refund:${tooLargeId}`, 400]])
      expect(await getRefund(stack, partial.orderId, tooLargeId)).toEqual(listed(tooLarge, 'failed'))
      const [stored] = await stack.sql<Array<{ failure: string }>>`select failure from refunds where id = ${tooLargeId}`
      expect(stored!.failure).toMatch(/^amount_too_large: Refund amount \(.+\) is greater than unrefunded amount on charge \(.+\)$/)
      expect((await getOrder(stack, partial.orderId)).json).toMatchObject({ status: 'paid', amountRefunded: 0 })

      // Its amount is free again: what Stripe still holds is refunded.
      const rest = await postRefund(stack, partial.orderId, newKey(), { amount: 50_000 })
      expect(rest.status, rest.text).toBe(201)
      expect(await settledRefundJob(stack.sql, rest.json.id)).toMatchObject({ status: 'completed', attempt: 1 })
      expect((await getOrder(stack, partial.orderId)).json).toMatchObject({ status: 'partially_refunded', amountRefunded: 50_000 })
      // The dashboard refund's charge.refunded: the total Stripe refunded, beyond the refunds we hold, is the provider's.
      const charged = await postStripeEvent(stack.app.url, api.event(api.charge(partial.intentId)!.id, 'charge.refunded'))
      expect(charged.status, charged.text).toBe(200)
      await processedEvents(stack.sql, partial.orderId)
      const settled = (await getOrder(stack, partial.orderId)).json
      expect(settled).toMatchObject({ status: 'refunded', amountRefunded: ORDER_AMOUNT })
      expect(settled.refunds.map((refund: any) => [refund.amount, refund.status, refund.source])).toEqual([
        [100_000, 'failed', 'api'], [50_000, 'succeeded', 'api'], [100_000, 'succeeded', 'provider'],
      ])

      // The dashboard refunded all of it: the API's refund is refused as already refunded.
      const full = await paidOrder()
      const dashboard = api.dashboardRefund(full.intentId)
      const refused = await postRefund(stack, full.orderId, newKey())
      expect(refused.status, refused.text).toBe(201)
      const refusedId = refused.json.id as string
      expect(await settledRefundJob(stack.sql, refusedId)).toMatchObject({ status: 'completed', attempt: 1, errors: [] })
      const [refusal] = await stack.sql<Array<{ failure: string }>>`select failure from refunds where id = ${refusedId}`
      expect(refusal!.failure).toMatch(/^charge_already_refunded: Charge ch_\w+ has already been refunded\.$/)
      // The dashboard refund's own event (no metadata: found by its payment) fits, as the failed refund holds nothing.
      const updated = await postStripeEvent(stack.app.url, api.event(dashboard.id, 'refund.updated'))
      expect(updated.status, updated.text).toBe(200)
      await processedEvents(stack.sql, full.orderId)
      const refunded = (await getOrder(stack, full.orderId)).json
      expect(refunded).toMatchObject({ status: 'refunded', amountRefunded: ORDER_AMOUNT })
      expect(refunded.refunds.map((refund: any) => [refund.amount, refund.status, refund.source])).toEqual([[ORDER_AMOUNT, 'failed', 'api'], [ORDER_AMOUNT, 'succeeded', 'provider']])
      expect(refundsAtStripe(full.intentId).map(made => made.dashboard)).toEqual([true])
    })

    it('SIGKILL between Stripe\'s refund and the commit: an instance started again rescues the job and asks under the same key; one refund at Stripe, settled', async () => {
      const killStack = await startProviderStack('refunds_stripe_kill', { ...stripeEnv(api), ...fastJobsEnv, ...RESCUE_FAST })
      try {
        const { orderId, intentId } = await paidOrder(killStack)
        api.script.push({ match: 'refund', fault: { kind: 'hold-answer', ms: 60_000 } })
        const created = await postRefund(killStack, orderId, newKey())
        expect(created.status, created.text).toBe(201)
        const refundId = created.json.id as string
        await pollUntil('Stripe made the refund and holds its answer', async () => refundsAtStripe(intentId).length === 1)
        expect(await killStack.sql`select status, attempt from jobs where kind = 'payment.refund' and dedupe_key = ${refundId}`).toEqual([{ status: 'running', attempt: 1 }])
        expect(await getRefund(killStack, orderId, refundId)).toEqual(listed(created, 'pending'))

        const killed = killStack.app
        killed.kill('SIGKILL')
        expect(await killed.exited).toBeNull()
        const again = await killStack.startInstance('refunds-stripe-again')
        await rescueRefundJob(killStack, again.url, refundId)
        const job = await settledRefundJob(killStack.sql, refundId)
        expect(job).toMatchObject({ status: 'completed', attempt: 2, lastError: null })
        expect(job.errors).toEqual([expect.objectContaining({ attempt: 1, errorClass: 'rescued', worker: expect.stringMatching(new RegExp(`:${killed.pid}$`)) })])

        // The held answer never arrived; the second call was answered from Stripe's idempotent record.
        expect(stripeRefundCalls(api, intentId).map(call => [call.idempotencyKey, call.answered])).toEqual([[`refund:${refundId}`, 'dropped'], [`refund:${refundId}`, 200]])
        expect(refundsAtStripe(intentId)).toEqual([expect.objectContaining({ idempotencyKey: `refund:${refundId}`, refund: expect.objectContaining({ amount: ORDER_AMOUNT * 100, status: 'succeeded' }) })])
        expect((await getOrder({ app: again, tenant: killStack.tenant }, orderId)).json).toMatchObject({
          status: 'refunded', amountRefunded: ORDER_AMOUNT, refunds: [listed(created, 'succeeded')],
        })
      }
      finally {
        await killStack.close()
      }
    })

    it('refunds Stripe leaves pending: one settled by its signed refund.updated (a redelivery replayed), one whose webhook never came by reconciliation', async () => {
      const { orderId, intentId } = await paidOrder()
      api.pendRefunds(2)
      const byWebhook = await postRefund(stack, orderId, newKey(), { amount: 50_000 })
      expect(byWebhook.status, byWebhook.text).toBe(201)
      expect(await settledRefundJob(stack.sql, byWebhook.json.id)).toMatchObject({ status: 'completed', attempt: 1, errors: [] })
      const [first] = refundsAtStripe(intentId)
      expect(first!.refund).toMatchObject({ status: 'pending', metadata: { refund_id: byWebhook.json.id } })
      expect((await getOrder(stack, orderId)).json).toMatchObject({ status: 'paid', amountRefunded: 0, refunds: [listed(byWebhook, 'pending')] })

      api.settleRefund(first!.refund.id, 'succeeded')
      const event = api.event(first!.refund.id, 'refund.updated')
      const delivered = await postStripeEvent(stack.app.url, event)
      expect(delivered.status, delivered.text).toBe(200)
      expect(delivered.json).toEqual({ received: true, eventId: event.id, idempotency: { key: event.id, replayed: false } })
      await processedEvents(stack.sql, orderId)
      expect((await getOrder(stack, orderId)).json).toMatchObject({ status: 'partially_refunded', amountRefunded: 50_000, refunds: [listed(byWebhook, 'succeeded')] })
      const redelivered = await postStripeEvent(stack.app.url, event)
      expect(redelivered.status, redelivered.text).toBe(200)
      expect(redelivered.json.idempotency).toEqual({ key: event.id, replayed: true })

      const byReconcile = await postRefund(stack, orderId, newKey())
      expect(byReconcile.status, byReconcile.text).toBe(201)
      expect(await settledRefundJob(stack.sql, byReconcile.json.id)).toMatchObject({ status: 'completed', attempt: 1 })
      const second = refundsAtStripe(intentId)[1]!
      expect(second.refund.status).toBe('pending')
      // Settled at Stripe; no webhook comes.
      api.settleRefund(second.refund.id, 'succeeded')
      const reconciler = await stack.startInstance('refunds-stripe-reconciler', AFTER_ZERO)
      try {
        await clearOfScheduledReconcile(8)
        const run = await runReconcile(reconciler.url)
        expect(run.result.counts).toMatchObject({ refundsChecked: 1, refundsSettled: 1, refundsFailed: 0 })
        expect(api.calls.filter(call => call.method === 'GET' && call.path === `/v1/refunds/${second.refund.id}`).map(call => call.answered)).toEqual([200])
        expect((await getOrder(stack, orderId)).json).toMatchObject({
          status: 'refunded', amountRefunded: ORDER_AMOUNT, refunds: [listed(byWebhook, 'succeeded'), listed(byReconcile, 'succeeded')],
        })
        expect((await runReconcile(reconciler.url)).result.counts).toMatchObject({ refundsChecked: 0, refundsSettled: 0 })
      }
      finally {
        await reconciler.stop()
      }
      expect(refundsAtStripe(intentId)).toHaveLength(2)
    })

    it('a pending refund that Stripe then fails (refund.updated, failed): the refund fails and its amount is free again', async () => {
      const { orderId, intentId } = await paidOrder()
      api.pendRefunds(1)
      const pending = await postRefund(stack, orderId, newKey())
      expect(pending.status, pending.text).toBe(201)
      expect(await settledRefundJob(stack.sql, pending.json.id)).toMatchObject({ status: 'completed', attempt: 1 })
      const [atStripe] = refundsAtStripe(intentId)
      api.settleRefund(atStripe!.refund.id, 'failed')
      const delivered = await postStripeEvent(stack.app.url, api.event(atStripe!.refund.id, 'refund.updated'))
      expect(delivered.status, delivered.text).toBe(200)
      await processedEvents(stack.sql, orderId)
      expect((await getOrder(stack, orderId)).json).toMatchObject({ status: 'paid', amountRefunded: 0, refunds: [listed(pending, 'failed')] })

      const again = await postRefund(stack, orderId, newKey())
      expect(again.status, again.text).toBe(201)
      expect(again.json.amount).toBe(ORDER_AMOUNT)
      expect(await settledRefundJob(stack.sql, again.json.id)).toMatchObject({ status: 'completed', attempt: 1 })
      expect((await getOrder(stack, orderId)).json).toMatchObject({ status: 'refunded', amountRefunded: ORDER_AMOUNT })
      expect(refundsAtStripe(intentId).map(made => made.refund.status)).toEqual(['failed', 'succeeded'])
    })

    /** A dashboard refund of 40,000 with both of Stripe's events about it posted, in `order`: it appears once, with source provider. */
    async function dashboardRefundSeenTwice(order: Array<'charge.refunded' | 'refund.updated'>) {
      const { orderId, intentId } = await paidOrder()
      const dashboard = api.dashboardRefund(intentId, 40_000 * 100)
      const events = { 'charge.refunded': api.event(api.charge(intentId)!.id, 'charge.refunded'), 'refund.updated': api.event(dashboard.id, 'refund.updated') }
      for (const type of order) {
        const delivered = await postStripeEvent(stack.app.url, events[type])
        expect(delivered.status, delivered.text).toBe(200)
        await processedEvents(stack.sql, orderId)
      }
      const refunded = (await getOrder(stack, orderId)).json
      expect(refunded).toMatchObject({ status: 'partially_refunded', amountRefunded: 40_000 })
      expect(refunded.refunds).toEqual([{
        id: expect.stringMatching(/^re_/), object: 'refund', orderId, amount: 40_000, currency: 'IDR', status: 'succeeded', reason: null, source: 'provider', createdAt: expect.any(String),
      }])
      expect((await processedEvents(stack.sql, orderId)).map(event => event.status)).toEqual(['applied', 'applied', 'ignored'])
      expect(stripeRefundCalls(api, intentId)).toEqual([])
    }

    it('a dashboard refund whose refund.updated comes before its charge.refunded appears once, with source provider', async () => {
      await dashboardRefundSeenTwice(['refund.updated', 'charge.refunded'])
    })

    // charge.refunded's total is recorded first, unnamed; the refund.updated naming that refund gives it its name.
    it('a dashboard refund whose charge.refunded comes before its refund.updated appears once, with source provider', async () => {
      await dashboardRefundSeenTwice(['charge.refunded', 'refund.updated'])
    })

    it('cancel: the PaymentIntent is canceled once under order:<id>:cancel; refunds are then refused', async () => {
      const orderId = await placeOrder(stack, validOrderBody())
      await settledJob(stack.sql, orderId, CREATE)
      const [intent] = stripeIntentsOf(api, orderId)
      const key = newKey()
      const canceled = await postCancel(stack, orderId, key)
      expect(canceled.status, canceled.text).toBe(200)
      expect(canceled.json).toMatchObject({ id: orderId, status: 'canceled', amountRefunded: 0, refunds: [], idempotency: { key, replayed: false } })
      expect(await settledJob(stack.sql, orderId, CANCEL)).toMatchObject({ status: 'completed', attempt: 1, errors: [] })

      const cancels = api.calls.filter(call => call.method === 'POST' && call.path === `/v1/payment_intents/${intent!.id}/cancel`)
      expect(cancels.map(call => [call.idempotencyKey, call.answered])).toEqual([[`order:${orderId}:cancel`, 200]])
      expect(api.intents.get(intent!.id)!.status).toBe('canceled')
      expect((await getOrder(stack, orderId)).json.status).toBe('canceled')
      const refused = await postRefund(stack, orderId, newKey())
      expect(refused.status, refused.text).toBe(409)
      expect(refused.json).toMatchObject({ type: '/problems/order-not-refundable', orderStatus: 'canceled' })
    })

    it('cancel after the shopper paid: Stripe refuses the cancel, the intent says succeeded, and the payment is refunded once (automatic, order_canceled); its late webhook changes nothing', async () => {
      const orderId = await placeOrder(stack, validOrderBody())
      await settledJob(stack.sql, orderId, CREATE)
      const [intent] = stripeIntentsOf(api, orderId)
      // Paid at Stripe; its webhook has not come when the shop cancels.
      api.succeed(intent!.id)
      const canceled = await postCancel(stack, orderId, newKey())
      expect(canceled.status, canceled.text).toBe(200)
      expect(canceled.json.status).toBe('canceled')
      expect(await settledJob(stack.sql, orderId, CANCEL)).toMatchObject({ status: 'completed', attempt: 1, errors: [] })
      const cancels = api.calls.filter(call => call.method === 'POST' && call.path === `/v1/payment_intents/${intent!.id}/cancel`)
      expect(cancels.map(call => [call.idempotencyKey, call.answered])).toEqual([[`order:${orderId}:cancel`, 400]])

      const order = await orderWhen(stack, orderId, 'is refunded', order => order.status === 'refunded')
      expect(order.refunds).toEqual([{
        id: expect.stringMatching(/^re_/), object: 'refund', orderId, amount: ORDER_AMOUNT, currency: 'IDR', status: 'succeeded', reason: 'order_canceled', source: 'automatic', createdAt: expect.any(String),
      }])
      const refundId = order.refunds[0].id as string
      const calls = stripeRefundCalls(api, intent!.id)
      expect(calls.map(call => [call.idempotencyKey, call.answered])).toEqual([[`refund:${refundId}`, 200]])
      // order_canceled is not one of Stripe's reasons: it travels in the metadata.
      expect(calls[0]!.body).toEqual({ payment_intent: intent!.id, amount: String(ORDER_AMOUNT * 100), metadata: { order_id: orderId, refund_id: refundId, reason: 'order_canceled' } })

      const late = await postStripeEvent(stack.app.url, api.event(intent!.id, 'payment_intent.succeeded'))
      expect(late.status, late.text).toBe(200)
      expect((await processedEvents(stack.sql, orderId)).map(event => [event.type, event.status])).toEqual([['payment.succeeded', 'ignored']])
      expect((await getOrder(stack, orderId)).json).toMatchObject({ status: 'refunded', refunds: [expect.objectContaining({ id: refundId })] })
      expect(refundsAtStripe(intent!.id)).toHaveLength(1)
      expect(await refundReasonsOf(stack.sql, orderId)).toEqual(['canceled', 'refund_for_canceled_order', 'refund_succeeded', 'lower_precedence'])
    })

    it('a Stripe event naming its order in metadata.orderId is applied: the order is paid', async () => {
      const orderId = await placeOrder(stack, usdOrderBody())
      await settledJob(stack.sql, orderId, CREATE)
      const [intent] = stripeIntentsOf(api, orderId)
      api.succeed(intent!.id)
      const event = api.event(intent!.id, 'payment_intent.succeeded')
      ;(event.data.object as StandInPaymentIntent).metadata = { orderId }
      const delivered = await postStripeEvent(stack.app.url, event)
      expect(delivered.status, delivered.text).toBe(200)
      expect(await processedEvents(stack.sql, orderId)).toEqual([expect.objectContaining({ eventId: event.id, type: 'payment.succeeded', paymentId: intent!.id, status: 'applied' })])
      expect((await getOrder(stack, orderId)).json.status).toBe('paid')
    })
  })

  describe('Midtrans', () => {
    let api: MidtransApi
    let stack: ProviderStack
    withMidtransStack('refunds_midtrans', fastJobsEnv, (started, startedStack) => {
      api = started
      stack = startedStack
    })

    /** An IDR order (GoPay unless said otherwise) settled at the stand-in, its notification applied; the calls so far forgotten. */
    async function paidOrder(on: ProviderStack = stack, paymentMethod = 'ewallet'): Promise<string> {
      const orderId = await placeOrder(on, validOrderBody({ paymentMethod }))
      expect(await settledJob(on.sql, orderId, CREATE)).toMatchObject({ status: 'completed' })
      api.settle(orderId)
      const delivered = await postMidtransNotification(on.app.url, api.notification(orderId))
      expect(delivered.status, delivered.text).toBe(200)
      await orderWhen(on, orderId, 'is paid', order => order.status === 'paid')
      api.calls.length = 0
      return orderId
    }

    const refundsAtMidtrans = (orderId: string) => api.createdRefunds().filter(made => made.orderId === orderId)

    it('a GoPay refund, a part then the rest: the direct endpoint asked once each with refund_key and amount; partially_refunded, then refunded; Midtrans\' refund notification adds nothing', async () => {
      const orderId = await paidOrder()
      expect(api.transactions.get(orderId)!.payment_type).toBe('gopay')
      const firstKey = newKey()
      const first = await postRefund(stack, orderId, firstKey, { amount: 60_000, reason: 'requested_by_customer' })
      expectCreatedRefund(first, { orderId, amount: 60_000, currency: 'IDR', key: firstKey, reason: 'requested_by_customer' })
      const firstId = first.json.id as string
      expect(await settledRefundJob(stack.sql, firstId)).toMatchObject({ status: 'completed', attempt: 1, snoozes: 0, errors: [] })
      expect(midtransCallsOf(api, orderId)).toEqual([{ call: 'status', answered: 200 }, { call: 'direct refund', answered: 200 }])
      const asked = api.calls.find(call => call.path === `/v2/${orderId}/refund/online/direct`)!
      expect(asked.authorization).toBe(`Basic ${Buffer.from(`${testSecrets.midtransServerKey}:`).toString('base64')}`)
      expect(asked.body).toEqual({ refund_key: firstId, amount: 60_000, reason: 'requested_by_customer' })
      expect((await getOrder(stack, orderId)).json).toMatchObject({ status: 'partially_refunded', amountRefunded: 60_000, refunds: [listed(first, 'succeeded')] })
      expect(api.transactions.get(orderId)!.transaction_status).toBe('partial_refund')

      const rest = await postRefund(stack, orderId, newKey())
      expect(rest.status, rest.text).toBe(201)
      const restId = rest.json.id as string
      expect(await settledRefundJob(stack.sql, restId)).toMatchObject({ status: 'completed', attempt: 1, errors: [] })
      expect((await getOrder(stack, orderId)).json).toMatchObject({ status: 'refunded', amountRefunded: ORDER_AMOUNT, refunds: [listed(first, 'succeeded'), listed(rest, 'succeeded')] })
      expect(refundsAtMidtrans(orderId).map(({ refund, endpoint }) => [refund.refund_key, refund.refund_amount, refund.refund_method, endpoint])).toEqual([
        [firstId, '60000.00', 'online', 'direct'], [restId, '90000.00', 'online', 'direct'],
      ])
      expect(api.refundedTotal(orderId)).toBe(ORDER_AMOUNT)
      expect(Object.fromEntries(api.refundKeyUses())).toMatchObject({ [firstId]: 1, [restId]: 1 })

      const notified = await postMidtransNotification(stack.app.url, api.notification(orderId))
      expect(notified.status, notified.text).toBe(200)
      const events = await processedEvents(stack.sql, orderId)
      expect(events.map(event => [event.type, event.status])).toEqual([['payment.succeeded', 'applied'], ['payment.updated', 'ignored']])
      expect((await getOrder(stack, orderId)).json.refunds).toHaveLength(2)
    })

    it('a lost refund answer: the retry reads the refund back by its refund_key from the status API and never asks again; one refund', async () => {
      const orderId = await paidOrder()
      api.script.push({ match: 'refund', fault: { kind: 'drop-after' } })
      const created = await postRefund(stack, orderId, newKey())
      expect(created.status, created.text).toBe(201)
      const refundId = created.json.id as string
      const job = await settledRefundJob(stack.sql, refundId)
      expect(job).toMatchObject({ status: 'completed', attempt: 2, lastError: null })
      expect(job.errors).toEqual([expect.objectContaining({ attempt: 1, errorClass: 'retryable', message: expect.stringContaining('Midtrans unreachable: ') })])
      expect(midtransCallsOf(api, orderId)).toEqual([{ call: 'status', answered: 200 }, { call: 'direct refund', answered: 'dropped' }, { call: 'status', answered: 200 }])
      expect(api.refundKeyUses().get(refundId)).toBe(1)
      expect(refundsAtMidtrans(orderId)).toEqual([expect.objectContaining({ refund: expect.objectContaining({ refund_key: refundId, refund_amount: '150000.00' }) })])
      expect((await getOrder(stack, orderId)).json).toMatchObject({ status: 'refunded', amountRefunded: ORDER_AMOUNT, refunds: [listed(created, 'succeeded')] })
    })

    it('500, then 429 with Retry-After: 1: asked again under the same refund_key (the 429 snoozed), one refund', async () => {
      const orderId = await paidOrder()
      api.script.push({ match: 'refund', fault: { kind: 'status', status: 500 } }, { match: 'refund', fault: { kind: 'status', status: 429, retryAfter: '1' } })
      const created = await postRefund(stack, orderId, newKey(), { amount: 25_000 })
      expect(created.status, created.text).toBe(201)
      const refundId = created.json.id as string
      const job = await settledRefundJob(stack.sql, refundId)
      expect(job).toMatchObject({ status: 'completed', attempt: 2, snoozes: 1, lastError: null })
      expect(job.errors).toEqual([expect.objectContaining({ attempt: 1, errorClass: 'retryable', message: expect.stringContaining('Midtrans 500: ') })])
      const refundCalls = midtransCallsOf(api, orderId).filter(call => call.call === 'direct refund')
      expect(refundCalls.map(call => call.answered)).toEqual([500, 429, 200])
      expect(api.refundKeyUses().get(refundId)).toBe(3)
      expect(refundsAtMidtrans(orderId)).toHaveLength(1)
      expect((await getOrder(stack, orderId)).json).toMatchObject({ status: 'partially_refunded', amountRefunded: 25_000 })
    })

    it('412 is final: the refund fails with Midtrans\' words and frees its amount, so a new refund of all of it is taken; a bank transfer cannot be refunded through the API', async () => {
      const orderId = await paidOrder()
      api.script.push({ match: 'refund', fault: { kind: 'status', status: 412, error: { status_message: 'Merchant cannot modify the status of the transaction' } } })
      const refused = await postRefund(stack, orderId, newKey())
      expect(refused.status, refused.text).toBe(201)
      const refusedId = refused.json.id as string
      expect(await settledRefundJob(stack.sql, refusedId)).toMatchObject({ status: 'completed', attempt: 1, errors: [] })
      expect(await getRefund(stack, orderId, refusedId)).toEqual(listed(refused, 'failed'))
      const [stored] = await stack.sql<Array<{ failure: string }>>`select failure from refunds where id = ${refusedId}`
      expect(stored!.failure).toBe('412: Merchant cannot modify the status of the transaction')
      expect((await getOrder(stack, orderId)).json).toMatchObject({ status: 'paid', amountRefunded: 0 })

      const againKey = newKey()
      const again = await postRefund(stack, orderId, againKey)
      expectCreatedRefund(again, { orderId, amount: ORDER_AMOUNT, currency: 'IDR', key: againKey })
      expect(await settledRefundJob(stack.sql, again.json.id)).toMatchObject({ status: 'completed', attempt: 1 })
      expect((await getOrder(stack, orderId)).json).toMatchObject({ status: 'refunded', amountRefunded: ORDER_AMOUNT })
      expect(refundsAtMidtrans(orderId).map(made => made.refund.refund_key)).toEqual([again.json.id])

      const transferId = await paidOrder(stack, 'bank_transfer')
      const transfer = await postRefund(stack, transferId, newKey())
      expect(transfer.status, transfer.text).toBe(201)
      expect(await settledRefundJob(stack.sql, transfer.json.id)).toMatchObject({ status: 'completed', attempt: 1, errors: [] })
      expect(midtransCallsOf(api, transferId)).toEqual([{ call: 'status', answered: 200 }, { call: 'refund', answered: 412 }])
      expect(await getRefund(stack, transferId, transfer.json.id)).toMatchObject({ status: 'failed' })
      expect((await getOrder(stack, transferId)).json).toMatchObject({ status: 'paid', amountRefunded: 0 })
    })

    it('a refund the bank denies (200 with status_code 202): the refund fails and its amount is free again', async () => {
      const orderId = await paidOrder()
      api.script.push({ match: 'refund', fault: { kind: 'deny' } })
      const denied = await postRefund(stack, orderId, newKey())
      expect(denied.status, denied.text).toBe(201)
      expect(await settledRefundJob(stack.sql, denied.json.id)).toMatchObject({ status: 'completed', attempt: 1, errors: [] })
      expect(midtransCallsOf(api, orderId)).toEqual([{ call: 'status', answered: 200 }, { call: 'direct refund', answered: 200 }])
      expect(refundsAtMidtrans(orderId)).toEqual([])
      expect(await getRefund(stack, orderId, denied.json.id)).toEqual(listed(denied, 'failed'))
      const [stored] = await stack.sql<Array<{ failure: string }>>`select failure from refunds where id = ${denied.json.id}`
      expect(stored!.failure).toBe('202: Refund denied by the bank')
      expect((await getOrder(stack, orderId)).json).toMatchObject({ status: 'paid', amountRefunded: 0 })

      const again = await postRefund(stack, orderId, newKey())
      expect(again.status, again.text).toBe(201)
      expect(await settledRefundJob(stack.sql, again.json.id)).toMatchObject({ status: 'completed', attempt: 1 })
      expect((await getOrder(stack, orderId)).json).toMatchObject({ status: 'refunded', amountRefunded: ORDER_AMOUNT })
      expect(refundsAtMidtrans(orderId).map(made => made.refund.refund_key)).toEqual([again.json.id])
    })

    it('SIGKILL between Midtrans\' refund and the commit: the instance started again finds the refund by its refund_key and settles it; one refund', async () => {
      const killStack = await startProviderStack('refunds_midtrans_kill', { ...midtransEnv(api), ...fastJobsEnv, ...RESCUE_FAST })
      try {
        const orderId = await paidOrder(killStack)
        api.script.push({ match: 'refund', fault: { kind: 'hold-answer', ms: 60_000 } })
        const created = await postRefund(killStack, orderId, newKey())
        expect(created.status, created.text).toBe(201)
        const refundId = created.json.id as string
        await pollUntil('Midtrans made the refund and holds its answer', async () => refundsAtMidtrans(orderId).length === 1)
        expect(await killStack.sql`select status, attempt from jobs where kind = 'payment.refund' and dedupe_key = ${refundId}`).toEqual([{ status: 'running', attempt: 1 }])

        const killed = killStack.app
        killed.kill('SIGKILL')
        expect(await killed.exited).toBeNull()
        const again = await killStack.startInstance('refunds-midtrans-again')
        await rescueRefundJob(killStack, again.url, refundId)
        const job = await settledRefundJob(killStack.sql, refundId)
        expect(job).toMatchObject({ status: 'completed', attempt: 2, lastError: null })
        expect(job.errors).toEqual([expect.objectContaining({ attempt: 1, errorClass: 'rescued', worker: expect.stringMatching(new RegExp(`:${killed.pid}$`)) })])

        expect(midtransCallsOf(api, orderId)).toEqual([{ call: 'status', answered: 200 }, { call: 'direct refund', answered: 'dropped' }, { call: 'status', answered: 200 }])
        expect(api.refundKeyUses().get(refundId)).toBe(1)
        expect(refundsAtMidtrans(orderId)).toHaveLength(1)
        expect((await getOrder({ app: again, tenant: killStack.tenant }, orderId)).json).toMatchObject({
          status: 'refunded', amountRefunded: ORDER_AMOUNT, refunds: [listed(created, 'succeeded')],
        })
      }
      finally {
        await killStack.close()
      }
    })

    it('cancel: a pending bank transfer is canceled once at /v2/:order_id/cancel', async () => {
      const orderId = await placeOrder(stack, validOrderBody())
      await settledJob(stack.sql, orderId, CREATE)
      const canceled = await postCancel(stack, orderId, newKey())
      expect(canceled.status, canceled.text).toBe(200)
      expect(canceled.json).toMatchObject({ id: orderId, status: 'canceled' })
      expect(await settledJob(stack.sql, orderId, CANCEL)).toMatchObject({ status: 'completed', attempt: 1, errors: [] })
      expect(midtransCallsOf(api, orderId)).toEqual([{ call: 'charge', answered: 200 }, { call: 'cancel', answered: 200 }])
      expect(api.transactions.get(orderId)!.transaction_status).toBe('cancel')
      expect((await getOrder(stack, orderId)).json.status).toBe('canceled')
    })

    it('cancel after the shopper paid: Midtrans refuses (412), its status API says settlement, and the payment is refunded once through the direct endpoint (automatic, order_canceled)', async () => {
      const orderId = await placeOrder(stack, validOrderBody({ paymentMethod: 'ewallet' }))
      await settledJob(stack.sql, orderId, CREATE)
      api.settle(orderId)
      const canceled = await postCancel(stack, orderId, newKey())
      expect(canceled.status, canceled.text).toBe(200)
      expect(canceled.json.status).toBe('canceled')
      expect(await settledJob(stack.sql, orderId, CANCEL)).toMatchObject({ status: 'completed', attempt: 1, errors: [] })
      const order = await orderWhen(stack, orderId, 'is refunded', order => order.status === 'refunded')
      expect(order.refunds).toEqual([expect.objectContaining({ amount: ORDER_AMOUNT, status: 'succeeded', reason: 'order_canceled', source: 'automatic' })])
      const refundId = order.refunds[0].id as string
      expect(midtransCallsOf(api, orderId)).toEqual([
        { call: 'charge', answered: 200 }, { call: 'cancel', answered: 412 }, { call: 'status', answered: 200 },
        { call: 'status', answered: 200 }, { call: 'direct refund', answered: 200 },
      ])
      expect(api.calls.find(call => call.path === `/v2/${orderId}/refund/online/direct`)!.body).toEqual({ refund_key: refundId, amount: ORDER_AMOUNT, reason: 'order_canceled' })
      expect(refundsAtMidtrans(orderId)).toHaveLength(1)
      expect(await refundReasonsOf(stack.sql, orderId)).toEqual(['canceled', 'refund_for_canceled_order', 'refund_succeeded'])
    })
  })
})
