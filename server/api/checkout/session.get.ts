import { DEMO_CURRENCY, DEMO_TENANT, openDemoStore } from '../../checkout/demo-store'
import { requireCheckoutDemo, startCheckoutSession } from '../../checkout/session'
import { useConfig } from '../../config'
import { useDatabaseHandle } from '../../db'

/** What the checkout page needs to start: a session cookie for the demo store, and the store with what is available now. */
export default defineEventHandler(async (event) => {
  requireCheckoutDemo()
  const catalogue = await openDemoStore(useDatabaseHandle().db)
  await startCheckoutSession(event)
  const config = useConfig()
  return {
    tenant: DEMO_TENANT,
    currency: DEMO_CURRENCY,
    catalogue,
    mockpay: config.MOCKPAY_ENABLED,
    faults: config.FAULTS_ENABLED,
  }
})
