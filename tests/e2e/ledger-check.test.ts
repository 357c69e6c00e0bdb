import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import type postgres from 'postgres'
import { afterAll, describe, expect, it } from 'vitest'
import { fastJobsEnv, stopAll } from '../support/app'
import type { MidtransApi } from '../support/midtrans-api'
import { opsRequest } from '../support/ops'
import { validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import {
  clearOfScheduledReconcile, effectsOf, getOrder, orderWhen, paidStripeOrder, placeOrder, postCancel, postMidtransNotification, postRefund,
  postStripeEvent, type ProviderStack, runReconcile, settledJob, settledRefundJob, stripeIntentsOf, withMidtransStack, withStripeStack,
} from '../support/providers'
import { describeWithServices, redisUrl } from '../support/services'
import type { StripeApi } from '../support/stripe-api'
import { orderResource, resourceLockKey } from '../../shared/resources'

// The ledger check (payments:ledger-check, server/ledger) against the Stripe and Midtrans stand-ins:
// differences planted at the stand-in behind the app's back (no webhook delivered) are healed or
// recorded as discrepancies, with the exact rows, the metric, and nothing changed by a second run.

const CREATE = 'payment.create_intent'
/** validOrderBody's amount: IDR 150,000 (Stripe counts IDR in hundredths). */
const ORDER_AMOUNT = 150_000
/** The check compares at once (no settle window); the stand-ins deliver no webhooks. */
const CHECK_AT_ONCE = { LEDGER_CHECK_SETTLE_SECONDS: '0', PAYMENT_RECONCILE_AFTER_SECONDS: '0' }

const newKey = () => `ledger-${randomUUID()}`

/** POST /api/ops/tasks/payments:ledger-check until this call ran it (a scheduled run may hold the task lock): its counts. */
async function runLedgerCheck(baseUrl: string): Promise<Record<string, number>> {
  for (let tries = 0; tries < 40; tries++) {
    const response = await opsRequest(baseUrl, '/api/ops/tasks/payments:ledger-check', { method: 'POST', timeoutMs: 60_000 })
    expect(response.status, response.text).toBe(200)
    if (!response.json.result.skipped) return response.json.result.counts
    await sleep(250)
  }
  throw new Error('the ledger check stayed locked by another run')
}

/**
 * Every app instance runs payments:ledger-check at second 30 of every fifth minute (nuxt.config.ts).
 * A test that counts what a run did waits until at least `needSeconds` are left before the next
 * scheduled run, and before reconciliation's (every minute), so neither takes its work first.
 */
async function clearOfScheduledTasks(needSeconds: number): Promise<void> {
  await clearOfScheduledReconcile(needSeconds)
  const period = 5 * 60_000
  const untilCheck = (period + 30_000 - (Date.now() % period)) % period
  if (untilCheck < needSeconds * 1000) await sleep(untilCheck + 1_500)
  await clearOfScheduledReconcile(needSeconds)
}

/** The value of ledger_discrepancies_open{kind} on /api/metrics. */
async function openGauge(baseUrl: string): Promise<Record<string, number>> {
  const response = await opsRequest(baseUrl, '/api/metrics')
  expect(response.status, response.text).toBe(200)
  return Object.fromEntries([...response.text.matchAll(/^ledger_discrepancies_open\{kind="(\w+)"\} (\d+)$/gm)].map(([, kind, value]) => [kind!, Number(value)]))
}

const noneOpen = {
  wrong_amount_captured: 0, payment_not_recorded: 0, payment_not_at_provider: 0, canceled_refund_failed: 0,
  refund_not_at_provider: 0, refund_succeeded_at_provider: 0, refund_amount_mismatch: 0,
}

interface RefundRow { id: string, amount: number, status: string, source: string, providerRefundId: string | null, failure: string | null }

function refundsOf(sql: postgres.Sql, orderId: string): Promise<RefundRow[]> {
  return sql<RefundRow[]>`select id, amount::int as amount, status, source, provider_refund_id as "providerRefundId", failure
    from refunds where order_id = ${orderId} order by created_at, id`
}

function discrepanciesOf(sql: postgres.Sql): Promise<Array<Record<string, unknown>>> {
  return sql`select id, kind, order_id as "orderId", status, summary, ours, theirs, resolution, resolved_by as "resolvedBy", created_at as "createdAt"
    from ledger_discrepancies order by created_at, id`
}

/** Everything the check may write, but the times a run refreshes: what a second run must leave as it is. */
async function ledgerState(sql: postgres.Sql) {
  return {
    refunds: await sql`select * from refunds order by id`,
    orders: await sql`select id, status, updated_at from orders order by id`,
    discrepancies: await discrepanciesOf(sql),
    history: await sql`select count(*)::int as count from order_status_history`,
    jobs: await sql`select id, kind, status from jobs where kind <> 'webhook.apply' order by id`,
  }
}

describeWithServices('the ledger check against the Stripe and Midtrans stand-ins', ['postgres', 'redis'], () => {
  afterAll(async () => {
    await stopAll()
  })

  describe('Stripe', () => {
    let api: StripeApi
    let stack: ProviderStack
    withStripeStack('ledger_stripe', { ...fastJobsEnv, ...CHECK_AT_ONCE }, (started, startedStack) => {
      api = started
      stack = startedStack
    }, api => api.pendRefunds(0))

    /** An IDR order paid at the stand-in, its payment_intent.succeeded applied. */
    const paidOrder = () => paidStripeOrder(api, stack)

    it('dashboard refunds never delivered are recorded (paged past 100), a refund Stripe failed after we recorded it succeeded is failed with its notice withheld, a wrong amount is a discrepancy; a second run changes nothing', async () => {
      await clearOfScheduledTasks(25)
      // 1. 101 refunds made in Stripe's dashboard, none delivered: more than one page of GET /v1/refunds.
      const dashboard = await paidOrder()
      for (let refund = 0; refund < 101; refund++) api.dashboardRefund(dashboard.intentId, 1_000 * 100)

      // 2. A refund of ours, pending at Stripe, then succeeded there and recorded by reconciliation
      // while the order's worker lock is held (its notice waits), then failed at Stripe: a refund can
      // fail after it was reported succeeded (https://docs.stripe.com/refunds#failed-refunds).
      const failing = await paidOrder()
      api.pendRefunds(1)
      const created = await postRefund(stack, failing.orderId, newKey(), { amount: 40_000 })
      expect(created.status, created.text).toBe(201)
      const refundId = created.json.id as string
      expect(await settledRefundJob(stack.sql, refundId)).toMatchObject({ status: 'completed' })
      const [atStripe] = [...api.refunds.values()].filter(refund => refund.metadata.refund_id === refundId)
      const redis = new Redis(redisUrl, { keyPrefix: stack.redisKeyPrefix, lazyConnect: true })
      await redis.connect()
      const lockKey = resourceLockKey(orderResource(failing.orderId))
      expect(await redis.set(lockKey, 'held-by-the-test', 'PX', 120_000, 'NX')).toBe('OK')
      try {
        api.settleRefund(atStripe!.id, 'succeeded')
        await runReconcile(stack.app.url)
        expect((await getOrder(stack, failing.orderId)).json).toMatchObject({ status: 'partially_refunded', amountRefunded: 40_000 })
        // Claimed and put back while the lock is busy: queued, or running for a moment, never done.
        const [notice] = await stack.sql<Array<{ status: string }>>`select status from jobs where kind = 'order.send_refund_notice' and dedupe_key = ${refundId}`
        expect(['queued', 'running']).toContain(notice!.status)
        api.settleRefund(atStripe!.id, 'failed')

        // 3. A payment of another amount: the intent's amount changed at Stripe before the shopper paid.
        const wrongOrderId = await placeOrder(stack, validOrderBody())
        expect(await settledJob(stack.sql, wrongOrderId, CREATE)).toMatchObject({ status: 'completed' })
        const [wrongIntent] = stripeIntentsOf(api, wrongOrderId)
        wrongIntent!.amount = 120_000 * 100
        api.succeed(wrongIntent!.id)
        expect((await postStripeEvent(stack.app.url, api.event(wrongIntent!.id, 'payment_intent.succeeded'))).status).toBe(200)
        await pollUntil('the wrong-amount payment is ignored', async () =>
          (await stack.sql`select 1 from order_status_history where order_id = ${wrongOrderId} and reason = 'amount_mismatch'`).length === 1)

        const first = await runLedgerCheck(stack.app.url)
        expect(first).toEqual({ checked: 3, agreed: 2, refundsRecorded: 101, refundsFailed: 1, noticesWithheld: 1, discrepanciesOpened: 1, discrepanciesResolved: 0, notCompared: 0 })

        const recorded = await refundsOf(stack.sql, dashboard.orderId)
        expect(recorded).toHaveLength(101)
        expect(new Set(recorded.map(refund => refund.providerRefundId)).size).toBe(101)
        expect(recorded.every(refund => refund.amount === 1_000 && refund.status === 'succeeded' && refund.source === 'provider' && refund.failure === null)).toBe(true)
        expect(recorded.map(refund => refund.providerRefundId).sort()).toEqual([...api.refunds.values()].filter(refund => refund.payment_intent === dashboard.intentId).map(refund => refund.id).sort())
        expect((await getOrder(stack, dashboard.orderId)).json).toMatchObject({ status: 'partially_refunded', amountRefunded: 101_000 })

        expect(await refundsOf(stack.sql, failing.orderId)).toEqual([
          { id: refundId, amount: 40_000, status: 'failed', source: 'api', providerRefundId: atStripe!.id, failure: 'the provider failed it after it was recorded succeeded (found by the ledger check)' },
        ])
        expect((await getOrder(stack, failing.orderId)).json).toMatchObject({ status: 'paid', amountRefunded: 0 })
        const [withheld] = await stack.sql`select status, dismissed_reason as "dismissedReason" from jobs where kind = 'order.send_refund_notice' and dedupe_key = ${refundId}`
        expect(withheld).toEqual({ status: 'dismissed', dismissedReason: 'the refund failed at the provider (found by the ledger check): no notice is sent for it' })

        // What was healed stays visible beside what was not: ours as it was before, the provider's, what the check did.
        const discrepancies = await discrepanciesOf(stack.sql)
        expect(discrepancies).toEqual([{
          id: expect.stringMatching(/^ldg_/), kind: 'refund_succeeded_at_provider', orderId: dashboard.orderId, status: 'healed',
          summary: expect.stringMatching(/^The provider made 101 refunds (re_\w+, ){4}re_\w+ and 96 more \(IDR 101,000\), not recorded here\.$/),
          ours: { status: 'paid', currency: 'IDR', captured: 150_000, refunded: 0, refunds: [] },
          theirs: expect.objectContaining({ status: 'succeeded', captured: 150_000, refunded: 101_000 }),
          resolution: 'Recorded here as refunds of source provider, each noticed as a webhook\'s would be.', resolvedBy: null, createdAt: expect.any(Date),
        }, {
          id: expect.stringMatching(/^ldg_/), kind: 'refund_not_at_provider', orderId: failing.orderId, status: 'healed',
          summary: `${refundId} (${atStripe!.id}) succeeded here; the provider failed it.`,
          ours: expect.objectContaining({ status: 'partially_refunded', refunded: 40_000 }),
          theirs: expect.objectContaining({ status: 'succeeded', refunded: 0 }),
          resolution: 'Failed here, the amount free again; notices withheld: 1 of 1 (a notice already sent cannot be).', resolvedBy: null, createdAt: expect.any(Date),
        }, {
          id: expect.stringMatching(/^ldg_/), kind: 'wrong_amount_captured', orderId: wrongOrderId, status: 'open',
          summary: 'The provider received IDR 120,000 for an order of IDR 150,000 (pending_payment); nothing gave it back.',
          ours: { status: 'pending_payment', currency: 'IDR', captured: 0, refunded: 0, refunds: [] },
          theirs: { status: 'succeeded', currency: 'IDR', captured: 120_000, refunded: 0, refunds: [] },
          resolution: null, resolvedBy: null, createdAt: expect.any(Date),
        }])
        expect(await openGauge(stack.app.url)).toEqual({ ...noneOpen, wrong_amount_captured: 1 })

        // A second run finds the ledgers as the first left them: nothing healed, nothing opened, nothing written.
        const before = await ledgerState(stack.sql)
        expect(await runLedgerCheck(stack.app.url)).toEqual({ checked: 3, agreed: 2, refundsRecorded: 0, refundsFailed: 0, noticesWithheld: 0, discrepanciesOpened: 0, discrepanciesResolved: 0, notCompared: 0 })
        expect(await ledgerState(stack.sql)).toEqual(before)
        expect(await openGauge(stack.app.url)).toEqual({ ...noneOpen, wrong_amount_captured: 1 })
      }
      finally {
        await redis.del(lockKey)
        redis.disconnect()
      }
      // The worker runs the order's jobs again: the failed refund's notice never goes out, the recorded refunds' do.
      await pollUntil('the dashboard refunds\' notices are sent', async () => (await effectsOf(stack.sql, dashboard.orderId)).emails.length === 102, { timeoutMs: 30_000 })
      expect((await effectsOf(stack.sql, dashboard.orderId)).emails.filter(subject => subject === `Part of order ${dashboard.orderId} refunded`)).toHaveLength(101)
      await sleep(500)
      expect((await effectsOf(stack.sql, failing.orderId)).emails).toEqual([`Order ${failing.orderId} confirmed`])
    })
  })

  describe('Midtrans', () => {
    let api: MidtransApi
    let stack: ProviderStack
    withMidtransStack('ledger_midtrans', { ...fastJobsEnv, ...CHECK_AT_ONCE }, (started, startedStack) => {
      api = started
      stack = startedStack
    })

    it('a refund recorded only in Midtrans\' dashboard is recorded with its notice; a canceled order paid by bank transfer, whose automatic refund Midtrans cannot make, is a discrepancy until an operator resolves it; a second run changes nothing', async () => {
      await clearOfScheduledTasks(20)
      // 1. GoPay, settled and notified; then a refund in the dashboard that no notification reports.
      const paidId = await placeOrder(stack, validOrderBody({ paymentMethod: 'ewallet' }))
      expect(await settledJob(stack.sql, paidId, CREATE)).toMatchObject({ status: 'completed' })
      api.settle(paidId)
      expect((await postMidtransNotification(stack.app.url, api.notification(paidId))).status).toBe(200)
      await orderWhen(stack, paidId, 'is paid', order => order.status === 'paid')
      api.refund(paidId, 50_000)
      const atMidtrans = api.createdRefunds().filter(made => made.orderId === paidId)
      expect(atMidtrans).toHaveLength(1)

      // 2. A bank transfer paid (no notification) while the shop cancels: the cancel finds it paid and
      // refunds it automatically, which Midtrans refuses for a bank transfer.
      const canceledId = await placeOrder(stack, validOrderBody({ paymentMethod: 'bank_transfer' }))
      expect(await settledJob(stack.sql, canceledId, CREATE)).toMatchObject({ status: 'completed' })
      api.settle(canceledId)
      expect((await postCancel(stack, canceledId, newKey())).status).toBe(200)
      const automatic = await pollUntilRefund(stack.sql, canceledId, 'failed')

      const first = await runLedgerCheck(stack.app.url)
      expect(first).toEqual({ checked: 2, agreed: 1, refundsRecorded: 1, refundsFailed: 0, noticesWithheld: 0, discrepanciesOpened: 1, discrepanciesResolved: 0, notCompared: 0 })
      expect(await refundsOf(stack.sql, paidId)).toEqual([{
        id: expect.stringMatching(/^re_/), amount: 50_000, status: 'succeeded', source: 'provider',
        providerRefundId: String(atMidtrans[0]!.refund.refund_chargeback_id), failure: null,
      }])
      expect((await getOrder(stack, paidId)).json).toMatchObject({ status: 'partially_refunded', amountRefunded: 50_000 })
      await pollUntil('the dashboard refund\'s notice is sent', async () => (await effectsOf(stack.sql, paidId)).emails.includes(`Part of order ${paidId} refunded`))

      const canceledStatus = (await getOrder(stack, canceledId)).json.status as string
      const discrepancies = await discrepanciesOf(stack.sql)
      expect(discrepancies).toEqual([{
        id: expect.stringMatching(/^ldg_/), kind: 'refund_succeeded_at_provider', orderId: paidId, status: 'healed',
        summary: `The provider made refund ${String(atMidtrans[0]!.refund.refund_chargeback_id)} (IDR 50,000), not recorded here.`,
        ours: { status: 'paid', currency: 'IDR', captured: ORDER_AMOUNT, refunded: 0, refunds: [] },
        theirs: expect.objectContaining({ status: 'partial_refund', captured: ORDER_AMOUNT, refunded: 50_000 }),
        resolution: 'Recorded here as a refund of source provider, each noticed as a webhook\'s would be.', resolvedBy: null, createdAt: expect.any(Date),
      }, {
        id: expect.stringMatching(/^ldg_/), kind: 'canceled_refund_failed', orderId: canceledId, status: 'open',
        summary: `The order was canceled and then paid; its automatic refund ${automatic.id} failed, and the provider still holds IDR 150,000.`,
        ours: {
          status: canceledStatus, currency: 'IDR', captured: ORDER_AMOUNT, refunded: 0,
          refunds: [{ refundId: automatic.id, providerRefundId: null, amount: ORDER_AMOUNT, status: 'failed', source: 'automatic' }],
        },
        theirs: { status: 'settlement', currency: 'IDR', captured: ORDER_AMOUNT, refunded: 0, refunds: [] },
        resolution: null, resolvedBy: null, createdAt: expect.any(Date),
      }])
      expect(await openGauge(stack.app.url)).toEqual({ ...noneOpen, canceled_refund_failed: 1 })

      const before = await ledgerState(stack.sql)
      expect(await runLedgerCheck(stack.app.url)).toEqual({ checked: 2, agreed: 1, refundsRecorded: 0, refundsFailed: 0, noticesWithheld: 0, discrepanciesOpened: 0, discrepanciesResolved: 0, notCompared: 0 })
      expect(await ledgerState(stack.sql)).toEqual(before)

      // An operator resolves it: audited, the gauge drops, and a later check (the ledgers unchanged) leaves it resolved.
      const id = discrepancies[1]!.id as string
      const resolve = (body: unknown) => opsRequest(stack.app.url, `/api/ops/ledger/discrepancies/${id}/resolve`, { method: 'POST', body })
      const refused = await resolve({ note: '   ', operator: 'dana' })
      expect(refused.status, refused.text).toBe(400)
      expect(refused.json.type).toBe('/problems/validation-failed')
      const resolved = await resolve({ note: 'Paid the shopper back by bank transfer by hand.', operator: 'dana' })
      expect(resolved.status, resolved.text).toBe(200)
      expect(resolved.json).toMatchObject({ id, status: 'resolved', resolution: 'Paid the shopper back by bank transfer by hand.', resolvedBy: 'dana', resolvedAt: expect.any(String) })
      const again = await resolve({ note: 'twice', operator: 'dana' })
      expect(again.status, again.text).toBe(409)
      expect(again.json).toMatchObject({ type: '/problems/discrepancy-not-open', resolvedBy: 'dana' })
      expect(await stack.sql`select action, tenant_id as "tenantId", subject_id as "subjectId", detail from operator_actions where subject_id = ${id}`).toEqual([{
        action: 'ledger_discrepancy.resolved', tenantId: stack.tenant.tenantId, subjectId: id,
        detail: { orderId: canceledId, kind: 'canceled_refund_failed', note: 'Paid the shopper back by bank transfer by hand.', operator: 'dana' },
      }])
      expect(await openGauge(stack.app.url)).toEqual(noneOpen)
      expect(await runLedgerCheck(stack.app.url)).toEqual({ checked: 2, agreed: 1, refundsRecorded: 0, refundsFailed: 0, noticesWithheld: 0, discrepanciesOpened: 0, discrepanciesResolved: 0, notCompared: 0 })
      expect((await discrepanciesOf(stack.sql)).map(row => row.status)).toEqual(['healed', 'resolved'])
      expect(await openGauge(stack.app.url)).toEqual(noneOpen)
    })
  })
})

/** The order's one refund, once it reached `status`. */
async function pollUntilRefund(sql: postgres.Sql, orderId: string, status: string): Promise<RefundRow> {
  let found: RefundRow[] = []
  await pollUntil(`the refund of ${orderId} is ${status}`, async () => (found = await refundsOf(sql, orderId)).length === 1 && found[0]!.status === status, { timeoutMs: 20_000 })
  return found[0]!
}
