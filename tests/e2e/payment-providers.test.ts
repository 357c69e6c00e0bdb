import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { paymentIdempotencyKey } from '../../server/payments'
import { REFUSED_DETAILS_MESSAGE } from '../../server/payments/types'
import { type AppProcess, fastJobsEnv, startApp, stopAll, testSecrets } from '../support/app'
import { createTenant, request, type TestResponse } from '../support/http'
import { type MidtransApi, startMidtransApi } from '../support/midtrans-api'
import { expectProblem, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import {
  allJobsSettled, clearOfScheduledReconcile, effectsOf, getOrder, historyOf, jobsOf, midtransCallsOf, midtransEnv, ops, orderWhen,
  placeOrder, type ProviderStack, runReconcile, settledJob, startProviderStack, stripeCreates, stripeEnv, stripeIntentsOf, stripeSecretKey,
  usdOrderBody, webhookEventsOf, withStandInStack,
} from '../support/providers'
import { describeWithServices, redisUrl } from '../support/services'
import { type StripeApi, startStripeApi, stripeSignature } from '../support/stripe-api'
import { webhookRowCounts } from '../support/webhooks'
import { logLines, startWorker } from '../support/worker'

// The real payment adapters (server/payments/stripe.ts through the official stripe client,
// midtrans.ts through midtrans-client) in the built app, against local stand-ins of Stripe's
// PaymentIntents API and Midtrans' Core API: one payment per order however the job runs (retries,
// snoozes, lost responses, a worker killed between the provider's answer and the commit), refusals
// recorded on the order, Midtrans notifications confirmed with its status API, and reconciliation
// finding the payment whose webhook never came — each exactly once, asserted on the stand-ins'
// calls and on rows.

const CREATE = 'payment.create_intent'
const AFTER_ZERO = { PAYMENT_RECONCILE_AFTER_SECONDS: '0', WORKER_ENABLED: 'false' }

/** A reconcile task's answer: `{ result: MaintenanceResult }`. */
const ranCounts = (answer: any): Record<string, number> | undefined => answer.result.skipped ? undefined : answer.result.counts

/**
 * What a reconcile run should find: every order still awaiting payment with a payment at the
 * provider is asked about (all are due with PAYMENT_RECONCILE_AFTER_SECONDS=0); those whose
 * payment has moved at the stand-in (`moved`) are recorded, the others unchanged.
 */
async function expectedReconcile(stack: ProviderStack, provider: string, moved: (paymentId: string) => boolean) {
  const due = await stack.sql<Array<{ paymentId: string }>>`
    select payment_intent_id as "paymentId" from orders where status = 'pending_payment' and payment_intent_id is not null and payment_provider = ${provider}`
  const recorded = due.filter(order => moved(order.paymentId)).length
  // Nothing here runs out of attempts or leaves a refund pending: those passes find nothing.
  return { checked: due.length, recorded, alreadyRecorded: 0, unchanged: due.length - recorded, missing: 0, failed: 0, paymentsAskedAgain: 0, refundsAskedAgain: 0, refundsChecked: 0, refundsSettled: 0, refundsFailed: 0 }
}

function postWebhook(baseUrl: string, provider: 'stripe' | 'midtrans', body: string, headers: Record<string, string> = {}): Promise<TestResponse> {
  return request(baseUrl, `/api/webhooks/${provider}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body })
}

describeWithServices('payment providers against local stand-ins of their APIs', ['postgres', 'redis'], () => {
  afterAll(async () => {
    await stopAll()
  })

  describe('Stripe (PAYMENT_PROVIDER=stripe)', () => {
    let api: StripeApi
    let stack: ProviderStack
    // The intents stay (as at Stripe): reconciliation asks about every pending order's.
    withStandInStack({
      start: () => startStripeApi({ secretKey: stripeSecretKey }),
      stack: api => startProviderStack('stripe', { ...stripeEnv(api), ...fastJobsEnv }),
      use: (started, startedStack) => {
        api = started
        stack = startedStack
      },
    })

    it('an order gets one PaymentIntent: one create call under order:<id>:payment with its amount, currency and order id; the order shows the intent and its client secret', async () => {
      const body = usdOrderBody()
      const orderId = await placeOrder(stack, body)
      const job = await settledJob(stack.sql, orderId, CREATE)
      expect(job).toMatchObject({ status: 'completed', attempt: 1, snoozes: 0, errors: [], lastError: null })

      expect(api.calls).toHaveLength(1)
      const [create] = stripeCreates(api, orderId)
      expect(create).toMatchObject({
        method: 'POST',
        path: '/v1/payment_intents',
        idempotencyKey: `order:${orderId}:payment`,
        authorization: `Bearer ${stripeSecretKey}`,
        answered: 200,
      })
      expect(create!.idempotencyKey).toBe(paymentIdempotencyKey(orderId))
      expect(create!.body).toEqual({
        amount: String(body.amount),
        currency: 'usd',
        metadata: { order_id: orderId },
        receipt_email: body.customer.email,
        automatic_payment_methods: { enabled: 'true' },
      })

      const intents = stripeIntentsOf(api, orderId)
      expect(intents).toHaveLength(1)
      const [intent] = intents
      expect(intent).toMatchObject({ amount: body.amount, currency: 'usd', status: 'requires_payment_method' })

      const fetched = await getOrder(stack, orderId)
      expect(fetched.status, fetched.text).toBe(200)
      expect(fetched.json).toMatchObject({ id: orderId, status: 'pending_payment', amount: body.amount, currency: 'USD', paymentIntentId: intent!.id })
      expect(fetched.json.payment).toEqual({
        provider: 'stripe',
        id: intent!.id,
        nextAction: { type: 'stripe_client_secret', clientSecret: intent!.client_secret },
        error: null,
        status: 'ready',
      })
      // mockpay is off: its ledger was never written.
      expect(await stack.sql`select count(*)::int as count from payment_intents`).toEqual([{ count: 0 }])
      expect(await historyOf(stack.sql, orderId)).toEqual([])
    })

    it('an IDR order asks Stripe for its amount in hundredths of a rupiah (Stripe\'s two-decimal IDR), and the succeeded event pays it', async () => {
      const body = validOrderBody()
      expect(body.currency).toBe('IDR')
      const orderId = await placeOrder(stack, body)
      await settledJob(stack.sql, orderId, CREATE)
      const [create] = stripeCreates(api, orderId)
      expect(create!.body).toMatchObject({ amount: String(body.amount * 100), currency: 'idr' })
      const [intent] = stripeIntentsOf(api, orderId)
      api.succeed(intent!.id)
      const paid = JSON.stringify(api.event(intent!.id, 'payment_intent.succeeded'))
      const delivered = await postWebhook(stack.app.url, 'stripe', paid, { 'stripe-signature': stripeSignature(testSecrets.webhookStripeSecret, paid) })
      expect(delivered.status, delivered.text).toBe(200)
      await orderWhen(stack, orderId, 'is paid', order => order.status === 'paid', 10_000)
    })

    it('429 with Retry-After: 1, then success: the job snoozes a second without spending an attempt and asks again under the same key; one intent', async () => {
      api.script.push({ match: 'create', fault: { kind: 'status', status: 429, retryAfter: '1' } })
      const orderId = await placeOrder(stack, usdOrderBody())
      const job = await settledJob(stack.sql, orderId, CREATE)
      expect(job).toMatchObject({ status: 'completed', attempt: 1, snoozes: 1, errors: [], lastError: null })

      const creates = stripeCreates(api, orderId)
      expect(creates.map(call => call.answered)).toEqual([429, 200])
      expect(creates.map(call => call.idempotencyKey)).toEqual([paymentIdempotencyKey(orderId), paymentIdempotencyKey(orderId)])
      // Retry-After was honoured (the backoff base is 100 ms here).
      expect(creates[1]!.at - creates[0]!.at).toBeGreaterThanOrEqual(950)
      const intents = stripeIntentsOf(api, orderId)
      expect(intents).toHaveLength(1)
      expect((await getOrder(stack, orderId)).json).toMatchObject({ paymentIntentId: intents[0]!.id, payment: { id: intents[0]!.id, error: null } })
    })

    it('500, then 503, then success: three calls under one key, one intent, the job completed at attempt 3 with both failures in its errors', async () => {
      api.script.push(
        { match: 'create', fault: { kind: 'status', status: 500 } },
        { match: 'create', fault: { kind: 'status', status: 503 } },
      )
      const orderId = await placeOrder(stack, usdOrderBody())
      const job = await settledJob(stack.sql, orderId, CREATE)
      expect(job).toMatchObject({ status: 'completed', attempt: 3, snoozes: 0, lastError: null })
      expect(job.errors).toEqual([
        expect.objectContaining({ attempt: 1, errorClass: 'retryable', message: expect.stringContaining('Stripe api_error (HTTP 500): ') }),
        expect.objectContaining({ attempt: 2, errorClass: 'retryable', message: expect.stringContaining('Stripe api_error (HTTP 503): ') }),
      ])

      const creates = stripeCreates(api, orderId)
      expect(creates.map(call => call.answered)).toEqual([500, 503, 200])
      expect(new Set(creates.map(call => call.idempotencyKey))).toEqual(new Set([paymentIdempotencyKey(orderId)]))
      const intents = stripeIntentsOf(api, orderId)
      expect(intents).toHaveLength(1)
      expect((await getOrder(stack, orderId)).json.paymentIntentId).toBe(intents[0]!.id)
    })

    it('a lost response: Stripe created the intent but the worker never heard; the next call under the same key is replayed, so there is one intent and the order holds it', async () => {
      // One lost response: stripe-node itself retries a closed connection once (even with
      // maxNetworkRetries 0), after its 0.5 s initial delay, with the same Idempotency-Key.
      api.script.push({ match: 'create', fault: { kind: 'drop-after' } })
      const onceId = await placeOrder(stack, usdOrderBody())
      const once = await settledJob(stack.sql, onceId, CREATE)
      expect(once).toMatchObject({ status: 'completed', attempt: 1, snoozes: 0, errors: [], lastError: null })
      const onceCreates = stripeCreates(api, onceId)
      expect(onceCreates.map(call => call.answered)).toEqual(['dropped', 200])
      expect(onceCreates.map(call => call.idempotencyKey)).toEqual([paymentIdempotencyKey(onceId), paymentIdempotencyKey(onceId)])
      expect(onceCreates[1]!.at - onceCreates[0]!.at).toBeGreaterThanOrEqual(450)
      // The first call did create it: the second was answered from the stored idempotent response.
      const onceIntents = stripeIntentsOf(api, onceId)
      expect(onceIntents).toHaveLength(1)
      const fetched = (await getOrder(stack, onceId)).json
      expect(fetched.paymentIntentId).toBe(onceIntents[0]!.id)
      expect(fetched.payment.nextAction).toEqual({ type: 'stripe_client_secret', clientSecret: onceIntents[0]!.client_secret })

      // The replay's answer lost too: the client gives up, the job runner retries (attempt 2), replayed again.
      api.script.push({ match: 'create', fault: { kind: 'drop-after' } }, { match: 'create', fault: { kind: 'drop-after' } })
      const twiceId = await placeOrder(stack, usdOrderBody())
      const twice = await settledJob(stack.sql, twiceId, CREATE)
      expect(twice).toMatchObject({ status: 'completed', attempt: 2, snoozes: 0, lastError: null })
      expect(twice.errors).toEqual([expect.objectContaining({ attempt: 1, errorClass: 'retryable', message: expect.stringContaining('Stripe StripeConnectionError') })])
      const twiceCreates = stripeCreates(api, twiceId)
      expect(twiceCreates.map(call => call.answered)).toEqual(['dropped', 'dropped', 200])
      expect(new Set(twiceCreates.map(call => call.idempotencyKey))).toEqual(new Set([paymentIdempotencyKey(twiceId)]))
      const twiceIntents = stripeIntentsOf(api, twiceId)
      expect(twiceIntents).toHaveLength(1)
      expect((await getOrder(stack, twiceId)).json.paymentIntentId).toBe(twiceIntents[0]!.id)
    })

    it('SIGKILL between Stripe\'s answer and the commit: another worker rescues the job and asks again under the same key; one intent, the job completed at attempt 2', async () => {
      // Its own database and an app without a worker: the job must wait for the stall fault.
      const killStack = await startProviderStack('stripe_kill', { ...stripeEnv(api), ...fastJobsEnv, WORKER_ENABLED: 'false' })
      try {
        const orderId = await placeOrder(killStack, usdOrderBody())
        const [queued] = await jobsOf(killStack.sql, orderId, CREATE)
        expect(queued).toMatchObject({ status: 'queued', attempt: 0 })
        await killStack.sql`update jobs set faults = ${killStack.sql.json({ stallMs: 60_000 })} where id = ${queued!.id}`

        const workerEnv = { ...stripeEnv(api), JOB_POLL_INTERVAL_MS: '100', JOB_BACKOFF_BASE_MS: '100', JOB_HEARTBEAT_TIMEOUT_MS: '1000', JOB_LOCK_TTL_MS: '1000' }
        const worker = (label: string, env: Record<string, string> = {}) =>
          startWorker({ databaseUrl: killStack.databaseUrl, redisUrl, redisKeyPrefix: killStack.redisKeyPrefix, label, env: { ...workerEnv, ...env } })
        const workerA = await worker('stripe-killed-A')
        await pollUntil('Stripe answered worker A\'s create', async () => stripeCreates(api, orderId)[0]?.answered === 200, { timeoutMs: 20_000 })
        await pollUntil('worker A stalls before its commit', async () => logLines(workerA, 'job stalling (test fault): heartbeat and lock renewal paused')
          .some(line => line.jobId === queued!.id), { timeoutMs: 10_000 })
        expect((await jobsOf(killStack.sql, orderId, CREATE))[0]).toMatchObject({ status: 'running', attempt: 1, lockedBy: workerA.workerId })
        expect((await getOrder(killStack, orderId)).json).toMatchObject({ paymentIntentId: null, payment: null })

        workerA.kill('SIGKILL')
        expect(await workerA.exited).toBeNull()
        const workerB = await worker('stripe-rescuer-B', { JOB_MAINTENANCE_INTERVAL_MS: '200' })
        const job = await settledJob(killStack.sql, orderId, CREATE)
        expect(job).toMatchObject({ status: 'completed', attempt: 2, lockedBy: workerB.workerId, lastError: null })
        expect(job.errors).toEqual([expect.objectContaining({ attempt: 1, errorClass: 'rescued', worker: workerA.workerId })])

        const creates = stripeCreates(api, orderId)
        expect(creates.map(call => call.answered)).toEqual([200, 200])
        expect(creates.map(call => call.idempotencyKey)).toEqual([paymentIdempotencyKey(orderId), paymentIdempotencyKey(orderId)])
        const intents = stripeIntentsOf(api, orderId)
        expect(intents).toHaveLength(1)
        expect((await getOrder(killStack, orderId)).json).toMatchObject({
          paymentIntentId: intents[0]!.id,
          payment: { provider: 'stripe', id: intents[0]!.id, nextAction: { type: 'stripe_client_secret', clientSecret: intents[0]!.client_secret }, error: null, status: 'ready' },
        })
        await workerB.stop()
      }
      finally {
        await killStack.close()
      }
    })

    it('a refused amount (Stripe\'s amount_too_large) is final: one call, no retry, the order payment_failed with the shop\'s words, a history row naming the job', async () => {
      const amount = 1_000_000_000
      const orderId = await placeOrder(stack, usdOrderBody({ amount, items: [{ sku: 'SKU-BIG', quantity: 1, unitPrice: amount }] }))
      const job = await settledJob(stack.sql, orderId, CREATE)
      expect(job).toMatchObject({ status: 'completed', attempt: 1, snoozes: 0, errors: [], lastError: null })

      const creates = stripeCreates(api, orderId)
      expect(creates.map(call => call.answered)).toEqual([400])
      expect(stripeIntentsOf(api, orderId)).toEqual([])

      const fetched = (await getOrder(stack, orderId)).json
      expect(fetched).toMatchObject({ status: 'payment_failed', paymentIntentId: null })
      expect(fetched.payment).toEqual({ provider: 'stripe', id: null, nextAction: null, error: { code: 'amount_too_large', message: REFUSED_DETAILS_MESSAGE }, status: 'refused' })
      // Stripe's own words are kept for the shop, not shown to the shopper.
      const [stored] = await stack.sql<Array<{ paymentError: Record<string, string> }>>`select payment_error as "paymentError" from orders where id = ${orderId}`
      expect(stored!.paymentError.providerMessage).toMatch(/^Amount must be no more than 999,999,999/)
      expect(await historyOf(stack.sql, orderId)).toEqual([{
        fromStatus: 'pending_payment', requestedStatus: 'payment_failed', toStatus: 'payment_failed', outcome: 'applied', reason: null, webhookEventId: null, jobId: job.id,
      }])
      expect(await effectsOf(stack.sql, orderId)).toEqual({ emails: [], invoices: 0, markers: [] })
    })

    it('reconciliation finds the payment whose webhook never came, once across runs and instances; the late real webhook is then same_status; the evidence says so', async () => {
      const body = usdOrderBody()
      const orderId = await placeOrder(stack, body)
      await settledJob(stack.sql, orderId, CREATE)
      const [intent] = stripeIntentsOf(api, orderId)
      // Two more instances with PAYMENT_RECONCILE_AFTER_SECONDS=0 (the main one keeps the 15 min default).
      const [reconcilerA, reconcilerB] = await Promise.all([stack.startInstance('stripe-reconciler-a', AFTER_ZERO), stack.startInstance('stripe-reconciler-b', AFTER_ZERO)])
      await clearOfScheduledReconcile(8)

      api.succeed(intent!.id)
      const succeeded = (paymentId: string) => api.intents.get(paymentId)?.status === 'succeeded'
      const expected = await expectedReconcile(stack, 'stripe', succeeded)
      expect(expected.recorded).toBe(1)
      const first = await runReconcile(reconcilerA!.url)
      expect(first).toEqual({ result: { skipped: false, counts: expected } })
      // Again at once, from both instances together: nothing more is recorded, whether the order is paid yet or not.
      const again = await Promise.all([runReconcile(reconcilerA!.url), runReconcile(reconcilerB!.url)])
      for (const answer of again) {
        const counts = ranCounts(answer)
        if (counts) expect(counts).toMatchObject({ recorded: 0, failed: 0, missing: 0 })
      }
      await orderWhen(stack, orderId, 'is paid', order => order.status === 'paid')
      await allJobsSettled(stack.sql, orderId)
      const third = await runReconcile(reconcilerB!.url)
      // The paid order is no longer asked about.
      expect(third).toEqual({ result: { skipped: false, counts: { ...expected, checked: expected.checked - 1, recorded: 0 } } })

      const reconcileEventId = `reconcile:${intent!.id}:succeeded`
      expect(await webhookEventsOf(stack.sql, orderId)).toEqual([{
        id: expect.any(String), provider: 'stripe', eventId: reconcileEventId, type: 'payment.succeeded', paymentId: intent!.id,
        amount: body.amount, currency: 'USD', status: 'applied', source: 'reconciliation', confirmation: null,
      }])
      expect(await effectsOf(stack.sql, orderId)).toEqual({ emails: [`Order ${orderId} confirmed`], invoices: 1, markers: ['confirmation_email', 'invoice'] })
      const retrieves = api.calls.filter(call => call.method === 'GET' && call.path === `/v1/payment_intents/${intent!.id}`)
      expect(retrieves.length).toBeGreaterThanOrEqual(1)

      // The real webhook arrives after all: stored, applied as same_status, no second email.
      const event = api.event(intent!.id, 'payment_intent.succeeded')
      const raw = JSON.stringify(event)
      const delivered = await postWebhook(stack.app.url, 'stripe', raw, { 'stripe-signature': stripeSignature(testSecrets.webhookStripeSecret, raw) })
      expect(delivered.status, delivered.text).toBe(200)
      expect(delivered.json).toEqual({ received: true, eventId: event.id, idempotency: { key: event.id, replayed: false } })
      await pollUntil('the webhook event is processed', async () => (await webhookEventsOf(stack.sql, orderId)).every(row => row.status !== 'received'))
      await allJobsSettled(stack.sql, orderId)
      const events = await webhookEventsOf(stack.sql, orderId)
      expect(events.map(row => [row.source, row.eventId, row.status])).toEqual([
        ['reconciliation', reconcileEventId, 'applied'],
        ['webhook', event.id, 'ignored'],
      ])
      expect(await historyOf(stack.sql, orderId)).toEqual([
        expect.objectContaining({ fromStatus: 'pending_payment', requestedStatus: 'paid', toStatus: 'paid', outcome: 'applied', reason: null, webhookEventId: events[0]!.id }),
        expect.objectContaining({ fromStatus: 'paid', requestedStatus: 'paid', toStatus: 'paid', outcome: 'ignored', reason: 'same_status', webhookEventId: events[1]!.id }),
      ])
      expect(await effectsOf(stack.sql, orderId)).toEqual({ emails: [`Order ${orderId} confirmed`], invoices: 1, markers: ['confirmation_email', 'invoice'] })

      const evidence = await ops(stack.app.url, `/api/ops/evidence?${new URLSearchParams({ orderId })}`)
      expect(evidence.status, evidence.text).toBe(200)
      const reconciled = (evidence.json.timeline as Array<{ kind: string, summary: string }>)
        .filter(entry => entry.summary.startsWith('No webhook came: reconciliation asked stripe\'s API'))
      expect(reconciled).toEqual([expect.objectContaining({
        kind: 'webhook_event',
        summary: `No webhook came: reconciliation asked stripe's API for payment ${intent!.id} and found payment.succeeded (USD 4,200); `
          + `stored for order ${orderId} as event ${reconcileEventId}, applied through webhook.apply like a webhook; applied.`,
      })])
      await Promise.all([reconcilerA!.stop(), reconcilerB!.stop()])
    })
  })

  describe('Midtrans (PAYMENT_PROVIDER=midtrans)', () => {
    let api: MidtransApi
    let stack: ProviderStack
    withStandInStack({
      start: () => startMidtransApi({ serverKey: testSecrets.midtransServerKey }),
      stack: api => startProviderStack('midtrans', { ...midtransEnv(api), ...fastJobsEnv }),
      use: (started, startedStack) => {
        api = started
        stack = startedStack
      },
    })

    /** An IDR bank-transfer order whose virtual account is stored. */
    async function orderWithVirtualAccount(): Promise<string> {
      const orderId = await placeOrder(stack, validOrderBody())
      expect(await settledJob(stack.sql, orderId, CREATE)).toMatchObject({ status: 'completed' })
      expect((await getOrder(stack, orderId)).json.payment.nextAction.type).toBe('midtrans_bank_transfer')
      return orderId
    }

    const notify = (notification: Record<string, unknown>) => postWebhook(stack.app.url, 'midtrans', JSON.stringify(notification))

    /** Posts the notification; once its webhook.apply and the effects it enqueued ran, the order's stored events. */
    async function deliverNotification(orderId: string, notification: Record<string, unknown>) {
      const delivered = await notify(notification)
      expect(delivered.status, delivered.text).toBe(200)
      expect(delivered.json).toMatchObject({ received: true })
      await pollUntil('the notification is processed', async () => (await webhookEventsOf(stack.sql, orderId)).every(row => row.status !== 'received'))
      await allJobsSettled(stack.sql, orderId)
      return webhookEventsOf(stack.sql, orderId)
    }

    it('one charge per order: order_id, gross_amount and bank_transfer (bca); the order shows the stand-in\'s virtual account', async () => {
      const body = validOrderBody()
      const orderId = await placeOrder(stack, body)
      const job = await settledJob(stack.sql, orderId, CREATE)
      expect(job).toMatchObject({ status: 'completed', attempt: 1, snoozes: 0, errors: [] })

      expect(midtransCallsOf(api, orderId)).toEqual([{ call: 'charge', answered: 200 }])
      expect(api.calls).toHaveLength(1)
      const [charge] = api.calls
      expect(charge!.authorization).toBe(`Basic ${Buffer.from(`${testSecrets.midtransServerKey}:`).toString('base64')}`)
      expect(charge!.body).toEqual({
        payment_type: 'bank_transfer',
        bank_transfer: { bank: 'bca' },
        transaction_details: { order_id: orderId, gross_amount: body.amount },
        customer_details: { email: body.customer.email },
      })
      const transaction = api.transactions.get(orderId)!
      expect(transaction).toMatchObject({ transaction_status: 'pending', gross_amount: body.amount, bank: 'bca' })
      expect(transaction.va_number).toMatch(/^\d{11}$/)

      const fetched = (await getOrder(stack, orderId)).json
      expect(fetched).toMatchObject({ status: 'pending_payment', paymentIntentId: orderId })
      expect(fetched.payment).toEqual({
        provider: 'midtrans',
        id: orderId,
        nextAction: { type: 'midtrans_bank_transfer', bank: 'bca', vaNumber: transaction.va_number, expiresAt: transaction.expiry_time },
        error: null,
        status: 'ready',
      })
    })

    it('a lost charge response: the retry is refused as a used order_id (406) and reads the transaction back with the status API; one transaction, its virtual account stored', async () => {
      api.script.push({ match: 'create', fault: { kind: 'drop-after' } })
      const orderId = await placeOrder(stack, validOrderBody())
      const job = await settledJob(stack.sql, orderId, CREATE)
      expect(job).toMatchObject({ status: 'completed', attempt: 2, lastError: null })
      expect(job.errors).toEqual([expect.objectContaining({ attempt: 1, errorClass: 'retryable', message: expect.stringContaining('Midtrans unreachable: ') })])

      expect(midtransCallsOf(api, orderId)).toEqual([
        { call: 'charge', answered: 'dropped' },
        { call: 'charge', answered: 406 },
        { call: 'status', answered: 200 },
      ])
      expect([...api.transactions.values()].filter(transaction => transaction.order_id === orderId)).toHaveLength(1)
      const transaction = api.transactions.get(orderId)!
      expect((await getOrder(stack, orderId)).json.payment).toEqual({
        provider: 'midtrans',
        id: orderId,
        nextAction: { type: 'midtrans_bank_transfer', bank: 'bca', vaNumber: transaction.va_number, expiresAt: transaction.expiry_time },
        error: null,
        status: 'ready',
      })
    })

    it('a genuine settlement notification is applied after one status read confirms it; the refund notification after a full refund refunds the order', async () => {
      const orderId = await orderWithVirtualAccount()
      api.settle(orderId)
      const paidEvents = await deliverNotification(orderId, api.notification(orderId))
      expect((await getOrder(stack, orderId)).json.status).toBe('paid')
      expect(midtransCallsOf(api, orderId)).toEqual([{ call: 'charge', answered: 200 }, { call: 'status', answered: 200 }])
      expect(paidEvents).toEqual([expect.objectContaining({
        eventId: `${orderId}:200:150000.00:settlement`, type: 'payment.succeeded', status: 'applied', source: 'webhook',
        confirmation: { found: true, providerStatus: 'settlement', type: 'payment.succeeded', amount: 150_000, currency: 'IDR', checkedAt: expect.any(String) },
      })])
      expect(await effectsOf(stack.sql, orderId)).toEqual({ emails: [`Order ${orderId} confirmed`], invoices: 1, markers: ['confirmation_email', 'invoice'] })

      api.refund(orderId)
      const events = await deliverNotification(orderId, api.notification(orderId))
      expect((await getOrder(stack, orderId)).json.status).toBe('refunded')
      expect(midtransCallsOf(api, orderId)).toEqual([{ call: 'charge', answered: 200 }, { call: 'status', answered: 200 }, { call: 'status', answered: 200 }])
      expect(events[1]).toMatchObject({
        eventId: `${orderId}:200:150000.00:refund:150000`, type: 'payment.updated', status: 'applied',
        confirmation: { found: true, providerStatus: 'refund', type: 'payment.refunded', amount: 150_000, currency: 'IDR' },
      })
      expect(await historyOf(stack.sql, orderId)).toEqual([
        expect.objectContaining({ fromStatus: 'pending_payment', requestedStatus: 'paid', toStatus: 'paid', outcome: 'applied', webhookEventId: events[0]!.id }),
        expect.objectContaining({ fromStatus: 'paid', requestedStatus: 'refunded', toStatus: 'refunded', outcome: 'applied', webhookEventId: events[1]!.id }),
      ])
      const [refund] = await stack.sql<Array<{ id: string }>>`select id from refunds where order_id = ${orderId} and source = 'provider'`
      expect(await effectsOf(stack.sql, orderId)).toEqual({
        emails: [`Order ${orderId} confirmed`, `Order ${orderId} refunded`], invoices: 1, markers: ['confirmation_email', 'invoice', `refund_notice:${refund!.id}`],
      })
    })

    it('a signed settlement notification the status API never confirms (still pending) moves nothing: asked three times with backoff, then history unconfirmed with what it asked for, the API\'s answer kept on the event', async () => {
      const orderId = await orderWithVirtualAccount()
      // Signed over order_id, status_code 200 and gross_amount, as Midtrans signs; the transaction is still pending.
      const events = await deliverNotification(orderId, api.notification(orderId, { status_code: '200', transaction_status: 'settlement' }))
      expect(events).toEqual([expect.objectContaining({
        eventId: `${orderId}:200:150000.00:settlement`, type: 'payment.succeeded', status: 'ignored', source: 'webhook',
        confirmation: { found: true, providerStatus: 'pending', type: 'payment.updated', amount: 150_000, currency: 'IDR', checkedAt: expect.any(String) },
      })])
      expect(midtransCallsOf(api, orderId)).toEqual([{ call: 'charge', answered: 200 }, { call: 'status', answered: 200 }, { call: 'status', answered: 200 }, { call: 'status', answered: 200 }])
      const [apply] = (await stack.sql<Array<{ attempt: number, errors: Array<{ attempt: number, errorClass: string, message: string }> }>>`
        select attempt, errors from jobs where kind = 'webhook.apply' and resource_id = ${`order:${orderId}`}`)
      expect(apply!.attempt).toBe(3)
      expect(apply!.errors.map(({ attempt, errorClass, message }) => ({ attempt, errorClass, message }))).toEqual([1, 2].map(attempt => ({
        attempt, errorClass: 'retryable', message: `RetryableJobError: midtrans's status API does not confirm payment.succeeded for order ${orderId} yet (it says pending)`,
      })))
      expect((await getOrder(stack, orderId)).json.status).toBe('pending_payment')
      expect(await historyOf(stack.sql, orderId)).toEqual([expect.objectContaining({
        fromStatus: 'pending_payment', requestedStatus: 'paid', toStatus: 'pending_payment', outcome: 'ignored', reason: 'unconfirmed', webhookEventId: events[0]!.id,
      })])
      expect(await effectsOf(stack.sql, orderId)).toEqual({ emails: [], invoices: 0, markers: [] })
    })

    it('refuses a forged signature_key with 401 and a signed pending notification relabelled settlement with 400 payload-invalid: nothing stored, the status API never asked', async () => {
      const orderId = await orderWithVirtualAccount()
      const before = await webhookRowCounts(stack.sql)
      const pending = api.notification(orderId)
      expect(pending).toMatchObject({ status_code: '201', transaction_status: 'pending' })

      expectProblem(await notify({ ...pending, signature_key: 'ab'.repeat(64) }), 'webhook-signature-invalid')
      // status_code and the signature stay as Midtrans sent them; only the unsigned status is rewritten.
      const relabelled = await notify({ ...pending, transaction_status: 'settlement' })
      expectProblem(relabelled, 'payload-invalid')
      expect(relabelled.json.detail).toContain('transaction_status "settlement" does not go with status_code "201" (settlement needs 200)')

      expect(await webhookRowCounts(stack.sql)).toEqual(before)
      expect(midtransCallsOf(api, orderId)).toEqual([{ call: 'charge', answered: 200 }])
      expect((await getOrder(stack, orderId)).json.status).toBe('pending_payment')
    })

    it('a settlement notification that arrives before the status API shows it is asked about again, and applied once the API confirms it', async () => {
      const orderId = await orderWithVirtualAccount()
      // Midtrans notified before its status API showed the settlement.
      const early = await notify(api.notification(orderId, { status_code: '200', transaction_status: 'settlement' }))
      expect(early.status, early.text).toBe(200)
      // The first read said pending; the retry (after ~100 ms of backoff) finds the settlement.
      await pollUntil('the status API was asked once', async () => midtransCallsOf(api, orderId).some(call => call.call === 'status' && call.answered === 200), { intervalMs: 5 })
      api.settle(orderId)
      await orderWhen(stack, orderId, 'is paid', order => order.status === 'paid', 5_000)
      await allJobsSettled(stack.sql, orderId)
      expect(midtransCallsOf(api, orderId)).toEqual([{ call: 'charge', answered: 200 }, { call: 'status', answered: 200 }, { call: 'status', answered: 200 }])
      const events = await webhookEventsOf(stack.sql, orderId)
      expect(events).toEqual([expect.objectContaining({ status: 'applied', confirmation: expect.objectContaining({ providerStatus: 'settlement' }) })])
      expect(await historyOf(stack.sql, orderId)).toEqual([expect.objectContaining({ fromStatus: 'pending_payment', requestedStatus: 'paid', toStatus: 'paid', outcome: 'applied' })])
      expect(await effectsOf(stack.sql, orderId)).toEqual({ emails: [`Order ${orderId} confirmed`], invoices: 1, markers: ['confirmation_email', 'invoice'] })
    })

    it('a bank denial on the charge is final: payment_failed with code deny; a card order is refused without calling Midtrans', async () => {
      api.script.push({ match: 'create', fault: { kind: 'deny' } })
      const deniedId = await placeOrder(stack, validOrderBody())
      const denied = await settledJob(stack.sql, deniedId, CREATE)
      expect(denied).toMatchObject({ status: 'completed', attempt: 1, errors: [] })
      expect(midtransCallsOf(api, deniedId)).toEqual([{ call: 'charge', answered: 200 }])
      expect(api.transactions.get(deniedId)?.transaction_status).toBe('deny')
      const deniedOrder = (await getOrder(stack, deniedId)).json
      expect(deniedOrder).toMatchObject({ status: 'payment_failed', paymentIntentId: null, payment: { provider: 'midtrans', id: null, nextAction: null } })
      expect(deniedOrder.payment.error).toEqual({ code: 'deny', message: expect.stringMatching(/^The payment was declined\./) })
      expect(await historyOf(stack.sql, deniedId)).toEqual([expect.objectContaining({ fromStatus: 'pending_payment', toStatus: 'payment_failed', outcome: 'applied', jobId: denied.id })])

      const cardId = await placeOrder(stack, validOrderBody({ paymentMethod: 'card' }))
      const card = await settledJob(stack.sql, cardId, CREATE)
      expect(card).toMatchObject({ status: 'completed', attempt: 1, errors: [] })
      expect(midtransCallsOf(api, cardId)).toEqual([])
      expect(api.transactions.has(cardId)).toBe(false)
      const cardOrder = (await getOrder(stack, cardId)).json
      expect(cardOrder).toMatchObject({ status: 'payment_failed', paymentIntentId: null })
      expect(cardOrder.payment).toEqual({ provider: 'midtrans', id: null, nextAction: null, error: { code: 'payment_method_unsupported', message: expect.stringMatching(/^Card payments are not available/) }, status: 'refused' })
      expect(await historyOf(stack.sql, cardId)).toEqual([expect.objectContaining({ fromStatus: 'pending_payment', toStatus: 'payment_failed', outcome: 'applied', jobId: card.id })])
    })

    it('reconciliation finds a settled transaction without a notification: paid once, event reconcile:<order>:settlement', async () => {
      const orderId = await orderWithVirtualAccount()
      const reconciler = await stack.startInstance('midtrans-reconciler', AFTER_ZERO)
      await clearOfScheduledReconcile(8)
      api.settle(orderId)
      // Settled at Midtrans but pending here: this order, and any an earlier test left so.
      const expected = await expectedReconcile(stack, 'midtrans', paymentId => api.transactions.get(paymentId)?.transaction_status === 'settlement')
      expect(expected.recorded).toBeGreaterThanOrEqual(1)
      const first = await runReconcile(reconciler.url)
      expect(ranCounts(first)).toEqual(expected)
      await orderWhen(stack, orderId, 'is paid', order => order.status === 'paid')
      await allJobsSettled(stack.sql, orderId)
      expect(ranCounts(await runReconcile(reconciler.url))).toMatchObject({ checked: expected.checked - expected.recorded, recorded: 0, alreadyRecorded: 0 })

      expect(await webhookEventsOf(stack.sql, orderId)).toEqual([{
        id: expect.any(String), provider: 'midtrans', eventId: `reconcile:${orderId}:settlement`, type: 'payment.succeeded', paymentId: orderId,
        amount: 150_000, currency: 'IDR', status: 'applied', source: 'reconciliation', confirmation: null,
      }])
      expect(await effectsOf(stack.sql, orderId)).toEqual({ emails: [`Order ${orderId} confirmed`], invoices: 1, markers: ['confirmation_email', 'invoice'] })
      // Asked once by the first run; a reconciled event is the API's answer already and is not confirmed again.
      expect(midtransCallsOf(api, orderId)).toEqual([{ call: 'charge', answered: 200 }, { call: 'status', answered: 200 }])
      await reconciler.stop()
    })
  })
})

