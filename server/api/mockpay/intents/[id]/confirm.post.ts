import { useDatabaseHandle } from '../../../../db'
import { readValidatedJson } from '../../../../http/body'
import { actOnIntent, ConfirmIntentSchema, requireMockpay } from '../../../../payments/mockpay/service'

/** The shopper pays (or the payment fails) on the simulated provider's page. */
export default defineEventHandler(async (event) => {
  requireMockpay()
  const { outcome, chaos } = await readValidatedJson(event, ConfirmIntentSchema)
  return actOnIntent(useDatabaseHandle().db, getRouterParam(event, 'id')!, outcome, chaos)
})
