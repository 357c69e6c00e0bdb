import { useDatabaseHandle } from '../../../db'
import { findOrderOfAnyTenant } from '../../../orders/service'
import { orderView } from '../../../orders/view'
import { problem } from '../../../problems'

/** The order as its shop reads it, with its tenant: what the ops console's order view shows. */
export default defineEventHandler(async (event) => {
  const { db } = useDatabaseHandle()
  const order = await findOrderOfAnyTenant(db, getRouterParam(event, 'id'))
  if (!order) throw problem('not-found', `No order "${getRouterParam(event, 'id')}". Look the order up in the evidence locker by its id.`)
  return { ...await orderView(db, order), tenantId: order.tenantId }
})