describe('Stripe on the embedded default: PGlite and in-process locks', () => {
  let api: StripeApi
  let app: AppProcess
  let pgliteDir: string

  beforeAll(async () => {
    api = await startStripeApi({ secretKey: stripeSecretKey })
    pgliteDir = await mkdtemp(join(tmpdir(), 'ic-stripe-embedded-'))
    app = await startApp({ redisUrl: null, label: 'stripe-embedded', env: { ...stripeEnv(api), ...fastJobsEnv, PGLITE_DIR: pgliteDir } })
  })

  afterAll(async () => {
    await app?.stop()
    await api?.close()
    if (pgliteDir) await rm(pgliteDir, { recursive: true, force: true })
  })

  it('an order gets one PaymentIntent under order:<id>:payment, stored on the order', async () => {
    const ready = await request(app.url, '/api/ready')
    expect(ready.json.checks).toMatchObject({ database: { driver: 'pglite', ok: true }, locks: { backend: 'memory', ok: true } })
    const tenant = await createTenant(app.url, 'stripe embedded')
    const stack = { app, tenant }
    const body = usdOrderBody()
    const orderId = await placeOrder(stack, body)
    const fetched = await orderWhen(stack, orderId, 'has its PaymentIntent', order => order.paymentIntentId !== null)

    expect(api.calls).toHaveLength(1)
    const [create] = stripeCreates(api, orderId)
    expect(create).toMatchObject({ idempotencyKey: paymentIdempotencyKey(orderId), answered: 200, body: { amount: String(body.amount), currency: 'usd', metadata: { order_id: orderId } } })
    const intents = stripeIntentsOf(api, orderId)
    expect(intents).toHaveLength(1)
    expect(fetched.payment).toEqual({ provider: 'stripe', id: intents[0]!.id, nextAction: { type: 'stripe_client_secret', clientSecret: intents[0]!.client_secret }, error: null, status: 'ready' })

    const jobs = await ops(app.url, `/api/ops/jobs?${new URLSearchParams({ resourceId: `order:${orderId}`, kind: CREATE })}`)
    expect(jobs.status, jobs.text).toBe(200)
    expect(jobs.json.data).toEqual([expect.objectContaining({ kind: CREATE, status: 'completed', attempt: 1, snoozes: 0, errors: [] })])
  })
})
