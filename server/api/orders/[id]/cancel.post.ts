import { checkoutSessionIdOf } from '../../../checkout/session'
import { cancelOrderRoute } from '../../../refunds/route'

/**
 * An unpaid order is canceled, by its shop or by the checkout session that placed it
 * (docs/payments-and-refunds.md#refunds-and-cancellation).
 */
export default defineEventHandler(async (event) => {
  const tenant = await requireTenant(event)
  return cancelOrderRoute(event, tenant.id, checkoutSessionIdOf(event))
})
