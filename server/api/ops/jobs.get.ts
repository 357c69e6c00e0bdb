import { z } from 'zod'
import { useDatabaseHandle } from '../../db'
import { jobStatuses } from '../../db/schema'
import { readValidatedQuery } from '../../http/body'
import { createJobStore } from '../../jobs/store'
import { listQuery, opsList } from '../../ops/list'
import type { OpsJob, OpsList } from '../../../shared/ops-api'

const JobsQuery = listQuery({
  status: z.enum(jobStatuses).optional(),
  kind: z.string().min(1).max(100).optional(),
  resourceId: z.string().min(1).max(200).optional(),
})

export default defineEventHandler(async (event) => {
  const filter = readValidatedQuery(event, JobsQuery)
  const jobs = await createJobStore(useDatabaseHandle().db).list(filter)
  return opsList(jobs) satisfies OpsList<OpsJob<Date>>
})
