import { postAdjustment } from '../../../stock/route'

/** Units received or lost, counted once per Idempotency-Key (docs/inventory.md#adjust-a-count-exactly-once). */
export default defineEventHandler(async (event) => {
  const tenant = await requireTenantKey(event)
  return postAdjustment(event, tenant.id)
})
