import { useDatabaseHandle } from '../../db'
import { OrderIdSchema } from '../../orders/schema'
import { findOrder, serializeOrder, serializePayment } from '../../orders/service'
import { problem } from '../../problems'
import type { OrderView } from '../../../shared/orders'

export default defineEventHandler(async (event) => {
  const tenant = await requireTenant(event)
  const id = OrderIdSchema.safeParse(getRouterParam(event, 'id'))
  const order = id.success ? await findOrder(useDatabaseHandle().db, tenant.id, id.data) : undefined
  if (!order) throw problem('not-found', `No order "${getRouterParam(event, 'id')}" exists for your tenant. Check the id returned by POST /api/orders.`)
  // The payment appears once the payment.create_intent job ran; the creation response predates it.
  return { ...serializeOrder(order), paymentIntentId: order.paymentIntentId, payment: serializePayment(order) } satisfies OrderView
})
