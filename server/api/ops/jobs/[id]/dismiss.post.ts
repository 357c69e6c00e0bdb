import { useDatabaseHandle } from '../../../../db'
import { readValidatedJson } from '../../../../http/body'
import { metrics } from '../../../../observability/metrics'
import { dismissJob } from '../../../../ops/job-dismissal'
import { DismissSchema } from '../../../../ops/schemas'
import { problem } from '../../../../problems'
import type { OpsJob } from '../../../../../shared/ops-api'

/** Dismisses a dead letter with the operator's reason (server/ops/job-dismissal.ts). */
export default defineEventHandler(async (event) => {
  const id = getRouterParam(event, 'id') ?? ''
  const { reason } = await readValidatedJson(event, DismissSchema)
  const outcome = await dismissJob(useDatabaseHandle().db, { requestId: event.context.requestId }, id, reason)
  if ('dismissed' in outcome) {
    metrics.jobsDismissed.inc({ kind: outcome.dismissed.kind })
    return outcome.dismissed satisfies OpsJob<Date>
  }
  const existing = outcome.refused
  if (!existing) throw problem('not-found', `No job "${id}". List dead letters with GET /api/ops/jobs?status=dead_letter.`)
  const why = existing.status === 'dismissed' ? 'it was dismissed already' : existing.status === 'completed' ? 'it is done' : 'it will still run by itself'
  throw problem('job-not-dismissable', `Job ${id} is ${existing.status}, not dead_letter: ${why}. Only dead letters can be dismissed.`, { extensions: { jobStatus: existing.status } })
})
