import { eq, sql } from 'drizzle-orm'
import type { Database } from '../db/client'
import { newId } from '../db/ids'
import { paymentIntents } from '../db/schema'
import type { PaymentProvider } from '../payments/types'
import type { PaymentEventType } from '../webhooks/types'

export const MOCKPAY = 'mockpay'

const typeOfStatus: Record<string, PaymentEventType> = {
  succeeded: 'payment.succeeded',
  failed: 'payment.failed',
  refunded: 'payment.refunded',
}

/**
 * The simulated provider's side of the payment calls. Like a real provider it honours the
 * idempotency key: a repeated call returns the first intent and only counts the request.
 */
export function createMockpayProvider(db: Database): PaymentProvider {
  return {
    name: MOCKPAY,
    async createPayment(request, signal) {
      signal.throwIfAborted()
      const [intent] = await db.insert(paymentIntents).values({
        id: newId('pi'),
        provider: MOCKPAY,
        idempotencyToken: request.idempotencyKey,
        orderId: request.orderId,
        amount: request.amount,
        currency: request.currency,
      }).onConflictDoUpdate({
        target: [paymentIntents.provider, paymentIntents.idempotencyToken],
        set: { requests: sql`${paymentIntents.requests} + 1` },
      }).returning({ id: paymentIntents.id })
      return { id: intent!.id, nextAction: { type: 'mockpay' } }
    },
    async readPayment({ paymentId }, signal) {
      signal.throwIfAborted()
      const [intent] = await db.select().from(paymentIntents).where(eq(paymentIntents.id, paymentId))
      if (!intent) return undefined
      return {
        paymentId: intent.id,
        providerStatus: intent.status,
        type: typeOfStatus[intent.status] ?? 'payment.updated',
        amount: intent.amount,
        currency: intent.currency,
        answer: { id: intent.id, status: intent.status, amount: intent.amount, currency: intent.currency },
      }
    },
  }
}
