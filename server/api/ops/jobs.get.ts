import { useDatabaseHandle } from '../../db'
import { readValidatedQuery } from '../../http/body'
import { createJobStore } from '../../jobs/store'
import { opsList } from '../../ops/list'
import { JobsQuery } from '../../ops/schemas'
import type { OpsJob, OpsList } from '../../../shared/ops-api'

export default defineEventHandler(async (event) => {
  const filter = readValidatedQuery(event, JobsQuery)
  const jobs = await createJobStore(useDatabaseHandle().db).list(filter)
  return opsList(jobs) satisfies OpsList<OpsJob<Date>>
})
