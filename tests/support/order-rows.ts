import postgres from 'postgres'
import { tenantScope } from '../../shared/resources'

/**
 * Reads what the app actually wrote, straight from the test database: the assertions about
 * "exactly once" are about rows, not about what the HTTP answers claim.
 */

export interface OrderRow { id: string, cartId: string, idempotencyKey: string | null }
export interface IdempotencyRow {
  key: string
  status: string
  attempts: number
  resourceId: string | null
  responseStatus: number | null
  /** A lease token or expiry is set: a leased-mode claim. Atomic records are stored finished, without one. */
  leased: boolean
}

export interface OrderRows {
  orders: (tenantId: string) => Promise<OrderRow[]>
  ordersForCart: (tenantId: string, cartId: string) => Promise<OrderRow[]>
  records: (tenantId: string) => Promise<IdempotencyRow[]>
  record: (tenantId: string, key: string) => Promise<IdempotencyRow | undefined>
  /** The request log of one key, oldest first: what each attempt did and what status went out. */
  requestLog: (key: string) => Promise<Array<{ outcome: string | null, status: number }>>
  close: () => Promise<void>
}

export function openOrderRows(databaseUrl: string): OrderRows {
  const sql = postgres(databaseUrl, { max: 2, onnotice: () => {} })
  // A fresh fragment per query: postgres.js fragments are single-use query objects.
  const recordColumns = () => sql`key, status, attempts, resource_id as "resourceId", response_status as "responseStatus",
    (lease_token is not null or lease_expires_at is not null) as leased`
  return {
    orders: tenantId => sql<OrderRow[]>`
      select id, cart_id as "cartId", idempotency_key as "idempotencyKey" from orders where tenant_id = ${tenantId}`,
    ordersForCart: (tenantId, cartId) => sql<OrderRow[]>`
      select id, cart_id as "cartId", idempotency_key as "idempotencyKey" from orders
      where tenant_id = ${tenantId} and cart_id = ${cartId}`,
    records: tenantId => sql<IdempotencyRow[]>`
      select ${recordColumns()} from idempotency_records where scope = ${tenantScope(tenantId)}`,
    record: async (tenantId, key) => (await sql<IdempotencyRow[]>`
      select ${recordColumns()} from idempotency_records where scope = ${tenantScope(tenantId)} and key = ${key}`)[0],
    // By arrival, as the evidence timeline reads them: rows are written in batches per instance, and a
    // dropped request's row only once its handler ended, possibly after its retry's.
    requestLog: key => sql<Array<{ outcome: string | null, status: number }>>`
      select outcome, status from request_log where idempotency_key = ${key} order by created_at, id`,
    close: () => sql.end({ timeout: 5 }),
  }
}
