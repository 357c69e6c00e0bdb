import { ensureDemoTenant, DEMO_CURRENCY, DEMO_TENANT, demoCatalogue } from '../../checkout/demo-store'
import { requireCheckoutDemo, startCheckoutSession } from '../../checkout/session'
import { useConfig } from '../../config'
import { useDatabaseHandle } from '../../db'

/** What the checkout page needs to start: a session cookie for the demo store, and the store. */
export default defineEventHandler(async (event) => {
  requireCheckoutDemo()
  await ensureDemoTenant(useDatabaseHandle().db)
  await startCheckoutSession(event)
  const config = useConfig()
  return {
    tenant: DEMO_TENANT,
    currency: DEMO_CURRENCY,
    catalogue: demoCatalogue,
    mockpay: config.MOCKPAY_ENABLED,
    faults: config.FAULTS_ENABLED,
  }
})
