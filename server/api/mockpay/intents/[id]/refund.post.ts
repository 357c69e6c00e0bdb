import { useDatabaseHandle } from '../../../../db'
import { readOptionalValidatedJson } from '../../../../http/body'
import { wakeWorkers } from '../../../../jobs/wake'
import { actOnIntent, RefundIntentSchema, requireMockpay } from '../../../../mockpay/service'

/** The merchant refunds a succeeded payment on the simulated provider. */
export default defineEventHandler(async (event) => {
  requireMockpay()
  const { chaos } = await readOptionalValidatedJson(event, RefundIntentSchema)
  const handle = useDatabaseHandle()
  const intent = await actOnIntent(handle.db, getRouterParam(event, 'id')!, 'refund', chaos)
  if (intent.deliveriesScheduled) wakeWorkers(handle)
  return intent
})
