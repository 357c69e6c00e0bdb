import { asc, eq } from 'drizzle-orm'
import { afterAll, beforeAll, expect, it } from 'vitest'
import type { Database } from '@idempotent-checkout/db-kit'
import { newId } from '../../server/db/ids'
import { jobs, orders, refunds, webhookEvents } from '../../server/db/schema'
import { transaction } from '@idempotent-checkout/db-kit'
import { setLogLevel } from '../../server/observability/logger'
import { applyPaymentStatus, applyRefundOutcome } from '../../server/orders/payment-state'
import { problemOf } from '../../server/problems'
import { requestRefund } from '../../server/refunds/service'
import { cancelOrder } from '../../server/orders/cancel'
import { type DatabaseDriver, openSuiteDatabase, type SuiteDatabase } from '../support/databases'
import { seedOrders } from '../support/jobs'
import { describeOnBothBackends } from '../support/lock-backends'

// The refundable balance (docs/payments-and-refunds.md#refunds-and-cancellation) on both databases
// the app runs on: refunds of one order are admitted under its row lock, so concurrent requests can
// never hold more than was paid, and a failed refund frees its amount. Cancellation of unpaid
// orders, on the same lock.

if (!process.env.LOG_LEVEL) setLogLevel('error')

const ORDER_AMOUNT = 150000
const CONCURRENT = 6

