import { and, eq, isNull, sql } from 'drizzle-orm'
import { orders } from '../../db/schema'
import type { PaymentProvider } from '../../payments/types'
import { ProviderRateLimited } from '../../payments/types'
import { SnoozeJob } from '../errors'
import { defineJobKind } from '../kind'
import { loadOrder, OrderJobPayload, orderResource } from './order-payload'

/**
 * Asks the provider for a payment intent with the order id as its idempotency token, then stores
 * the intent on the order. The call happens outside our transaction, so a job that runs twice asks
 * twice — and the provider's token dedupe answers the same intent both times.
 */
export function paymentCreateIntent(provider: PaymentProvider) {
  return defineJobKind({
    kind: 'payment.create_intent',
    payload: OrderJobPayload,
    resource: orderResource,
    async run({ db, signal, commit }, { orderId }) {
      const order = await loadOrder(db, orderId)
      if (order.paymentIntentId) return commit(async () => {})
      let intent
      try {
        intent = await provider.createIntent({ orderId, amount: order.amount, currency: order.currency, idempotencyToken: orderId }, signal)
      }
      catch (error) {
        if (error instanceof ProviderRateLimited) throw new SnoozeJob(error.retryAfterMs, 'payment provider rate limited')
        throw error
      }
      await commit(async (tx) => {
        await tx.update(orders).set({ paymentIntentId: intent.id, updatedAt: sql`now()` })
          .where(and(eq(orders.id, orderId), isNull(orders.paymentIntentId)))
      })
    },
  })
}
