import { useConfig } from '../config'
import { readValidatedJson } from '../http/body'
import { requireIdempotencyKey } from 'nuxt-idempotency/server'
import { runCheckoutIdempotent } from '../http/idempotent'
import { CreateOrderSchema } from '../orders/schema'
import { planOrder } from '../orders/service'
import { currencyProblem } from '../payments/currencies'
import { problem } from '../problems'
import { tenantScope } from '../../shared/resources'

export default defineEventHandler(async (event) => {
  const tenant = await requireTenant(event)
  const key = requireIdempotencyKey(event)
  const order = await readValidatedJson(event, CreateOrderSchema)
  // Before the idempotency layer: nothing is stored, so the same key may carry a corrected order.
  const unpayable = currencyProblem(useConfig().PAYMENT_PROVIDER, order.amount, order.currency)
  if (unpayable) throw problem('currency-not-supported', unpayable)
  const reply = await runCheckoutIdempotent(event, {
    mode: 'atomic',
    scope: tenantScope(tenant.id),
    route: 'POST /api/orders',
    key,
    payload: order,
    ttlSeconds: useConfig().IDEMPOTENCY_TTL_SECONDS,
    plan: (db, now) => planOrder(db, now, { tenantId: tenant.id, idempotencyKey: key, requestId: event.context.requestId, checkoutSessionId: event.context.checkoutSessionId }, order),
  })
  return reply.body
})