function refundsContract(driver: DatabaseDriver) {
  let database: SuiteDatabase
  let db: Database

  beforeAll(async () => {
    database = await openSuiteDatabase(driver, 'refunds', { poolSize: CONCURRENT + 2 })
    db = database.handle.db
  }, 60_000)

  afterAll(async () => {
    await database?.close()
  })

  async function paidOrder(): Promise<{ tenantId: string, orderId: string }> {
    const { tenantId, orderIds: [orderId] } = await seedOrders(db, 1)
    await transaction(db, tx => applyPaymentStatus(tx, orderId!, 'paid', { requestId: 'req_paid' }))
    return { tenantId, orderId: orderId! }
  }

  let keys = 0
  const refund = (tenantId: string, orderId: string, amount?: number) => transaction(db, tx =>
    requestRefund(tx, { tenantId, orderId, source: 'api', idempotencyKey: `key-${++keys}`, requestId: `req_${keys}` }, { amount }))

  /** The problem a refused request threw, by slug and extensions. */
  const refusal = (error: unknown) => {
    const body = problemOf(error)?.body
    return body && { type: body.type, remaining: body.remaining, orderStatus: body.orderStatus }
  }

  const refundRows = (orderId: string) => db.select({ amount: refunds.amount, status: refunds.status, source: refunds.source })
    .from(refunds).where(eq(refunds.orderId, orderId)).orderBy(asc(refunds.createdAt), asc(refunds.id))

  it(`${CONCURRENT} concurrent requests of 40 % each: exactly two are admitted, the others refused with what remains`, async () => {
    const { tenantId, orderId } = await paidOrder()
    const results = await Promise.allSettled(Array.from({ length: CONCURRENT }, () => refund(tenantId, orderId, ORDER_AMOUNT * 0.4)))
    const admitted = results.filter(result => result.status === 'fulfilled')
    expect(admitted).toHaveLength(2)
    expect(results.filter(result => result.status === 'rejected').map(result => refusal(result.reason)))
      .toEqual(Array.from({ length: CONCURRENT - 2 }, () => ({ type: '/problems/refund-exceeds-remaining', remaining: ORDER_AMOUNT * 0.2, orderStatus: undefined })))
    expect(await refundRows(orderId)).toEqual([
      { amount: ORDER_AMOUNT * 0.4, status: 'pending', source: 'api' },
      { amount: ORDER_AMOUNT * 0.4, status: 'pending', source: 'api' },
    ])
    // One payment.refund job per admitted refund, keyed by it.
    const refundJobs = await db.select({ dedupeKey: jobs.dedupeKey }).from(jobs).where(eq(jobs.kind, 'payment.refund'))
    const ids = admitted.map(result => (result as PromiseFulfilledResult<{ id: string }>).value.id)
    expect(refundJobs.map(job => job.dedupeKey).filter(key => ids.includes(key)).sort()).toEqual([...ids].sort())
  })

  it('defaults to all that remains; a failed refund frees its amount, a succeeded one moves the order', async () => {
    const { tenantId, orderId } = await paidOrder()
    const first = await refund(tenantId, orderId, 100_000)
    const rest = await refund(tenantId, orderId)
    expect(rest.amount).toBe(50_000)
    await expect(refund(tenantId, orderId, 1).catch(refusal)).resolves.toEqual({ type: '/problems/refund-exceeds-remaining', remaining: 0, orderStatus: undefined })

    await transaction(db, tx => applyRefundOutcome(tx, orderId, first.id, { status: 'failed', failure: 'amount_too_large: test' }, {}))
    await transaction(db, tx => applyRefundOutcome(tx, orderId, rest.id, { status: 'succeeded', providerRefundId: 're_provider_rest' }, {}))
    const [order] = await db.select({ status: orders.status }).from(orders).where(eq(orders.id, orderId))
    expect(order!.status).toBe('partially_refunded')
    // Settling again changes nothing: a refund leaves pending once.
    await transaction(db, tx => applyRefundOutcome(tx, orderId, rest.id, { status: 'failed' }, {}))
    expect(await refundRows(orderId)).toEqual([
      { amount: 100_000, status: 'failed', source: 'api' },
      { amount: 50_000, status: 'succeeded', source: 'api' },
    ])
    const again = await refund(tenantId, orderId)
    expect(again.amount).toBe(100_000)
    await transaction(db, tx => applyRefundOutcome(tx, orderId, again.id, { status: 'succeeded' }, {}))
    const [refunded] = await db.select({ status: orders.status }).from(orders).where(eq(orders.id, orderId))
    expect(refunded!.status).toBe('refunded')
    // Nothing remains: refused as more than remains (0), not as an order that cannot be refunded.
    await expect(refund(tenantId, orderId).catch(refusal)).resolves.toEqual({ type: '/problems/refund-exceeds-remaining', remaining: 0, orderStatus: undefined })
    await expect(refund(tenantId, orderId, 1).catch(refusal)).resolves.toEqual({ type: '/problems/refund-exceeds-remaining', remaining: 0, orderStatus: undefined })
  })

  it('a provider total that a pending refund of ours covered is recorded when that refund fails, never lost', async () => {
    const { tenantId, orderId } = await paidOrder()
    const ours = await refund(tenantId, orderId, 100_000)
    // A dashboard refund of 60,000 is reported while ours holds 100,000: nothing beyond the holds.
    const eventId = newId('whe')
    await db.insert(webhookEvents).values({
      id: eventId, provider: 'standard', eventId: `msg_${eventId}`, type: 'payment.refunded', orderId, amount: 60_000, currency: 'IDR',
      rawBody: '{}', signatureHeaders: {}, requestId: 'req_dashboard',
    })
    expect(await transaction(db, tx => applyPaymentStatus(tx, orderId, 'refunded', { amount: 60_000, currency: 'IDR', webhookEventId: eventId })))
      .toEqual({ from: 'paid', to: 'paid', changed: false, reason: 'no_refund' })

    // Ours is refused: its hold is freed, and the provider's 60,000 is recorded after all.
    await transaction(db, tx => applyRefundOutcome(tx, orderId, ours.id, { status: 'failed', failure: 'amount_too_large: 90,000 remain' }, {}))
    expect(await refundRows(orderId)).toEqual([
      { amount: 100_000, status: 'failed', source: 'api' },
      { amount: 60_000, status: 'succeeded', source: 'provider' },
    ])
    const [order] = await db.select({ status: orders.status }).from(orders).where(eq(orders.id, orderId))
    expect(order!.status).toBe('partially_refunded')
  })

  it('a total that lists its refunds, one of which does not fit beside ours: no unnamed difference; recorded by its name once ours fails', async () => {
    const { tenantId, orderId } = await paidOrder()
    const ours = await refund(tenantId, orderId, 100_000)
    const dashboard = { providerRefundId: 're_dashboard', amount: 110_000, status: 'succeeded' as const }
    const stored = async (type: string, fields: Partial<typeof webhookEvents.$inferInsert>) => {
      const id = newId('whe')
      await db.insert(webhookEvents).values({ id, provider: 'stripe', eventId: `evt_${id}`, type, orderId, currency: 'IDR', rawBody: '{}', signatureHeaders: {}, requestId: 'req_dashboard', ...fields })
      return id
    }
    // Stripe's charge.refunded lists the dashboard's refund (110,000), which does not fit beside ours (100,000 held).
    const total = await stored('payment.refunded', { amount: 110_000, listedRefunds: [dashboard] })
    expect(await transaction(db, tx => applyPaymentStatus(tx, orderId, 'refunded', { amount: 110_000, currency: 'IDR', listedRefunds: [dashboard], webhookEventId: total })))
      .toEqual({ from: 'paid', to: 'paid', changed: false, reason: 'amount_mismatch' })
    // Its own refund.created, while ours still holds: kept out too.
    const created = await stored('refund.updated', { refund: dashboard })
    expect(await transaction(db, tx => applyPaymentStatus(tx, orderId, null, { currency: 'IDR', refund: dashboard, webhookEventId: created })))
      .toMatchObject({ changed: false, reason: 'amount_mismatch' })
    expect(await refundRows(orderId)).toEqual([{ amount: 100_000, status: 'pending', source: 'api' }])

    // Stripe refuses ours (the dashboard's took the money): the dashboard's refund is recorded by its name, once.
    await transaction(db, tx => applyRefundOutcome(tx, orderId, ours.id, { status: 'failed', failure: 'amount_too_large: 40,000 remain' }, {}))
    expect(await refundRows(orderId)).toEqual([
      { amount: 100_000, status: 'failed', source: 'api' },
      { amount: 110_000, status: 'succeeded', source: 'provider' },
    ])
    const named = await db.select({ providerRefundId: refunds.providerRefundId }).from(refunds).where(eq(refunds.orderId, orderId)).orderBy(asc(refunds.createdAt), asc(refunds.id))
    expect(named.map(row => row.providerRefundId)).toEqual([null, 're_dashboard'])
  })

  it('refuses an unpaid order and another tenant\'s; cancels an unpaid order once, and a paid one never', async () => {
    const { tenantId, orderIds: [unpaid] } = await seedOrders(db, 1)
    await expect(refund(tenantId, unpaid!).catch(refusal)).resolves.toEqual({ type: '/problems/order-not-refundable', remaining: undefined, orderStatus: 'pending_payment' })
    await expect(refund('ten_other', unpaid!).catch(refusal)).resolves.toEqual({ type: '/problems/not-found', remaining: undefined, orderStatus: undefined })

    const cancel = (orderId: string, tenant = tenantId) => transaction(db, tx => cancelOrder(tx, { tenantId: tenant, orderId, idempotencyKey: `cancel-${++keys}`, requestId: `req_${keys}` }))
    await Promise.all([cancel(unpaid!), cancel(unpaid!)])
    const [canceled] = await db.select({ status: orders.status }).from(orders).where(eq(orders.id, unpaid!))
    expect(canceled!.status).toBe('canceled')
    expect(await db.select({ kind: jobs.kind }).from(jobs).where(eq(jobs.dedupeKey, unpaid!))).toEqual(expect.arrayContaining([{ kind: 'payment.cancel' }]))
    expect((await db.select({ kind: jobs.kind }).from(jobs).where(eq(jobs.dedupeKey, unpaid!))).filter(job => job.kind === 'payment.cancel')).toHaveLength(1)

    const paid = await paidOrder()
    await expect(cancel(paid.orderId, paid.tenantId).catch(refusal)).resolves.toEqual({ type: '/problems/order-not-cancelable', remaining: undefined, orderStatus: 'paid' })

    // The shopper's payment arrives for the canceled order: given back once, however often it is applied.
    for (let i = 0; i < 3; i++) await transaction(db, tx => applyPaymentStatus(tx, unpaid!, 'paid', { requestId: `req_late_${i}` }))
    expect(await refundRows(unpaid!)).toEqual([{ amount: ORDER_AMOUNT, status: 'pending', source: 'automatic' }])
  })
}

describeOnBothBackends('refundable balance contract', refundsContract)
