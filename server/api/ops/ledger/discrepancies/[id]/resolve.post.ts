import { useDatabaseHandle } from '../../../../../db'
import { readValidatedJson } from '../../../../../http/body'
import { resolveDiscrepancy } from '../../../../../ledger/discrepancies'
import { ResolveDiscrepancySchema } from '../../../../../ops/schemas'
import { problem } from '../../../../../problems'
import type { OpsLedgerDiscrepancy } from '../../../../../../shared/ops-api'

/** An operator resolves an open ledger discrepancy with a note (server/ledger/discrepancies.ts); audited in operator_actions. */
export default defineEventHandler(async (event) => {
  const id = getRouterParam(event, 'id') ?? ''
  const resolution = await readValidatedJson(event, ResolveDiscrepancySchema)
  const outcome = await resolveDiscrepancy(useDatabaseHandle().db, { requestId: event.context.requestId }, id, resolution)
  if ('resolved' in outcome) return outcome.resolved satisfies OpsLedgerDiscrepancy<Date>
  if (!outcome.refused) throw problem('not-found', `No ledger discrepancy "${id}". List them with GET /api/ops/ledger/discrepancies.`)
  throw problem('discrepancy-not-open', `Discrepancy ${id} was resolved already${outcome.refused.resolvedBy ? ` by ${outcome.refused.resolvedBy}` : ' by a later ledger check'}: nothing changed. List the open ones with GET /api/ops/ledger/discrepancies?status=open.`, { extensions: { resolvedBy: outcome.refused.resolvedBy } })
})
