import { eq } from 'drizzle-orm'
import { refunds } from '../../db/schema'
import { applyRefundOutcome } from '../../orders/payment-state'
import { refundIdempotencyKey } from '../../payments'
import { refundAmountProblem } from '../../payments/currencies'
import { PaymentRefused, type PaymentProvider } from '../../payments/types'
import { defineJobKind } from '../../jobs/kind'
import { paymentRefundJob } from '../../orders/job-types'
import { loadOrders, requireOrder } from '../../orders/jobs/load-orders'
import { retryLater } from '../../payments/jobs/provider-errors'

/**
 * Asks the provider for one refund, under the key `refund:<id>`: a run that crashed between the
 * provider's answer and our commit, or lost the answer, asks again under the same key, and the
 * provider answers with the refund it made. Its answer settles the refund (succeeded, or pending
 * until the provider's webhook or reconciliation says); a definitive refusal fails it, which frees
 * its amount for another refund.
 */
export function paymentRefund(provider: PaymentProvider) {
  return defineJobKind({
    ...paymentRefundJob,
    load: loadOrders,
    async run({ db, job, signal, complete, commit }, { orderId, refundId }, loaded) {
      const order = requireOrder(loaded, orderId)
      const [refund] = await db.select().from(refunds).where(eq(refunds.id, refundId))
      if (!refund || refund.status !== 'pending' || refund.providerRefundId) return complete()
      const context = { jobId: job.id, requestId: job.requestId ?? undefined }
      if (!order.paymentIntentId) {
        return commit(tx => applyRefundOutcome(tx, orderId, refundId, { status: 'failed', failure: 'The order has no payment at the provider to refund.' }, context))
      }
      // Admission refuses such amounts; one admitted before it did would be refused on every attempt.
      const inexpressible = refundAmountProblem(provider.name, refund.amount, refund.currency, { rest: false })
      if (inexpressible) {
        return commit(tx => applyRefundOutcome(tx, orderId, refundId, { status: 'failed', failure: `amount_inexpressible: ${inexpressible}` }, context))
      }
      let answer
      try {
        answer = await provider.refundPayment({
          orderId,
          paymentId: order.paymentIntentId,
          refundId,
          amount: refund.amount,
          currency: refund.currency,
          reason: refund.reason,
          idempotencyKey: refundIdempotencyKey(refundId),
          firstAskedAt: job.createdAt,
        }, signal)
      }
      catch (error) {
        if (!(error instanceof PaymentRefused)) retryLater(error, provider.name)
        const { refusal } = error
        return commit(tx => applyRefundOutcome(tx, orderId, refundId, { status: 'failed', failure: `${refusal.code}: ${refusal.providerMessage}` }, context))
      }
      await commit(tx => applyRefundOutcome(tx, orderId, refundId, { status: answer.status, providerRefundId: answer.id }, context))
    },
  })
}
