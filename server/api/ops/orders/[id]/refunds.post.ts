import { useDatabaseHandle } from '../../../../db'
import { findOrderOfAnyTenant } from '../../../../orders/service'
import { problem } from '../../../../problems'
import { refundOrder } from '../../../../refunds/route'
import { OPS_SCOPE } from '../../../../../shared/resources'

/** An operator refunds an order from the ops console: the same refund as the shop's, kept in operator_actions. */
export default defineEventHandler(async (event) => {
  const order = await findOrderOfAnyTenant(useDatabaseHandle().db, getRouterParam(event, 'id'))
  if (!order) throw problem('not-found', `No order "${getRouterParam(event, 'id')}". Look the order up in the evidence locker by its id.`)
  return refundOrder(event, { tenantId: order.tenantId, scope: OPS_SCOPE, route: 'POST /api/ops/orders/:id/refunds', operator: true })
})
