import type { Database } from '@idempotent-checkout/db-kit'
import { orders } from '../../db/schema'
import { RetryableJobError } from '../../jobs/errors'
import type { OrderJobPayload } from '../job-types'
import { rowsById } from '../../db/rows-by-id'

export type Order = typeof orders.$inferSelect

const ordersById = rowsById(orders, orders.id)

/** The orders of a batch of order jobs, one prepared query; undefined where an order is missing. */
export const loadOrders = (db: Database, payloads: OrderJobPayload[]): Promise<Array<Order | undefined>> =>
  ordersById(db, payloads.map(payload => payload.orderId))

/** A missing order is retryable (its transaction may not be visible yet), then dead-letters. */
export function requireOrder(order: Order | undefined, orderId: string): Order {
  if (!order) throw new RetryableJobError(`order ${orderId} not found`)
  return order
}
