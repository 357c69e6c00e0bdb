import { sql } from 'drizzle-orm'
import type { Database } from '../db/client'
import { newId } from '../db/ids'
import { paymentIntents } from '../db/schema'
import type { PaymentProvider } from './types'

/**
 * A provider that lives in our own database, standing in for a real one until the simulated
 * provider lands. Like a real provider it honours the idempotency token: a repeated call returns
 * the first intent and only counts the request.
 */
export function createInProcessProvider(db: Database): PaymentProvider {
  return {
    name: 'in_process',
    async createIntent(request, signal) {
      signal.throwIfAborted()
      const [intent] = await db.insert(paymentIntents).values({
        id: newId('pi'),
        provider: 'in_process',
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
