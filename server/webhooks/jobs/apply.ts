import { eq, sql } from 'drizzle-orm'
import { type Database, defineStatement, writeAtCommit } from '@idempotent-checkout/db-kit'
import { webhookEvents } from '../../db/schema'
import { applyPaymentStatus, isPaid, lockOrder } from '../../orders/payment-state'
import type { PaymentProvider, PaymentEventType } from '../../payments/types'
import { requestedStatusOf } from '../types'
import { PermanentJobError, RetryableJobError } from '../../jobs/errors'
import { defineJobKind } from '../../jobs/kind'
import { webhookApplyJob } from '../job-types'
import { retryLater } from '../../payments/jobs/provider-errors'
import { rowsById } from '../../db/rows-by-id'

/** Providers whose notifications are confirmed with their status API before they may move an order: Midtrans signs too little of its body. */
const confirmedProviders = new Set(['midtrans'])
/** Attempts that ask the status API again while it does not confirm a notification yet. */
const CONFIRM_ATTEMPTS = 3

const eventsById = rowsById(webhookEvents, webhookEvents.id)

/** The event's outcome, written with the COMMIT of every event applied: compiled once. */
const markEvent = defineStatement<{ id: string, status: 'applied' | 'ignored', confirmation: string | null }>(db => db.update(webhookEvents)
  .set({ status: sql`${sql.placeholder('status')}`, processedAt: sql`now()`, confirmation: sql`${sql.placeholder('confirmation')}::jsonb` })
  .where(eq(webhookEvents.id, sql.placeholder('id'))))

/** The stored events of a batch of webhook.apply jobs, one prepared query; undefined where one is missing. */
const loadEvents = (db: Database, payloads: Array<{ webhookEventId: string }>) => eventsById(db, payloads.map(payload => payload.webhookEventId))

/**
 * Applies a stored provider event to its order by precedence, under the order's lock, and marks the
 * event applied or ignored in the same fenced transaction. An order we do not know yet (the event
 * overtook it) is retried with backoff, then dead-lettered for an operator.
 *
 * With `confirmer` (the deployment's payment provider), a notification of a provider in
 * confirmedProviders is applied as the provider's status API states it, not as its body does: what
 * the API said is kept on the event, and a state change the API does not confirm is ignored as
 * `unconfirmed`. A reconciled event is the API's answer already.
 */
export function webhookApply(confirmer?: PaymentProvider) {
  return defineJobKind({
    ...webhookApplyJob,
    load: loadEvents,
    async run({ job, signal, commit }, { webhookEventId, orderId }, stored) {
      if (!stored) throw new PermanentJobError(`webhook event ${webhookEventId} not found`)
      let requested = requestedStatusOf[stored.type as PaymentEventType]
      let amount = stored.amount ?? undefined
      let currency = stored.currency ?? undefined
      let confirmation: Record<string, unknown> | null = null
      let unconfirmed = false
      let paidBefore: number | undefined
      if (confirmer && confirmer.name === stored.provider && confirmedProviders.has(stored.provider) && stored.source === 'webhook') {
        const state = await confirmer.readPayment({ orderId, paymentId: stored.paymentId ?? orderId }, signal).catch(error => retryLater(error, confirmer.name))
        confirmation = state
          ? { found: true, providerStatus: state.providerStatus, type: state.type, amount: state.amount ?? null, currency: state.currency ?? null, checkedAt: new Date().toISOString() }
          : { found: false, checkedAt: new Date().toISOString() }
        const confirmed = state ? requestedStatusOf[state.type] : null
        unconfirmed = requested !== null && confirmed === null
        // The status API may lag the notification: ask again with backoff before the event is settled
        // as unconfirmed (its id is spent then; reconciliation still finds a later payment).
        if (unconfirmed && job.attempt < CONFIRM_ATTEMPTS) {
          throw new RetryableJobError(`${stored.provider}'s status API does not confirm ${stored.type} for order ${orderId} yet (it says ${state ? state.providerStatus : 'no such transaction'})`)
        }
        // Unconfirmed, the history keeps what the notification asked for; confirmed, the API's state counts.
        if (!unconfirmed) requested = confirmed
        amount = state?.amount
        currency = state?.currency
        if (!unconfirmed) paidBefore = state?.capturedAmount
      }
      await commit(async (tx) => {
        const context = { jobId: job.id, requestId: stored.requestId, webhookEventId, currency }
        // The API already reads as a refund: the payment it refunds is applied first, or an order whose
        // own payment notification is confirmed as that refund would never be paid.
        const order = paidBefore !== undefined ? await lockOrder(tx, orderId) : undefined
        if (order && !isPaid(order.status)) {
          await applyPaymentStatus(tx, orderId, 'paid', { ...context, amount: paidBefore })
        }
        // The last change: its writes and the event's mark leave with the COMMIT (three round trips in all).
        const change = await applyPaymentStatus(tx, orderId, requested, { ...context, amount, refund: stored.refund ?? undefined, listedRefunds: stored.listedRefunds ?? undefined, unconfirmed, writesAtCommit: true })
        if (!change) throw new RetryableJobError(`order ${orderId} not found (yet) for ${stored.provider} event ${stored.eventId}`)
        writeAtCommit(tx, markEvent(tx, { id: webhookEventId, status: change.changed ? 'applied' : 'ignored', confirmation: confirmation && JSON.stringify(confirmation) }))
      })
    },
  })
}
