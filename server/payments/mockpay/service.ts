import { eq, sql } from 'drizzle-orm'
import { z } from 'zod'
import { useConfig } from '../../config'
import type { Database } from '@idempotent-checkout/db-kit'
import { newId } from '../../db/ids'
import { transaction, writeAtCommit } from '@idempotent-checkout/db-kit'
import { paymentIntentRefunds, paymentIntents } from '../../db/schema'
import { enqueueJobAtCommit } from '../../jobs/enqueue'
import { type MockpayDelivery, mockpayDeliverJob } from './job-types'
import { problem } from '../../problems'

/**
 * The simulated provider's payment page: confirm or fail an intent, refund it. Each transition is
 * one event, delivered to /api/webhooks/mockpay (Standard Webhooks, signed with mockpay's own
 * secret) by `mockpay.deliver` jobs with the chaos a real provider shows: extra copies, random
 * delays, and some of the intent's earlier events sent again (MOCKPAY_REORDER_MAX_EARLIER) so they
 * arrive out of order. Pressing the same button twice changes nothing.
 */

const Chaos = z.object({
  duplicates: z.number().int().min(0).max(10).optional(),
  maxDelayMs: z.number().int().min(0).max(60_000).optional(),
  reorder: z.boolean().optional(),
})
export const ConfirmIntentSchema = z.object({ outcome: z.enum(['succeed', 'fail']), chaos: Chaos.optional() })
/** `amount`: part of what remains (default: all of it), in the intent's units. */
export const RefundIntentSchema = z.object({ amount: z.number().int().positive().max(Number.MAX_SAFE_INTEGER).optional(), chaos: Chaos.optional() })

export type MockpayAction = 'succeed' | 'fail' | 'refund' | 'cancel'
type ChaosOptions = z.infer<typeof Chaos>

const transitions: Record<MockpayAction, { from: string[], to: string, type: MockpayDelivery['type'] }> = {
  succeed: { from: ['requires_payment', 'failed'], to: 'succeeded', type: 'payment.succeeded' },
  fail: { from: ['requires_payment'], to: 'failed', type: 'payment.failed' },
  refund: { from: ['succeeded'], to: 'refunded', type: 'payment.refunded' },
  cancel: { from: ['requires_payment', 'failed'], to: 'canceled', type: 'payment.failed' },
}

/** One event of an intent, as delivered (again) later: a refund's amount is the total refunded when it happened. */
type IntentEvent = { id: string, type: string, timestamp: string, amount?: number }

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
    amountRefunded: paymentIntents.amountRefunded,
    currency: paymentIntents.currency,
    events: paymentIntents.events,
  }).from(paymentIntents).where(eq(paymentIntents.id, intentId))
  const [intent] = await (options.forUpdate ? query.for('update') : query)
  if (!intent) throw problem('not-found', `No mockpay payment intent "${intentId}". Take the paymentIntentId from the order (GET /api/orders/ followed by the order's id); it appears once the worker created the intent.`)
  return intent
}

export interface RefundOptions {
  amount?: number
  /** The merchant's idempotency token: a second refund under it answers the first. */
  idempotencyToken?: string
}

/**
 * Confirms, fails, cancels or refunds an intent, as the provider's page or API would, and schedules
 * the event's deliveries. A refund takes part or all of what remains (a partially refunded intent
 * stays succeeded until nothing remains); under a token already used it answers the first refund.
 */
