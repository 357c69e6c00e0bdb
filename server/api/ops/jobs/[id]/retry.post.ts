import { useDatabaseHandle } from '../../../../db'
import { createJobStore } from '../../../../jobs/store'
import { problem } from '../../../../problems'
import type { OpsJob } from '../../../../../shared/ops-api'

/** Redrives a dead letter: queued now, with a fresh set of attempts and its error history kept. */
export default defineEventHandler(async (event) => {
  const id = getRouterParam(event, 'id') ?? ''
  const handle = useDatabaseHandle()
  const store = createJobStore(handle.db)
  const job = await store.redrive(id)
  if (job) return job satisfies OpsJob<Date>
  const existing = await store.find(id)
  if (!existing) throw problem('not-found', `No job "${id}". List jobs with GET /api/ops/jobs?status=dead_letter.`)
  throw problem('job-not-retryable', `Job ${id} is ${existing.status}, not dead_letter: ${existing.status === 'completed' ? 'it is done' : existing.status === 'dismissed' ? `it was dismissed (${existing.dismissedReason ?? 'no reason'}) and stays so` : 'it will run by itself'}.`, { extensions: { jobStatus: existing.status } })
})
