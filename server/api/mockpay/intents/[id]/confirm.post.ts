import { useDatabaseHandle } from '../../../../db'
import { readValidatedJson } from '../../../../http/body'
import { wakeWorkers } from '../../../../jobs/wake'
import { actOnIntent, ConfirmIntentSchema, requireMockpay } from '../../../../mockpay/service'

/** The shopper pays (or the payment fails) on the simulated provider's page. */
export default defineEventHandler(async (event) => {
  requireMockpay()
  const { outcome, chaos } = await readValidatedJson(event, ConfirmIntentSchema)
  const handle = useDatabaseHandle()
  const intent = await actOnIntent(handle.db, getRouterParam(event, 'id')!, outcome, chaos)
  if (intent.deliveriesScheduled) wakeWorkers(handle)
  return intent
})