export async function actOnIntent(db: Database, intentId: string, action: MockpayAction, chaos: ChaosOptions = {}, refund: RefundOptions = {}): Promise<IntentView & { refund?: { id: string, amount: number } }> {
  const transition = transitions[action]
  return transaction(db, async (tx) => {
    // Row-locked: two presses of the button serialise, and the second finds the state the first left.
    const intent = await findIntent(tx, intentId, { forUpdate: true })
    if (action === 'refund' && refund.idempotencyToken) {
      const [earlier] = await tx.update(paymentIntentRefunds).set({ requests: sql`${paymentIntentRefunds.requests} + 1` })
        .where(eq(paymentIntentRefunds.idempotencyToken, refund.idempotencyToken)).returning({ id: paymentIntentRefunds.id, amount: paymentIntentRefunds.amount })
      if (earlier) return { ...intent, deliveriesScheduled: 0, refund: earlier }
    }
    if (action !== 'refund' && intent.status === transition.to) return { ...intent, deliveriesScheduled: 0 }
    if (!transition.from.includes(intent.status)) {
      throw problem('payment-state-conflict', `This intent is ${intent.status}; "${action}" needs it to be ${transition.from.join(' or ')}. Read it with GET /api/mockpay/intents/${intentId}.`, { extensions: { intentStatus: intent.status } })
    }
    let status = transition.to
    let amountRefunded = intent.amountRefunded
    let made: { id: string, amount: number } | undefined
    if (action === 'refund') {
      const remaining = intent.amount - intent.amountRefunded
      const amount = refund.amount ?? remaining
      if (amount > remaining) {
        throw problem('payment-state-conflict', `Only ${remaining} of this intent remains to refund; ask for at most that.`, { extensions: { intentStatus: intent.status, remaining } })
      }
      amountRefunded += amount
      status = amountRefunded === intent.amount ? 'refunded' : intent.status
      made = { id: newId('mre'), amount }
      await tx.insert(paymentIntentRefunds).values({ id: made.id, intentId, idempotencyToken: refund.idempotencyToken ?? null, amount })
    }
    const event: IntentEvent = { id: newId('msg'), type: transition.type, timestamp: new Date().toISOString(), ...(action === 'refund' && { amount: amountRefunded }) }
    // A cancel is the merchant's own act: there is nothing to tell it, so no event is kept to send again.
    const events = action === 'cancel' ? intent.events : [...intent.events, event]
    // The last writes: sent with the COMMIT, one round trip on postgres.js.
    writeAtCommit(tx, tx.update(paymentIntents).set({ status, events, amountRefunded }).where(eq(paymentIntents.id, intentId)))
    const deliveriesScheduled = action === 'cancel' ? 0 : scheduleDeliveries(tx, { ...intent, events: intent.events as IntentEvent[] }, event, chaos)
    return { ...intent, status, amountRefunded, events, deliveriesScheduled, ...(made && { refund: made }) }
  })
}

/**
 * How many earlier events a new one brings again (reorder): the intent's first (its payment's
 * outcome) and the latest before the new one. Every earlier event each time would grow an intent's
 * deliveries with the square of its events: 40 refunds of one intent scheduled 861 deliveries, 158
 * with this bound.
 */
export const MOCKPAY_REORDER_MAX_EARLIER = 3

function earlierToResend(events: IntentEvent[]): IntentEvent[] {
  return events.length <= MOCKPAY_REORDER_MAX_EARLIER ? events : [events[0]!, ...events.slice(-(MOCKPAY_REORDER_MAX_EARLIER - 1))]
}

/** The event's copies, with the chaos a real provider shows: extra copies, random delays, and some earlier events again. */
function scheduleDeliveries(tx: Database, intent: { id: string, orderId: string, amount: number, currency: string, events: IntentEvent[] }, event: IntentEvent, chaos: ChaosOptions): number {
  const config = useConfig()
  const duplicates = chaos.duplicates ?? config.MOCKPAY_DUPLICATES
  const maxDelayMs = chaos.maxDelayMs ?? config.MOCKPAY_MAX_DELAY_MS
  const reorder = chaos.reorder ?? config.MOCKPAY_REORDER
  const deliveries: Array<[IntentEvent, string]> = Array.from({ length: duplicates + 1 }, (_, copy) => [event, String(copy)])
  if (reorder) for (const earlier of earlierToResend(intent.events)) deliveries.push([earlier, `again-${intent.events.length + 1}`])
  for (const [delivered, copy] of deliveries) {
    const payload: MockpayDelivery = {
      webhookId: delivered.id,
      type: delivered.type as MockpayDelivery['type'],
      timestamp: delivered.timestamp,
      orderId: intent.orderId,
      paymentId: intent.id,
      // A refund event says the total refunded so far (an event from before partial refunds: all of it).
      amount: delivered.type === 'payment.refunded' ? delivered.amount ?? intent.amount : intent.amount,
      currency: intent.currency,
    }
    enqueueJobAtCommit(tx, mockpayDeliverJob, payload, { dedupeKey: `${delivered.id}:${copy}`, delayMs: Math.floor(Math.random() * (maxDelayMs + 1)) })
  }
  return deliveries.length
}
