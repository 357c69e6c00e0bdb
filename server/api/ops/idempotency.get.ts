import { z } from 'zod'
import { useDatabaseHandle } from '../../db'
import { idempotencyStatuses } from '../../db/schema'
import { readValidatedQuery } from '../../http/body'
import { listQuery, opsList } from '../../ops/list'
import { listIdempotencyRecords } from '../../ops/records'
import type { OpsIdempotencyRecord, OpsList } from '../../../shared/ops-api'

const RecordsQuery = listQuery({
  tenant: z.string().min(1).max(200).optional(),
  scope: z.string().min(1).max(300).optional(),
  status: z.enum(idempotencyStatuses).optional(),
  key: z.string().min(1).max(255).optional(),
})

export default defineEventHandler(async (event) => {
  const filter = readValidatedQuery(event, RecordsQuery)
  return opsList(await listIdempotencyRecords(useDatabaseHandle().db, filter)) satisfies OpsList<OpsIdempotencyRecord<Date>>
})
