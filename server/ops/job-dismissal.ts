import { eq } from 'drizzle-orm'
import type { Database } from 'nuxt-idempotency/db'
import { orders } from '../db/schema'
import { createJobStore, type JobRow } from '../jobs/store'
import { orderIdOfResource } from '../../shared/resources'
import { type OperatorOrigin, recordOperatorAction } from './operator-actions'

/** The dismissed job, or why not: the job as it is (undefined when there is none). */
export type DismissalOutcome = { dismissed: JobRow } | { refused: JobRow | undefined }

/**
 * Dismisses a dead letter that can never succeed, with the operator's reason: it is never run,
 * rescued or redriven again. The dismissal and its `job.dismissed` operator action (under the
 * tenant of the job's order, when it has one) commit together.
 */
export function dismissJob(db: Database, origin: OperatorOrigin, id: string, reason: string): Promise<DismissalOutcome> {
  return db.transaction(async (tx) => {
    const store = createJobStore(tx)
    const job = await store.dismiss(id, reason)
    if (!job) return { refused: await store.find(id) }
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
