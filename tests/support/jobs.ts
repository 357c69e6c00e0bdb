import postgres from 'postgres'
import type { Database, DatabaseHandle } from '@idempotent-checkout/db-kit'
import { openDatabase, transaction } from '@idempotent-checkout/db-kit'
import { newId } from '../../server/db/ids'
import { type JobErrorEntry, orders, tenants } from '../../server/db/schema'
import { z } from 'zod'
import { type EnqueueOptions, enqueueJob } from '../../server/jobs/enqueue'
import { defineJobType } from '../../server/jobs/types'
import { orderResource } from '../../shared/resources'
import { testMigrations } from './migrations'

/**
 * Seeds orders and jobs straight into a test database through the app's own outbox function, and
 * reads back what the workers did. Assertions about "exactly once" are about rows.
 */

export interface JobRowView {
  id: string
  kind: string
  status: string
  attempt: number
  maxAttempts: number
  fence: number | null
  lockedBy: string | null
  lastError: string | null
  errors: JobErrorEntry[]
  runAt: Date
  startedAt: Date | null
  completedAt: Date | null
  resourceId: string | null
}

export interface JobsFixture {
  /** The app's drizzle database (migrated): seed with the production code paths. */
  db: Database
  handle: DatabaseHandle
  /** Raw SQL for reads and for breaking things on purpose. */
  sql: postgres.Sql
  close: () => Promise<void>
}

export async function openJobsFixture(databaseUrl: string): Promise<JobsFixture> {
  const handle = await openDatabase({ url: databaseUrl, pgliteDir: '', migrations: testMigrations, poolSize: 4, pipelining: true })
  const sql = postgres(databaseUrl, { max: 4, onnotice: () => {} })
  const close = async () => {
    await sql.end({ timeout: 5 })
    await handle.close()
  }
  return { db: handle.db, handle, sql, close }
}

const pendingOrder = (id: string, tenantId: string, email: string, requestId: string) => ({
  id,
  tenantId,
  cartId: `cart_${id}`,
  currency: 'IDR',
  amount: 150000,
  paymentMethod: 'card',
  items: [{ sku: 'SKU-1', quantity: 2, unitPrice: 75000 }],
  customer: { email },
  requestId,
})

/** A tenant and `count` pending orders, inserted directly (the API path is covered elsewhere). */
export async function seedOrders(db: Database, count: number): Promise<{ tenantId: string, orderIds: string[] }> {
  const tenantId = newId('ten')
  await db.insert(tenants).values({ id: tenantId, name: 'jobs suite' })
  const orderIds = Array.from({ length: count }, () => newId('ord'))
  for (let start = 0; start < orderIds.length; start += 500) {
    await db.insert(orders).values(orderIds.slice(start, start + 500)
      .map((id, i) => pendingOrder(id, tenantId, `shopper${start + i}@example.com`, 'req_seed')))
  }
  return { tenantId, orderIds }
}

/** One pending order with a chosen id (and its own tenant): the order a waiting job names arrives late. */
export async function seedOrderWithId(db: Database, orderId: string, email: string, requestId: string): Promise<void> {
  const tenantId = newId('ten')
  await db.insert(tenants).values({ id: tenantId, name: 'late order' })
  await db.insert(orders).values(pendingOrder(orderId, tenantId, email, requestId))
}

/** A job row as a test wants it, of any kind and payload (the app's enqueuers are typed per kind). */
export interface EnqueueInput extends EnqueueOptions {
  kind: string
  payload: Record<string, unknown>
  /** `order:ord_…`: the resource the job will lock. */
  resourceId?: string
}

/** enqueueJob for a test's job: a kind of its own or one of the app's, with the payload it chooses. */
export function enqueueTestJob(db: Database, { kind, payload, resourceId, ...options }: EnqueueInput): Promise<string | undefined> {
  const type = defineJobType({ kind, payload: z.record(z.string(), z.unknown()), resource: resourceId ? () => resourceId : undefined })
  return enqueueJob(db, type, payload, options)
}

