import type { PaymentProvider } from '../../payments/types'
import { ProviderRateLimited } from '../../payments/types'
import { SnoozeJob } from '../errors'
import { defineJobKind } from '../kind'
import { loadOrders, OrderJobPayload, orderResource, requireOrder } from './order-payload'

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
    load: loadOrders,
    async run({ signal, complete }, { orderId }, loaded) {
      const order = requireOrder(loaded, orderId)
      if (order.paymentIntentId) return complete()
      let intent
      try {
        intent = await provider.createIntent({ orderId, amount: order.amount, currency: order.currency, idempotencyToken: orderId }, signal)
      }
      catch (error) {
        if (error instanceof ProviderRateLimited) throw new SnoozeJob(error.retryAfterMs, 'payment provider rate limited')
        throw error
      }
      // The first intent stored stays: a run whose order already has one changes nothing.
      await complete({
        text: 'stored as (update orders set payment_intent_id = $1::text, updated_at = now() from done where orders.id = $2::text and orders.payment_intent_id is null)',
        params: [intent.id, orderId],
      })
    },
  })
}
