import { eq } from 'drizzle-orm'
import { z } from 'zod'
import { useConfig } from '../config'
import type { Database } from '../db/client'
import { newId } from '../db/ids'
import { transaction } from '../db/transaction'
import { paymentIntents } from '../db/schema'
import { enqueueJob } from '../jobs/enqueue'
import { type MockpayDelivery, mockpayDeliverJob } from '../jobs/types'
import { problem } from '../problems'

/**
 * The simulated provider's payment page: confirm or fail an intent, refund it. Each transition is
 * one event, delivered to /api/webhooks/mockpay (Standard Webhooks, signed with mockpay's own
 * secret) by `mockpay.deliver` jobs with the
 * chaos a real provider shows: extra copies, random delays, and the intent's earlier events sent
 * again so they arrive out of order. Pressing the same button twice changes nothing.
 */

const Chaos = z.object({
  duplicates: z.number().int().min(0).max(10).optional(),
  maxDelayMs: z.number().int().min(0).max(60_000).optional(),
  reorder: z.boolean().optional(),
})
export const ConfirmIntentSchema = z.object({ outcome: z.enum(['succeed', 'fail']), chaos: Chaos.optional() })
export const RefundIntentSchema = z.object({ chaos: Chaos.optional() })

export type MockpayAction = 'succeed' | 'fail' | 'refund'
type ChaosOptions = z.infer<typeof Chaos>

const transitions: Record<MockpayAction, { from: string[], to: string, type: MockpayDelivery['type'] }> = {
  succeed: { from: ['requires_payment', 'failed'], to: 'succeeded', type: 'payment.succeeded' },
  fail: { from: ['requires_payment'], to: 'failed', type: 'payment.failed' },
  refund: { from: ['succeeded'], to: 'refunded', type: 'payment.refunded' },
}

/** 404 unless the simulated provider is enabled (MOCKPAY_ENABLED). */
export function requireMockpay(): void {
  if (!useConfig().MOCKPAY_ENABLED) throw problem('not-found', 'The simulated payment provider is off here. Set MOCKPAY_ENABLED=true (it is on by default only in embedded and development mode).')
}

export type IntentView = Awaited<ReturnType<typeof findIntent>> & { deliveriesScheduled: number }

export async function findIntent(db: Database, intentId: string, options: { forUpdate?: boolean } = {}) {
  const query = db.select({
    id: paymentIntents.id,
    orderId: paymentIntents.orderId,
    status: paymentIntents.status,
    amount: paymentIntents.amount,
    currency: paymentIntents.currency,
    events: paymentIntents.events,
  }).from(paymentIntents).where(eq(paymentIntents.id, intentId))
  const [intent] = await (options.forUpdate ? query.for('update') : query)
  if (!intent) throw problem('not-found', `No mockpay payment intent "${intentId}". Read the order (GET /api/orders/{id}) for its paymentIntentId; it appears once the worker created the intent.`)
  return intent
}

export async function actOnIntent(db: Database, intentId: string, action: MockpayAction, chaos: ChaosOptions = {}): Promise<IntentView> {
  const config = useConfig()
  const duplicates = chaos.duplicates ?? config.MOCKPAY_DUPLICATES
  const maxDelayMs = chaos.maxDelayMs ?? config.MOCKPAY_MAX_DELAY_MS
  const reorder = chaos.reorder ?? config.MOCKPAY_REORDER
  const transition = transitions[action]
  return transaction(db, async (tx) => {
    // Row-locked: two presses of the button serialise, and the second finds the state the first left.
    const intent = await findIntent(tx, intentId, { forUpdate: true })
    if (intent.status === transition.to) return { ...intent, deliveriesScheduled: 0 }
    if (!transition.from.includes(intent.status)) {
      throw problem('payment-state-conflict', `This intent is ${intent.status}; "${action}" needs it to be ${transition.from.join(' or ')}. Read it with GET /api/mockpay/intents/${intentId}.`, { extensions: { intentStatus: intent.status } })
    }
    const event = { id: newId('msg'), type: transition.type, timestamp: new Date().toISOString() }
    const events = [...intent.events, event]
    await tx.update(paymentIntents).set({ status: transition.to, events }).where(eq(paymentIntents.id, intentId))
    const deliveries: Array<[{ id: string, type: string, timestamp: string }, string]> = Array.from({ length: duplicates + 1 }, (_, copy) => [event, String(copy)])
    if (reorder) for (const earlier of intent.events) deliveries.push([earlier, `again-${events.length}`])
    for (const [delivered, copy] of deliveries) {
      const payload: MockpayDelivery = {
        webhookId: delivered.id,
        type: delivered.type as MockpayDelivery['type'],
        timestamp: delivered.timestamp,
        orderId: intent.orderId,
        paymentId: intent.id,
        amount: intent.amount,
        currency: intent.currency,
      }
      await enqueueJob(tx, mockpayDeliverJob, payload, { dedupeKey: `${delivered.id}:${copy}`, delayMs: Math.floor(Math.random() * (maxDelayMs + 1)) })
    }
    return { ...intent, status: transition.to, events, deliveriesScheduled: deliveries.length }
  })
}
