import { useDatabaseHandle } from '../../db'
import { OrderIdSchema } from '../../orders/schema'
import { findOrderView } from '../../orders/view'
import { checkoutSessionIdOf } from '../../checkout/session'
import { problem } from '../../problems'
import type { OrderView } from '../../../shared/orders'

export default defineEventHandler(async (event) => {
  const tenant = await requireTenant(event)
  const id = OrderIdSchema.safeParse(getRouterParam(event, 'id'))
  // A checkout session reads only the orders it placed, as only it may cancel them.
  const found = id.success ? await findOrderView(useDatabaseHandle().db, id.data, { tenantId: tenant.id, checkoutSessionId: checkoutSessionIdOf(event) }) : undefined
  if (!found) throw problem('not-found', `No order "${getRouterParam(event, 'id')}" exists for your tenant. Check the id returned by POST /api/orders.`)
  // The payment appears once the payment.create_intent job ran; the creation response predates it.
  const { tenantId: _, ...order } = found
  return order satisfies OrderView
})
