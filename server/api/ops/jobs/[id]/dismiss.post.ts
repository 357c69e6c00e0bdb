import { eq } from 'drizzle-orm'
import { z } from 'zod'
import { useDatabaseHandle } from '../../../../db'
import { orders } from '../../../../db/schema'
import { readValidatedJson } from '../../../../http/body'
import { createJobStore } from '../../../../jobs/store'
import { metrics } from '../../../../observability/metrics'
import { recordOperatorAction } from '../../../../ops/operator-actions'
import { problem } from '../../../../problems'
import type { OpsJob } from '../../../../../shared/ops-api'
import { orderIdOfResource } from '../../../../../shared/resources'

const DismissSchema = z.object({ reason: z.string().trim().min(1).max(500) })

/**
 * Dismisses a dead letter that can never succeed, with the operator's reason: it is never run,
 * rescued or redriven again. The dismissal and its operator action commit together.
 */
export default defineEventHandler(async (event) => {
  const id = getRouterParam(event, 'id') ?? ''
  const { reason } = await readValidatedJson(event, DismissSchema)
  const outcome = await useDatabaseHandle().db.transaction(async (tx) => {
    const store = createJobStore(tx)
    const job = await store.dismiss(id, reason)
    if (!job) return { existing: await store.find(id) }
    const orderId = orderIdOfResource(job.resourceId)
    const [order] = orderId ? await tx.select({ tenantId: orders.tenantId }).from(orders).where(eq(orders.id, orderId)) : []
    await recordOperatorAction(tx, { requestId: event.context.requestId }, {
      action: 'job.dismissed',
      tenantId: order?.tenantId ?? null,
      subjectId: job.id,
      detail: { reason, kind: job.kind, resourceId: job.resourceId },
    })
    return { job }
  })
  if (outcome.job) {
    metrics.jobsDismissed.inc({ kind: outcome.job.kind })
    return outcome.job satisfies OpsJob<Date>
  }
  const { existing } = outcome
  if (!existing) throw problem('not-found', `No job "${id}". List dead letters with GET /api/ops/jobs?status=dead_letter.`)
  const why = existing.status === 'dismissed' ? 'it was dismissed already' : existing.status === 'completed' ? 'it is done' : 'it will still run by itself'
  throw problem('job-not-dismissable', `Job ${id} is ${existing.status}, not dead_letter: ${why}. Only dead letters can be dismissed.`, { extensions: { jobStatus: existing.status } })
})
