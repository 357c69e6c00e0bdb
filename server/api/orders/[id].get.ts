import { useDatabaseHandle } from '../../db'
import { OrderIdSchema } from '../../orders/schema'
import { findOrder } from '../../orders/service'
import { orderView } from '../../orders/view'
import { problem } from '../../problems'

export default defineEventHandler(async (event) => {
  const tenant = await requireTenant(event)
  const id = OrderIdSchema.safeParse(getRouterParam(event, 'id'))
  const { db } = useDatabaseHandle()
  const order = id.success ? await findOrder(db, tenant.id, id.data) : undefined
  if (!order) throw problem('not-found', `No order "${getRouterParam(event, 'id')}" exists for your tenant. Check the id returned by POST /api/orders.`)
  // The payment appears once the payment.create_intent job ran; the creation response predates it.
  return orderView(db, order)
})
