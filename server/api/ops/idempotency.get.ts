import { z } from 'zod'
import { useDatabaseHandle } from '../../db'
import { idempotencyStatuses } from '../../db/schema'
import { readValidatedQuery } from '../../http/body'
import { listIdempotencyRecords } from '../../ops/records'
import type { OpsIdempotencyRecord, OpsList } from '../../../shared/ops-api'

const RecordsQuery = z.object({
  tenant: z.string().min(1).max(200).optional(),
  scope: z.string().min(1).max(300).optional(),
  status: z.enum(idempotencyStatuses).optional(),
  key: z.string().min(1).max(255).optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
}).strict()

export default defineEventHandler(async (event) => {
  requireOps(event)
  const filter = readValidatedQuery(event, RecordsQuery)
  return { object: 'list', data: await listIdempotencyRecords(useDatabaseHandle().db, filter) } satisfies OpsList<OpsIdempotencyRecord<Date>>
})
