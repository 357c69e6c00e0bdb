import { getRouterParam, type H3Event } from 'h3'
import { useConfig } from '../config'
import { useDatabaseHandle } from '../db'
import { readOptionalValidatedJson } from '../http/body'
import { requireIdempotencyKey } from 'nuxt-idempotency/server'
import { runCheckoutIdempotent } from '../http/idempotent'
import { OrderIdSchema } from '../orders/schema'
import { findOrderView } from '../orders/view'
import { recordOperatorAction } from '../ops/operator-actions'
import { problem } from '../problems'
import { tenantScope } from '../../shared/resources'
import { CreateRefundSchema } from './schema'
import { checkRefundAmount, requestRefund, serializeRefund } from './service'
import { cancelOrder } from '../orders/cancel'

/**
 * What the refund and cancel routes share: the order id from the path, the key, the body, and the
 * shared idempotency layer in atomic mode with execute(tx) — the decision reads the order under its
 * row lock, and the refund (or the cancel), its job and the stored response commit in one transaction.
 */

function orderIdOf(event: H3Event): string {
  const id = OrderIdSchema.safeParse(getRouterParam(event, 'id'))
  if (!id.success) throw problem('not-found', `No order "${getRouterParam(event, 'id')}" exists for your tenant. Check the id returned by POST /api/orders.`)
  return id.data
}

interface RefundCaller {
  tenantId: string
  /** `tenant:<id>` for the shop's key; the operators' own scope for the ops console. */
  scope: string
  route: string
  /** An operator's refund is kept in operator_actions, in the refund's transaction. */
  operator?: boolean
}

/** POST /api/orders/:id/refunds and the ops console's refund: one refund per key. */
export async function refundOrder(event: H3Event, caller: RefundCaller) {
  const { tenantId } = caller
  const orderId = orderIdOf(event)
  const key = requireIdempotencyKey(event)
  const input = await readOptionalValidatedJson(event, CreateRefundSchema)
  await checkRefundAmount(useDatabaseHandle().db, { tenantId, orderId }, input)
  const reply = await runCheckoutIdempotent(event, {
    mode: 'atomic',
    scope: caller.scope,
    route: caller.route,
    key,
    // The order is part of the request: the same key for another order's refund is another request.
    payload: { orderId, ...input },
    ttlSeconds: useConfig().IDEMPOTENCY_TTL_SECONDS,
    execute: async (tx) => {
      const refund = await requestRefund(tx, { tenantId, orderId, source: 'api', idempotencyKey: key, requestId: event.context.requestId }, input)
      if (caller.operator) {
        await recordOperatorAction(tx, { requestId: event.context.requestId }, {
          action: 'refund.created', tenantId, subjectId: refund.id, detail: { orderId, amount: refund.amount, currency: refund.currency, reason: refund.reason, idempotencyKey: key },
        })
      }
      return {
        status: 201,
        body: serializeRefund(refund),
        headers: { Location: `/api/orders/${orderId}/refunds/${refund.id}` },
        resourceType: 'refund',
        resourceId: refund.id,
      }
    },
  })
  return reply.body
}

/** POST /api/orders/:id/cancel: 200 with the order as the cancel left it. */
export async function cancelOrderRoute(event: H3Event, tenantId: string, checkoutSessionId: string | undefined) {
  const orderId = orderIdOf(event)
  const key = requireIdempotencyKey(event)
  const reply = await runCheckoutIdempotent(event, {
    mode: 'atomic',
    scope: tenantScope(tenantId),
    route: 'POST /api/orders/:id/cancel',
    key,
    payload: { orderId },
    ttlSeconds: useConfig().IDEMPOTENCY_TTL_SECONDS,
    execute: async (tx) => {
      await cancelOrder(tx, { tenantId, orderId, checkoutSessionId, idempotencyKey: key, requestId: event.context.requestId })
      const { tenantId: _, ...order } = (await findOrderView(tx, orderId, { tenantId }))!
      return { status: 200, body: order, resourceType: 'order', resourceId: orderId }
    },
  })
  return reply.body
}
