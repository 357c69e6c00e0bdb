import { z } from 'zod'
import { useDatabaseHandle } from '../../db'
import { jobStatuses } from '../../db/schema'
import { readValidatedQuery } from '../../http/body'
import { createJobStore } from '../../jobs/store'
import type { OpsJob, OpsList } from '../../../shared/ops-api'

const JobsQuery = z.object({
  status: z.enum(jobStatuses).optional(),
  kind: z.string().min(1).max(100).optional(),
  resourceId: z.string().min(1).max(200).optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
}).strict()

export default defineEventHandler(async (event) => {
  requireOps(event)
  const filter = readValidatedQuery(event, JobsQuery)
  const jobs = await createJobStore(useDatabaseHandle().db).list(filter)
  return { object: 'list', data: jobs } satisfies OpsList<OpsJob<Date>>
})
