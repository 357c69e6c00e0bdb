import { eq, sql } from 'drizzle-orm'
import { orders } from '../../db/schema'
import { applyPaymentStatus } from '../../orders/payment-state'
import { paymentIdempotencyKey } from '..'
import { PaymentRefused, type PaymentProvider } from '../types'
import { defineJobKind } from '../../jobs/kind'
import { paymentCreateIntentJob } from '../../orders/job-types'
import { loadOrders, requireOrder } from '../../orders/jobs/load-orders'
import { retryLater } from './provider-errors'
import { settleReservations } from '../../stock/ledger'

/**
 * Asks the provider for the order's payment, then stores it on the order with what the checkout
 * page does next. The call happens outside our transaction, so a job that runs twice (a crash
 * between the provider's answer and the commit, a lost response) asks twice, with the same
 * idempotency key — and the provider answers with the one payment it created. A definitive refusal
 * is recorded on the order (payment_failed, with the reason the page shows), releases its stock
 * reservations and ends the job.
 */
export function paymentCreateIntent(provider: PaymentProvider) {
  return defineJobKind({
    ...paymentCreateIntentJob,
    load: loadOrders,
    async run({ job, signal, complete, commit }, { orderId }, loaded) {
      const order = requireOrder(loaded, orderId)
      // A canceled order is never offered for payment: its cancel job finds no payment to cancel.
      if (order.paymentIntentId || order.paymentError || order.status === 'canceled') return complete()
      let created
      try {
        created = await provider.createPayment({
          orderId,
          amount: order.amount,
          currency: order.currency,
          paymentMethod: order.paymentMethod,
          customerEmail: order.customer.email,
          idempotencyKey: paymentIdempotencyKey(orderId),
          firstAskedAt: job.createdAt,
        }, signal)
      }
      catch (error) {
        if (!(error instanceof PaymentRefused)) retryLater(error, provider.name)
        const { refusal } = error
        return commit(async (tx) => {
          await tx.update(orders).set({ paymentProvider: provider.name, paymentError: refusal, updatedAt: sql`now()` }).where(eq(orders.id, orderId))
          await applyPaymentStatus(tx, orderId, 'payment_failed', { jobId: job.id, requestId: job.requestId ?? undefined })
          // No payment can follow a refusal: the order's units go back on sale now, not at its expiry.
          await settleReservations(tx, { tenantId: order.tenantId, orderId }, 'release', 'refused', { jobId: job.id, requestId: job.requestId })
        })
      }
      // The first payment stored stays: a run whose order already has one changes nothing.
      await complete({
        text: `stored as (update orders set payment_intent_id = $1::text, payment_provider = $2::text, payment_next_action = $3::jsonb, updated_at = now()
          from done where orders.id = $4::text and orders.payment_intent_id is null)`,
        params: [created.id, provider.name, JSON.stringify(created.nextAction), orderId],
      })
    },
  })
}
