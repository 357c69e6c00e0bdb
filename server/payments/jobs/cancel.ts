import { and, eq, inArray } from 'drizzle-orm'
import { jobs } from '../../db/schema'
import { applyPaymentStatus } from '../../orders/payment-state'
import { PaymentRefused, type PaymentProvider } from '../types'
import { PermanentJobError, RetryableJobError } from '../../jobs/errors'
import { defineJobKind } from '../../jobs/kind'
import { paymentCancelJob, paymentCreateIntentJob } from '../../orders/job-types'
import { loadOrders, requireOrder } from '../../orders/jobs/load-orders'
import { retryLater } from './provider-errors'

/**
 * Cancels a canceled order's payment at the provider, so the shopper can no longer pay it. Both
 * this job and payment.create_intent lock the order: a payment still being created is waited for
 * (retried), and one created after the cancel is never made (create_intent skips a canceled order).
 * When the provider says the shopper paid first, the payment is applied: a payment for a canceled
 * order is refunded automatically, once.
 */
export function paymentCancel(provider: PaymentProvider) {
  return defineJobKind({
    ...paymentCancelJob,
    load: loadOrders,
    async run({ db, job, signal, complete, commit }, { orderId }, loaded) {
      const order = requireOrder(loaded, orderId)
      if (!order.paymentIntentId) {
        const [creating] = await db.select({ id: jobs.id }).from(jobs)
          .where(and(eq(jobs.kind, paymentCreateIntentJob.kind), eq(jobs.dedupeKey, orderId), inArray(jobs.status, ['queued', 'running', 'failed'])))
        if (creating) throw new RetryableJobError(`order ${orderId}'s payment is still being created (job ${creating.id})`)
        return complete()
      }
      let result
      try {
        result = await provider.cancelPayment({ orderId, paymentId: order.paymentIntentId }, signal)
      }
      catch (error) {
        if (!(error instanceof PaymentRefused)) retryLater(error, provider.name)
        throw new PermanentJobError(`${provider.name} refused to cancel payment ${order.paymentIntentId}: ${error.refusal.code}: ${error.refusal.providerMessage}`)
      }
      if (result === 'canceled') return complete()
      await commit(async (tx) => {
        await applyPaymentStatus(tx, orderId, 'paid', { jobId: job.id, requestId: job.requestId ?? undefined })
      })
    },
  })
}
