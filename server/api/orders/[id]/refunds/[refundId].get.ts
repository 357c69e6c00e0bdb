import { useDatabaseHandle } from '../../../../db'
import { OrderIdSchema } from '../../../../orders/schema'
import { problem } from '../../../../problems'
import { RefundIdSchema } from '../../../../refunds/schema'
import { findRefund, serializeRefund } from '../../../../refunds/service'
import { checkoutSessionIdOf } from '../../../../checkout/session'

export default defineEventHandler(async (event) => {
  const tenant = await requireTenant(event)
  const orderId = OrderIdSchema.safeParse(getRouterParam(event, 'id'))
  const refundId = RefundIdSchema.safeParse(getRouterParam(event, 'refundId'))
  const refund = orderId.success && refundId.success ? await findRefund(useDatabaseHandle().db, { tenantId: tenant.id, checkoutSessionId: checkoutSessionIdOf(event) }, orderId.data, refundId.data) : undefined
  if (!refund) {
    const orderParam = getRouterParam(event, 'id') ?? ''
    throw problem('not-found', `No refund "${getRouterParam(event, 'refundId')}" of order "${orderParam}" exists for your tenant. List the order's refunds with GET /api/orders/${encodeURIComponent(orderParam)}.`)
  }
  return serializeRefund(refund)
})
