import { refundOrder } from '../../../refunds/route'
import { tenantScope } from '../../../../shared/resources'

/**
 * A merchant refunds (part of) a paid order, once per Idempotency-Key
 * (docs/payments-and-refunds.md#refunds-and-cancellation).
 */
export default defineEventHandler(async (event) => {
  const tenant = await requireTenantKey(event)
  return refundOrder(event, { tenantId: tenant.id, scope: tenantScope(tenant.id), route: 'POST /api/orders/:id/refunds' })
})
