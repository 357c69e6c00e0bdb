import { eq, sql } from 'drizzle-orm'
import type { Database } from '@idempotent-checkout/db-kit'
import { newId } from '../../db/ids'
import { paymentIntentRefunds, paymentIntents } from '../../db/schema'
import { problemOf } from '../../problems'
import { actOnIntent } from './service'
import { type PaymentEventType, type PaymentProvider, PaymentRefused } from '../types'

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
        refundedAmount: intent.amountRefunded,
        answer: { id: intent.id, status: intent.status, amount: intent.amount, amountRefunded: intent.amountRefunded, currency: intent.currency },
      }
    },
    async refundPayment(request, signal) {
      signal.throwIfAborted()
      const answer = await refused(() => actOnIntent(db, request.paymentId, 'refund', {}, { amount: request.amount, idempotencyToken: request.idempotencyKey }))
      return { id: answer.refund!.id, status: 'succeeded', answer: { id: answer.refund!.id, amount: answer.refund!.amount, intent: answer.id, status: 'succeeded' } }
    },
    async readRefund({ providerRefundId }, signal) {
      signal.throwIfAborted()
      const [refund] = await db.select().from(paymentIntentRefunds).where(eq(paymentIntentRefunds.id, providerRefundId))
      return refund && { id: refund.id, status: 'succeeded', answer: { id: refund.id, amount: refund.amount, intent: refund.intentId, status: 'succeeded' } }
    },
    async cancelPayment({ paymentId }, signal) {
      signal.throwIfAborted()
      try {
        await actOnIntent(db, paymentId, 'cancel')
        return 'canceled'
      }
      catch (error) {
        const conflict = problemOf(error)?.body.intentStatus
        if (conflict === 'succeeded' || conflict === 'refunded') return 'succeeded'
        throw error
      }
    },
  }
}

/** The simulated provider's 409 (a state that cannot be refunded, more than remains) is a refusal for good. */
async function refused<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call()
  }
  catch (error) {
    const failure = problemOf(error)
    if (failure?.body.status === 409) throw new PaymentRefused({ code: 'refund_refused', message: 'The refund was refused.', providerMessage: failure.body.detail ?? failure.body.title })
    throw error
  }
}
