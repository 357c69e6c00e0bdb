import { useDatabaseHandle } from '../../db'
import { readValidatedQuery } from '../../http/body'
import { listTrackedStock } from '../../ops/inventory'
import { opsList } from '../../ops/list'
import { InventoryQuery } from '../../ops/schemas'
import type { OpsList, OpsStock } from '../../../shared/ops-api'

/** Tracked SKUs of every tenant (or one), the most recently moved first. */
export default defineEventHandler(async (event) => {
  const filter = readValidatedQuery(event, InventoryQuery)
  return opsList(await listTrackedStock(useDatabaseHandle().db, filter)) satisfies OpsList<OpsStock>
})
