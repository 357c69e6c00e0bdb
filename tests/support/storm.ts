import { randomUUID } from 'node:crypto'
import { expect } from 'vitest'
import type { AppProcess } from './app'
import { type AnsweredOrder, type OrderAnswer, postOrderUntilAnswered } from './cluster'
import type { OrderRows } from './order-rows'
import { problemSlug } from './orders'

/**
 * A retry storm: many keys, each sent by several clients at once, spread round-robin over the
 * instances, every client retrying with the same key until it has a final answer.
 */

export interface StormRequest {
  body: unknown
  headers?: Record<string, string>
  /** Which body this client sends, for storms that mix bodies under one key. */
  variant: number
}

export interface StormOptions {
  instances: AppProcess[]
  secretKey: string
  keyCount: number
  requestsPerKey: number
  /** Names the storm's keys and carts. */
  label: string
  plan: (target: { keyIndex: number, requestIndex: number, cartId: string }) => StormRequest
}

export interface StormClient { variant: number, result: AnsweredOrder }
export interface StormKey { key: string, cartId: string, clients: StormClient[] }

export async function runStorm(options: StormOptions): Promise<StormKey[]> {
  const runId = randomUUID().slice(0, 8)
  const baseUrls = options.instances.map(instance => instance.url)
  const keys = Array.from({ length: options.keyCount }, (_, keyIndex) => ({
    key: `${options.label}-${runId}-key-${keyIndex}`,
    cartId: `crt_${options.label}-${runId}-${keyIndex}`,
  }))
  // Build every client first, then fire them all in the same tick.
  const launches = keys.flatMap(({ key, cartId }, keyIndex) =>
    Array.from({ length: options.requestsPerKey }, (_, requestIndex) => {
      const planned = options.plan({ keyIndex, requestIndex, cartId })
      const first = (keyIndex * options.requestsPerKey + requestIndex) % baseUrls.length
      return { keyIndex, planned, baseUrls: [...baseUrls.slice(first), ...baseUrls.slice(0, first)], key }
    }))
  const results = await Promise.all(launches.map(launch => postOrderUntilAnswered({
    baseUrls: launch.baseUrls,
    secretKey: options.secretKey,
    key: launch.key,
    body: launch.planned.body,
    headers: launch.planned.headers,
    deadlineMs: 45_000,
  })))
  return keys.map(({ key, cartId }, keyIndex) => ({
    key,
    cartId,
    clients: launches.flatMap((launch, index) =>
      launch.keyIndex === keyIndex ? [{ variant: launch.planned.variant, result: results[index]! }] : []),
  }))
}

/** `201 executed`, `201 replayed`, `409 request-in-progress`, `network error`, … */
export function describeAnswer(answer: OrderAnswer): string {
  if (!answer.response) return 'network error'
  const { status } = answer.response
  if (status < 300) return `${status} ${answer.response.json?.idempotency?.replayed ? 'replayed' : 'executed'}`
  return `${status} ${problemSlug(answer.response) ?? 'no problem type'}`
}

export function everyAnswer(storm: StormKey[]): OrderAnswer[] {
  return storm.flatMap(key => key.clients.flatMap(client => client.result.answers))
}

/** Every response seen (intermediate 409s included), by kind and by the instance that gave it. */
export function statusDistribution(storm: StormKey[], instances: AppProcess[]): Record<string, Record<string, number>> {
  const instanceName = new Map(instances.map((instance, index) => [instance.url, `instance ${index + 1}`]))
  const table: Record<string, Record<string, number>> = {}
  for (const answer of everyAnswer(storm)) {
    const row = (table[describeAnswer(answer)] ??= { ...Object.fromEntries(instances.map((_, index) => [`instance ${index + 1}`, 0])), total: 0 })
    row[instanceName.get(answer.baseUrl)!]! += 1
    row.total! += 1
  }
  // A stable row order, so that tables from different runs line up.
  return Object.fromEntries(Object.entries(table).sort(([a], [b]) => a.localeCompare(b)))
}

export function printStormFigures(title: string, storm: StormKey[], instances: AppProcess[], ordersPerCart: Map<string, number>): void {
  console.log(`\n${title}: ${storm.length} keys × ${storm[0]?.clients.length ?? 0} clients on ${instances.length} instances — every response:`)
  console.table(statusDistribution(storm, instances))
  console.log(`${title}: per key`)
  console.table(Object.fromEntries(storm.map(({ key, cartId, clients }) => {
    const answers = clients.flatMap(client => client.result.answers).map(describeAnswer)
    return [key.replace(/^.*-key-/, 'key '), {
      orders: ordersPerCart.get(cartId) ?? 0,
      executed: answers.filter(kind => kind === '201 executed').length,
      replayed: answers.filter(kind => kind === '201 replayed').length,
      inProgress409: answers.filter(kind => kind === '409 request-in-progress').length,
      responses: answers.length,
    }]
  })))
}

export async function ordersPerCart(rows: OrderRows, tenantId: string): Promise<Map<string, number>> {
  const counts = new Map<string, number>()
  for (const order of await rows.orders(tenantId)) counts.set(order.cartId, (counts.get(order.cartId) ?? 0) + 1)
  return counts
}

/**
 * The exactly-once verdict for a storm of identical requests: per key one order, one succeeded
 * record pointing at it, one execution, every client finally holding that order's 201, and nothing
 * but 201 and 409 request-in-progress ever seen on the way.
 */
export async function expectIdenticalStormExactlyOnce(storm: StormKey[], rows: OrderRows, tenantId: string): Promise<void> {
  expectOnlyAnswerKinds(storm, ['201 executed', '201 replayed', '409 request-in-progress'])

  const allOrders = await rows.orders(tenantId)
  expect(allOrders).toHaveLength(storm.length)
  const allRecords = await rows.records(tenantId)
  expect(allRecords).toHaveLength(storm.length)

  for (const { key, cartId, clients } of storm) {
    const cartOrders = allOrders.filter(order => order.cartId === cartId)
    expect(cartOrders, `orders for ${cartId}`).toHaveLength(1)
    const orderId = cartOrders[0]!.id
    expect(cartOrders[0]!.idempotencyKey).toBe(key)
    expect(allRecords.filter(record => record.key === key), `record for ${key}`).toEqual([
      { key, status: 'succeeded', attempts: 1, resourceId: orderId, responseStatus: 201, leased: false },
    ])
    const finals = clients.map(client => client.result.final)
    expect(finals.map(final => final.status), `final statuses for ${key}`).toEqual(clients.map(() => 201))
    expect(finals.map(final => final.json.id), `order ids for ${key}`).toEqual(clients.map(() => orderId))
    expect(finals.map(final => final.headers.get('location'))).toEqual(clients.map(() => `/api/orders/${orderId}`))
    expect(finals.filter(final => final.json.idempotency.replayed === false), `executions for ${key}`).toHaveLength(1)
    for (const final of finals) {
      expect(final.headers.get('idempotent-replayed')).toBe(final.json.idempotency.replayed ? 'true' : null)
    }
  }
}

/** Every response any client saw (retries included) is one of `allowed`: no 5xx, no network error. */
export function expectOnlyAnswerKinds(storm: StormKey[], allowed: string[]): void {
  const seenKinds = new Set(everyAnswer(storm).map(describeAnswer))
  expect([...seenKinds].filter(kind => !allowed.includes(kind)), 'unexpected responses in the storm').toEqual([])
}
