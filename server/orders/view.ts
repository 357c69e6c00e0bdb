import type { Database } from '../db/client'
import type { orders } from '../db/schema'
import { listRefunds, serializeRefund } from '../refunds/service'
import type { OrderView } from '../../shared/orders'
import { serializeOrder, serializePayment } from './service'

/** GET /api/orders/:id: the order, its payment, and its refunds (oldest first) with the Σ that succeeded. */
export async function orderView(db: Database, order: typeof orders.$inferSelect): Promise<OrderView> {
  const refunds = (await listRefunds(db, order.id)).map(serializeRefund)
  const amountRefunded = refunds.reduce((sum, refund) => refund.status === 'succeeded' ? sum + refund.amount : sum, 0)
  return { ...serializeOrder(order), paymentIntentId: order.paymentIntentId, payment: serializePayment(order), amountRefunded, refunds }
}
