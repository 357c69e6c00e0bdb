import { useDatabaseHandle } from '../../../db'
import { readValidatedQuery } from '../../../http/body'
import { listDiscrepancies } from '../../../ledger/discrepancies'
import { opsList } from '../../../ops/list'
import { DiscrepanciesQuery } from '../../../ops/schemas'
import type { OpsLedgerDiscrepancy, OpsList } from '../../../../shared/ops-api'

/** The ledger check's discrepancies, newest first (server/ledger). */
export default defineEventHandler(async (event) => {
  const filter = readValidatedQuery(event, DiscrepanciesQuery)
  return opsList(await listDiscrepancies(useDatabaseHandle().db, filter)) satisfies OpsList<OpsLedgerDiscrepancy<Date>>
})
