import { eq, sql } from 'drizzle-orm'
import { z } from 'zod'
import { webhookEvents } from '../../db/schema'
import { applyPaymentStatus } from '../../orders/payment-state'
import { requestedStatusOf, type PaymentEventType } from '../../webhooks/types'
import { PermanentJobError, RetryableJobError } from '../errors'
import { defineJobKind } from '../kind'

const WebhookApplyPayload = z.object({ webhookEventId: z.string().min(1), orderId: z.string().min(1) }).strict()

/**
 * Applies a stored provider event to its order by precedence, under the order's lock, and marks the
 * event applied or ignored in the same fenced transaction. An order we do not know yet (the event
 * overtook it) is retried with backoff, then dead-lettered for an operator.
 */
export const webhookApply = defineJobKind({
  kind: 'webhook.apply',
  payload: WebhookApplyPayload,
  resource: payload => `order:${payload.orderId}`,
  async run({ db, job, commit }, { webhookEventId, orderId }) {
    const [stored] = await db.select().from(webhookEvents).where(eq(webhookEvents.id, webhookEventId))
    if (!stored) throw new PermanentJobError(`webhook event ${webhookEventId} not found`)
    await commit(async (tx) => {
      const change = await applyPaymentStatus(tx, orderId, requestedStatusOf[stored.type as PaymentEventType], {
        jobId: job.id,
        requestId: stored.requestId,
        webhookEventId,
        amount: stored.amount ?? undefined,
        currency: stored.currency ?? undefined,
      })
      if (!change) throw new RetryableJobError(`order ${orderId} not found (yet) for ${stored.provider} event ${stored.eventId}`)
      await tx.update(webhookEvents).set({ status: change.changed ? 'applied' : 'ignored', processedAt: sql`now()` })
        .where(eq(webhookEvents.id, webhookEventId))
    })
  },
})
