import { useDatabaseHandle } from '../../../../db'
import { readOptionalValidatedJson } from '../../../../http/body'
import { actOnIntent, RefundIntentSchema, requireMockpay } from '../../../../mockpay/service'

/** The merchant refunds a succeeded payment on the simulated provider. */
export default defineEventHandler(async (event) => {
  requireMockpay()
  const { chaos } = await readOptionalValidatedJson(event, RefundIntentSchema)
  return actOnIntent(useDatabaseHandle().db, getRouterParam(event, 'id')!, 'refund', chaos)
})
