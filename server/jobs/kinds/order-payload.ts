import { eq } from 'drizzle-orm'
import { z } from 'zod'
import type { Database } from '../../db/client'
import { orders } from '../../db/schema'
import { RetryableJobError } from '../errors'

export const OrderJobPayload = z.object({ orderId: z.string().min(1).max(64) }).strict()
export type OrderJobPayload = z.infer<typeof OrderJobPayload>

export const orderResource = (payload: OrderJobPayload) => `order:${payload.orderId}`

/** The job's order; missing is retryable (its transaction may not be visible yet), then dead-letters. */
export async function loadOrder(db: Database, orderId: string) {
  const [order] = await db.select().from(orders).where(eq(orders.id, orderId))
  if (!order) throw new RetryableJobError(`order ${orderId} not found`)
  return order
}