/** Enqueues through enqueueJob, 200 per transaction; returns the new jobs' ids in input order. */
export async function enqueueJobs(db: Database, inputs: EnqueueInput[]): Promise<string[]> {
  const ids: string[] = []
  for (let start = 0; start < inputs.length; start += 200) {
    await transaction(db, async (tx) => {
      for (const input of inputs.slice(start, start + 200)) {
        const id = await enqueueTestJob(tx, input)
        if (!id) throw new Error(`job ${input.kind}/${input.dedupeKey} already exists`)
        ids.push(id)
      }
    })
  }
  return ids
}

/** A job per order: `order.send_confirmation` for `order:<id>` unless another kind is given. */
export const orderJob = (orderId: string, overrides: Partial<EnqueueInput> = {}): EnqueueInput => ({
  kind: 'order.send_confirmation',
  dedupeKey: orderId,
  payload: { orderId },
  resourceId: orderResource(orderId),
  ...overrides,
})

export async function jobRow(sql: postgres.Sql, id: string): Promise<JobRowView | undefined> {
  const [row] = await sql<JobRowView[]>`
    select id, kind, status, attempt, max_attempts as "maxAttempts", fence::int as fence, locked_by as "lockedBy",
      last_error as "lastError", errors, run_at as "runAt", started_at as "startedAt", completed_at as "completedAt",
      resource_id as "resourceId"
    from jobs where id = ${id}`
  return row
}

/** How many jobs are in each status. */
export async function jobStatusCounts(sql: postgres.Sql): Promise<Record<string, number>> {
  const rows = await sql<Array<{ status: string, count: number }>>`select status, count(*)::int as count from jobs group by status`
  return Object.fromEntries(rows.map(row => [row.status, row.count]))
}

/** Per order: emails, invoices, markers and provider intents — each must be exactly one. */
export async function effectsPerOrder(sql: postgres.Sql, orderIds: string[]): Promise<Map<string, { emails: number, invoices: number, markers: number, intents: number }>> {
  const rows = await sql<Array<{ orderId: string, emails: number, invoices: number, markers: number, intents: number }>>`
    select o.id as "orderId",
      (select count(*)::int from mailbox m where m.order_id = o.id) as emails,
      (select count(*)::int from invoices i where i.order_id = o.id) as invoices,
      (select count(*)::int from side_effects s where s.order_id = o.id) as markers,
      (select count(*)::int from payment_intents p where p.order_id = o.id) as intents
    from orders o where o.id = any(${orderIds})`
  return new Map(rows.map(({ orderId, ...counts }) => [orderId, counts]))
}

/** Called with each statement the job store and the runner send as one statement, before it goes out; resolving lets it go. */
export type StatementHook = (text: string, params: readonly unknown[]) => Promise<void> | void

/**
 * `db` with every single hot-path statement (queryPrepared: claims, heartbeats, loaders, one
 * completion) passed through `hook` first, so a test can hold one in flight or delay it. Batches
 * (queryAllPrepared's transaction) and drizzle's own queries go out untouched.
 */
export function interceptStatements(db: Database, hook: StatementHook): Database {
  type Send = (text: string, params?: unknown[], ...rest: unknown[]) => Promise<unknown>
  const client = (db as unknown as { $client: Record<string | symbol, unknown> }).$client
  const intercepted = (send: Send): Send => async (text, params, ...rest) => {
    await hook(text, params ?? [])
    return send(text, params, ...rest)
  }
  const wrappedClient = new Proxy(client, {
    get(target, property) {
      const value = Reflect.get(target, property)
      if (typeof value !== 'function') return value
      const bound = (value as Send).bind(target)
      // postgres.js sends one statement with `unsafe`, PGlite with `query`.
      return property === 'unsafe' || property === 'query' ? intercepted(bound) : bound
    },
  })
  return new Proxy(db, {
    get: (target, property, receiver) => (property === '$client' ? wrappedClient : Reflect.get(target, property, receiver)),
  })
}
