import { sql } from 'drizzle-orm'
import type { AppConfig } from '../config'
import type { Database } from '../db/client'
import { newId } from '../db/ids'
import { paymentIntents } from '../db/schema'
import type { PaymentProvider } from '../payments/types'

export const MOCKPAY = 'mockpay'

/**
 * Whether orders ask a payment provider for an intent (payment.create_intent). mockpay is the only
 * provider so far, and only while MOCKPAY_ENABLED: a job no worker can run must not be enqueued.
 */
export function paymentProviderConfigured(config: Pick<AppConfig, 'MOCKPAY_ENABLED'>): boolean {
  return config.MOCKPAY_ENABLED
}

/**
 * The simulated provider's side of the payment.create_intent call. Like a real provider it honours
 * the idempotency token: a repeated call returns the first intent and only counts the request.
 * A real provider plugs in here through the same interface.
 */
export function createMockpayProvider(db: Database): PaymentProvider {
  return {
    name: MOCKPAY,
    async createIntent(request, signal) {
      signal.throwIfAborted()
      const [intent] = await db.insert(paymentIntents).values({
        id: newId('pi'),
        provider: MOCKPAY,
        idempotencyToken: request.idempotencyToken,
        orderId: request.orderId,
        amount: request.amount,
        currency: request.currency,
      }).onConflictDoUpdate({
        target: [paymentIntents.provider, paymentIntents.idempotencyToken],
        set: { requests: sql`${paymentIntents.requests} + 1` },
      }).returning({ id: paymentIntents.id, status: paymentIntents.status })
      return intent!
    },
  }
}
