import { getTableColumns, sql } from 'drizzle-orm'
import { type Database, queryPrepared } from 'nuxt-idempotency/db'
import { orders } from '../../db/schema'
import { defineStatement, mapRow } from 'nuxt-idempotency/db'
import { RetryableJobError } from '../errors'
import type { OrderJobPayload } from '../types'

export type Order = typeof orders.$inferSelect

const orderColumns = getTableColumns(orders)
const selectOrders = defineStatement<{ ids: string }>(db => db.select().from(orders)
  .where(sql`${orders.id} = any(string_to_array(${sql.placeholder('ids')}, ','))`))

/** The orders of a batch of order jobs, one prepared query; undefined where an order is missing. */
export async function loadOrders(db: Database, payloads: OrderJobPayload[]): Promise<Array<Order | undefined>> {
  const rows = await queryPrepared(db, selectOrders(db, { ids: payloads.map(payload => payload.orderId).join(',') }))
  const byId = new Map(rows.map(row => [row.id as string, mapRow(orderColumns, row) as Order]))
  return payloads.map(payload => byId.get(payload.orderId))
}

/** A missing order is retryable (its transaction may not be visible yet), then dead-letters. */
export function requireOrder(order: Order | undefined, orderId: string): Order {
  if (!order) throw new RetryableJobError(`order ${orderId} not found`)
  return order
}
