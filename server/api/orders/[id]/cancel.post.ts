import { checkoutSessionIdOf } from '../../../checkout/session'
import { cancelOrderRoute } from '../../../refunds/route'

/** SPEC §4a: an unpaid order is canceled, by its shop or by the checkout session that placed it. */
export default defineEventHandler(async (event) => {
  const tenant = await requireTenant(event)
  return cancelOrderRoute(event, tenant.id, checkoutSessionIdOf(event))
})
