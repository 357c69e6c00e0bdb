import { useDatabaseHandle } from '../../db'
import { readValidatedQuery } from '../../http/body'
import { opsList } from '../../ops/list'
import { listIdempotencyRecords } from '../../ops/records'
import { RecordsQuery } from '../../ops/schemas'
import type { OpsIdempotencyRecord, OpsList } from '../../../shared/ops-api'

export default defineEventHandler(async (event) => {
  const filter = readValidatedQuery(event, RecordsQuery)
  return opsList(await listIdempotencyRecords(useDatabaseHandle().db, filter)) satisfies OpsList<OpsIdempotencyRecord<Date>>
})
