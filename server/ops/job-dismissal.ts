import { eq } from 'drizzle-orm'
import type { Database } from '@idempotent-checkout/db-kit'
import { orders, refunds } from '../db/schema'
import { createJobStore, type JobRow } from '../jobs/store'
import { paymentRefundJob } from '../orders/job-types'
import { applyRefundOutcome } from '../orders/payment-state'
import { orderIdOfResource } from '../../shared/resources'
import { type OperatorOrigin, recordOperatorAction } from './operator-actions'

/** The dismissed job, or why not: the job as it is (undefined when there is none). */
export type DismissalOutcome = { dismissed: JobRow } | { refused: JobRow | undefined }

/**
 * Dismisses a dead letter that can never succeed, with the operator's reason: it is never run,
 * rescued or redriven again. The dismissal and its `job.dismissed` operator action (under the
 * tenant of the job's order, when it has one) commit together, and so does the end of the refund a
 * dismissed payment.refund job was to make (see failRefundOfDismissedJob).
 */
export function dismissJob(db: Database, origin: OperatorOrigin, id: string, reason: string): Promise<DismissalOutcome> {
  return db.transaction(async (tx) => {
    const store = createJobStore(tx)
    const job = await store.dismiss(id, reason)
    if (!job) return { refused: await store.find(id) }
    if (job.kind === paymentRefundJob.kind) await failRefundOfDismissedJob(tx, job, origin, reason)
    const orderId = orderIdOfResource(job.resourceId)
    const [order] = orderId ? await tx.select({ tenantId: orders.tenantId }).from(orders).where(eq(orders.id, orderId)) : []
    await recordOperatorAction(tx, origin, {
      action: 'job.dismissed',
      tenantId: order?.tenantId ?? null,
      subjectId: job.id,
      detail: { reason, kind: job.kind, resourceId: job.resourceId },
    })
    return { dismissed: job }
  })
}

/**
 * Nothing will ask the provider for the refund once its job is dismissed: a refund still pending that
 * the provider never named (no provider id) was never made there, so it fails, which frees its amount
 * for another refund, with a history row and no notice to the shopper. One the provider named is left
 * pending: its webhook or reconciliation settles it.
 */
async function failRefundOfDismissedJob(tx: Database, job: JobRow, origin: OperatorOrigin, reason: string): Promise<void> {
  const payload = paymentRefundJob.payload.safeParse(job.payload)
  if (!payload.success) return
  const { orderId, refundId } = payload.data
  const [refund] = await tx.select({ status: refunds.status, providerRefundId: refunds.providerRefundId }).from(refunds).where(eq(refunds.id, refundId))
  if (refund?.status !== 'pending' || refund.providerRefundId) return
  await applyRefundOutcome(tx, orderId, refundId, { status: 'failed', failure: `job_dismissed: ${reason}` }, { requestId: origin.requestId ?? undefined })
}
