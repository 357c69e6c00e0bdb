import { useDatabaseHandle } from '../../../../db'
import { readOptionalValidatedJson } from '../../../../http/body'
import { actOnIntent, RefundIntentSchema, requireMockpay } from '../../../../payments/mockpay/service'

/**
 * The merchant refunds (part of) a succeeded payment in the simulated provider's dashboard: the app
 * learns of it from the webhook, as a refund of source `provider`.
 */
export default defineEventHandler(async (event) => {
  requireMockpay()
  const { amount, chaos } = await readOptionalValidatedJson(event, RefundIntentSchema)
  return actOnIntent(useDatabaseHandle().db, getRouterParam(event, 'id')!, 'refund', chaos, { amount })
})
