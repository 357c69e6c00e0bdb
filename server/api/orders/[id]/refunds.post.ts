import { refundOrder } from '../../../refunds/route'
import { tenantScope } from '../../../../shared/resources'

/** SPEC §4a: a merchant refunds (part of) a paid order, once per Idempotency-Key. */
export default defineEventHandler(async (event) => {
  const tenant = await requireTenantKey(event)
  return refundOrder(event, { tenantId: tenant.id, scope: tenantScope(tenant.id), route: 'POST /api/orders/:id/refunds' })
})
