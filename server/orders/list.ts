import { and, eq } from 'drizzle-orm'
import type { H3Event } from 'h3'
import { useDatabaseHandle } from '../db'
import { orders } from '../db/schema'
import { readValidatedQuery } from '../http/body'
import { problem } from '../problems'
import { OrderListQuery } from './schema'
import { listOrderViews } from './view'

/** GET /api/orders: the tenant's orders, newest first (docs/api.md#list-orders). */
export async function readOrderList(event: H3Event, tenantId: string) {
  const query = readValidatedQuery(event, OrderListQuery)
  const db = useDatabaseHandle().db
  let startingAfter: { id: string, createdAt: Date } | undefined
  if (query.starting_after !== undefined) {
    const [cursor] = await db.select({ id: orders.id, createdAt: orders.createdAt }).from(orders)
      .where(and(eq(orders.tenantId, tenantId), eq(orders.id, query.starting_after)))
    if (!cursor) {
      throw problem('validation-failed', `No order "${query.starting_after}" exists for your tenant. Pass the id of the last order of a page you were given, or leave out starting_after to start from the newest.`, {
        extensions: { errors: [{ path: 'starting_after', message: 'unknown order id' }] },
      })
    }
    startingAfter = cursor
  }
  const page = { status: query.status, createdGte: query.created_gte, createdLt: query.created_lt, limit: query.limit, startingAfter }
  return { object: 'list' as const, ...await listOrderViews(db, page, { tenantId }) }
}
