import { randomUUID } from 'node:crypto'
import postgres from 'postgres'
import { expect } from 'vitest'
import { problemCatalog, type ProblemSlug } from '../../server/problems/catalog'
import { type AppProcess, startApp } from './app'
import { createTenant, request, type TestResponse } from './http'
import { createTestDatabase, redisUrl } from './services'

/**
 * What the HTTP suites for POST /api/orders share: one built server on its own Postgres database and
 * Redis prefix, a tenant, valid order bodies, and row counts read straight from the test database.
 */

export interface OrderItem { sku: string, quantity: number, unitPrice: number }
export interface OrderBody {
  cartId: string
  currency: string
  amount: number
  paymentMethod: string
  items: OrderItem[]
  customer: { email: string }
}

export interface TenantCredentials { tenantId: string, secretKey: string }

export interface OrdersStack {
  app: AppProcess
  /** A client on the app's own database, for counting rows and arranging records. */
  sql: postgres.Sql
  tenant: TenantCredentials
  close: () => Promise<void>
}

/**
 * The example order of docs/api.md#create-an-order--exactly-once, on a fresh cart so each call is a
 * new business operation.
 */
export function validOrderBody(overrides: Partial<OrderBody> = {}): OrderBody {
  return {
    cartId: `crt_${randomUUID()}`,
    currency: 'IDR',
    amount: 150_000,
    paymentMethod: 'bank_transfer',
    items: [{ sku: 'SKU-1', quantity: 2, unitPrice: 75_000 }],
    customer: { email: 'a@b.co' },
    ...overrides,
  }
}

/**
 * validOrderBody with `variant` more units of its one item and the amount to match: variants of one
 * cart are all valid, yet each has its own fingerprint.
 */
export function orderBodyVariant(variant: number, overrides: Partial<OrderBody> = {}): OrderBody {
  const [item] = validOrderBody().items as [OrderItem]
  const quantity = item.quantity + variant
  return validOrderBody({ amount: quantity * item.unitPrice, items: [{ ...item, quantity }], ...overrides })
}

export const newIdempotencyKey = (): string => randomUUID()

export interface PostOrderOptions {
  secretKey: string
  /** Omitted: no Idempotency-Key header at all. */
  key?: string
  /** An object is sent as JSON; a string or bytes exactly as given. */
  body: unknown
  /** Added last; a `content-type` here replaces the default application/json. */
  headers?: Record<string, string>
  /** How long to wait for a response (default 15 s); must exceed any `Prefer: wait` or injected delay. */
  timeoutMs?: number
}

/** The headers of an authenticated JSON order request, as postOrder sends them. */
export function orderRequestHeaders({ secretKey, key, headers = {} }: Pick<PostOrderOptions, 'secretKey' | 'key' | 'headers'>): Record<string, string> {
  const hasContentType = Object.keys(headers).some(name => name.toLowerCase() === 'content-type')
  return {
    authorization: `Bearer ${secretKey}`,
    ...(key !== undefined && { 'idempotency-key': key }),
    ...(!hasContentType && { 'content-type': 'application/json' }),
    ...headers,
  }
}

/** One POST /api/orders; rejects only when no response arrived (refused, dropped, timed out). */
export function postOrder(baseUrl: string, options: PostOrderOptions): Promise<TestResponse> {
  return request(baseUrl, '/api/orders', { method: 'POST', headers: orderRequestHeaders(options), body: options.body, timeoutMs: options.timeoutMs })
}

export interface RowCounts { orders: number, idempotencyRecords: number, tenants: number, apiKeys: number }

/** Every table a rejected request could have written to. */
export async function countRows(sql: postgres.Sql): Promise<RowCounts> {
  const [counts] = await sql<RowCounts[]>`
    select (select count(*)::int from orders) as orders,
           (select count(*)::int from idempotency_records) as "idempotencyRecords",
           (select count(*)::int from tenants) as tenants,
           (select count(*)::int from api_keys) as "apiKeys"`
  return counts!
}

