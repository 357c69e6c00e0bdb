import { and, asc, eq } from 'drizzle-orm'
import { afterAll, beforeAll, expect, it } from 'vitest'
import type { Database } from '@idempotent-checkout/db-kit'
import { transaction } from '@idempotent-checkout/db-kit'
import { jobs, operatorActions, orders, orderStatusHistory, refunds } from '../../server/db/schema'
import { createJobStore } from '../../server/jobs/store'
import { setLogLevel } from '../../server/observability/logger'
import { dismissJob } from '../../server/ops/job-dismissal'
import { applyPaymentStatus, applyRefundOutcome } from '../../server/orders/payment-state'
import { requestRefund } from '../../server/refunds/service'
import { type DatabaseDriver, openSuiteDatabase, type SuiteDatabase } from '../support/databases'
import { seedOrders } from '../support/jobs'
import { describeOnBothBackends } from '../support/lock-backends'

// An operator dismisses a payment.refund dead letter (server/ops/job-dismissal.ts): a refund the
// provider never made must not stay pending, holding its amount, with nothing left to settle it.

if (!process.env.LOG_LEVEL) setLogLevel('error')

const ORDER_AMOUNT = 150000

function dismissalContract(driver: DatabaseDriver) {
  let database: SuiteDatabase
  let db: Database

  beforeAll(async () => {
    database = await openSuiteDatabase(driver, 'refund_dismissal', { poolSize: 4 })
    db = database.handle.db
  }, 60_000)

  afterAll(async () => {
    await database?.close()
  })

  let keys = 0
  /** A paid order and a pending refund of `amount` admitted for it, its payment.refund job dead-lettered as the runner does. */
  async function deadRefund(amount: number): Promise<{ tenantId: string, orderId: string, refundId: string, jobId: string }> {
    const { tenantId, orderIds: [orderId] } = await seedOrders(db, 1)
    await transaction(db, tx => applyPaymentStatus(tx, orderId!, 'paid', { requestId: 'req_paid' }))
    const refund = await transaction(db, tx => requestRefund(tx, { tenantId, orderId: orderId!, source: 'api', idempotencyKey: `key-${++keys}`, requestId: `req_${keys}` }, { amount }))
    const store = createJobStore(db)
    const claimed = await store.claim('worker-test', 10, ['payment.refund'])
    const job = claimed.find(one => one.dedupeKey === refund.id)!
    expect(job).toBeDefined()
    for (const other of claimed.filter(one => one !== job)) await store.putBack(other, 0)
    expect(await store.fail(job, { errorClass: 'permanent', message: 'RangeError: 150 MGA has no exact amount in stripe\'s units', retryInMs: 0, permanent: true })).toBe('dead_letter')
    return { tenantId, orderId: orderId!, refundId: refund.id, jobId: job.id }
  }

  const refundOf = async (refundId: string) => (await db.select({ status: refunds.status, failure: refunds.failure }).from(refunds).where(eq(refunds.id, refundId)))[0]
  const historyOf = (orderId: string) => db.select({ reason: orderStatusHistory.reason, refundId: orderStatusHistory.refundId, requestId: orderStatusHistory.requestId })
    .from(orderStatusHistory).where(eq(orderStatusHistory.orderId, orderId)).orderBy(asc(orderStatusHistory.id))
  const noticesOf = (orderId: string) => db.select({ id: jobs.id }).from(jobs).where(and(eq(jobs.kind, 'order.send_refund_notice'), eq(jobs.resourceId, `order:${orderId}`)))

  it('fails the pending refund it was to make, in the dismissal\'s transaction: its hold is freed, a history row names it, no notice', async () => {
    const { tenantId, orderId, refundId, jobId } = await deadRefund(40_000)
    const outcome = await dismissJob(db, { requestId: 'req_dismiss' }, jobId, 'the amount cannot be refunded at the provider')
    expect(outcome).toMatchObject({ dismissed: { id: jobId, status: 'dismissed' } })

    expect(await refundOf(refundId)).toEqual({ status: 'failed', failure: 'job_dismissed: the amount cannot be refunded at the provider' })
    expect(await historyOf(orderId)).toEqual([
      { reason: null, refundId: null, requestId: 'req_paid' },
      { reason: 'refund_requested', refundId, requestId: `req_${keys}` },
      { reason: 'refund_failed', refundId, requestId: 'req_dismiss' },
    ])
    expect(await noticesOf(orderId)).toEqual([])
    const [order] = await db.select({ status: orders.status }).from(orders).where(eq(orders.id, orderId))
    expect(order!.status).toBe('paid')
    const [action] = await db.select({ action: operatorActions.action, tenantId: operatorActions.tenantId }).from(operatorActions).where(eq(operatorActions.subjectId, jobId))
    expect(action).toEqual({ action: 'job.dismissed', tenantId })
    // The whole amount is free again: "refund the rest" takes all of it.
    const rest = await transaction(db, tx => requestRefund(tx, { tenantId, orderId, source: 'api', idempotencyKey: `key-${++keys}`, requestId: `req_${keys}` }, {}))
    expect(rest.amount).toBe(ORDER_AMOUNT)
  })

  it('leaves a refund alone that the provider already knows (its id noted) or that settled meanwhile', async () => {
    const atProvider = await deadRefund(10_000)
    await db.update(refunds).set({ providerRefundId: 're_at_provider' }).where(eq(refunds.id, atProvider.refundId))
    expect(await dismissJob(db, { requestId: 'req_dismiss_2' }, atProvider.jobId, 'settled by the provider later')).toMatchObject({ dismissed: { id: atProvider.jobId } })
    expect(await refundOf(atProvider.refundId)).toEqual({ status: 'pending', failure: null })

    const settled = await deadRefund(10_000)
    await transaction(db, tx => applyRefundOutcome(tx, settled.orderId, settled.refundId, { status: 'succeeded', providerRefundId: 're_settled' }, {}))
    expect(await dismissJob(db, { requestId: 'req_dismiss_3' }, settled.jobId, 'settled')).toMatchObject({ dismissed: { id: settled.jobId } })
    expect(await refundOf(settled.refundId)).toEqual({ status: 'succeeded', failure: null })
    expect((await historyOf(settled.orderId)).map(row => row.reason)).toEqual([null, 'refund_requested', 'refund_succeeded'])
  })
}

describeOnBothBackends('dismissing a payment.refund dead letter', (driver) => {
  dismissalContract(driver)
})
