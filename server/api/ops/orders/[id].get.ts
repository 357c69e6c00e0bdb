import { useDatabaseHandle } from '../../../db'
import { OrderIdSchema } from '../../../orders/schema'
import { findOrderView } from '../../../orders/view'
import { problem } from '../../../problems'

/** The order as its shop reads it, with its tenant: what the ops console's order view shows. */
export default defineEventHandler(async (event) => {
  const id = OrderIdSchema.safeParse(getRouterParam(event, 'id'))
  const found = id.success ? await findOrderView(useDatabaseHandle().db, id.data, { forOperators: true }) : undefined
  if (!found) throw problem('not-found', `No order "${getRouterParam(event, 'id')}". Look the order up in the evidence locker by its id.`)
  return found
})