/** Every response carries an X-Request-Id, echoed or generated: 1–128 visible ASCII characters. */
export const requestIdPattern = /^[\x21-\x7E]{1,128}$/

export const ORDER_ID_PATTERN = /^ord_[\w-]+$/

/** Asserts the 201 of an order created (or replayed) from `body` under `key`: body, headers, replay marker. */
export function expectCreatedOrder(response: TestResponse, body: OrderBody, key: string, replayed: boolean): void {
  expect(response.status, response.text).toBe(201)
  expect(response.headers.get('content-type')).toMatch(/^application\/json\b/)
  expect(response.json).toEqual({
    id: expect.stringMatching(ORDER_ID_PATTERN),
    object: 'order',
    status: 'pending_payment',
    ...body,
    createdAt: expect.any(String),
    idempotency: { key, replayed },
  })
  expect(new Date(response.json.createdAt).toISOString()).toBe(response.json.createdAt)
  expect(response.headers.get('location')).toBe(`/api/orders/${response.json.id}`)
  expect(response.headers.get('idempotent-replayed')).toBe(replayed ? 'true' : null)
  expect(response.headers.get('x-request-id')).toMatch(requestIdPattern)
}

/** Asserts an RFC 9457 problem response of the given catalog type. */
export function expectProblem(response: TestResponse, slug: ProblemSlug): void {
  const { status, title } = problemCatalog[slug]
  expect(response.status, response.text).toBe(status)
  expect(response.headers.get('content-type')).toBe('application/problem+json')
  expect(response.json).toMatchObject({ type: `/problems/${slug}`, title, status })
  expect(response.json.detail).toEqual(expect.any(String))
  expect(response.json.detail.length).toBeGreaterThan(0)
  expect(response.headers.get('x-request-id')).toMatch(requestIdPattern)
}

/** The slug of a problem response's type, without asserting anything (for classifying answers). */
export function problemSlug(response: TestResponse): string | undefined {
  const type: unknown = response.json?.type
  return typeof type === 'string' ? type.replace('/problems/', '') : undefined
}

/** A database, the built server on it (real Postgres and Redis) and one tenant. */
export async function startOrdersStack(label: string, env: Record<string, string> = {}): Promise<OrdersStack> {
  const database = await createTestDatabase(label)
  let app: AppProcess | undefined
  let sql: postgres.Sql | undefined
  try {
    app = await startApp({ databaseUrl: database.url, redisUrl, label, env })
    sql = postgres(database.url, { max: 2, onnotice: () => {} })
    const tenant = await createTenant(app.url, `${label} tenant`)
    const started = { app, sql }
    return {
      ...started,
      tenant,
      async close() {
        await started.sql.end()
        await started.app.stop()
        await database.drop()
      },
    }
  }
  catch (error) {
    // Nothing of a half-started stack may outlive the failed hook.
    await sql?.end()
    await app?.stop()
    await database.drop()
    throw error
  }
}

/** A refund's 201 (status pending, source api) with its Location, first executed or replayed under its key. */
export function expectCreatedRefund(response: TestResponse, expected: { orderId: string, amount: number, key: string, currency?: string, reason?: string | null, replayed?: boolean }): void {
  expect(response.status, response.text).toBe(201)
  expect(response.json).toEqual({
    id: expect.stringMatching(/^re_/),
    object: 'refund',
    orderId: expected.orderId,
    amount: expected.amount,
    currency: expected.currency ?? 'IDR',
    status: 'pending',
    reason: expected.reason ?? null,
    source: 'api',
    createdAt: expect.any(String),
    idempotency: { key: expected.key, replayed: expected.replayed ?? false },
  })
  expect(response.headers.get('location')).toBe(`/api/orders/${expected.orderId}/refunds/${response.json.id}`)
  expect(response.headers.get('idempotent-replayed')).toBe(expected.replayed ? 'true' : null)
}
