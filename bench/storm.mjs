// The duplicate storm: app instances on one Postgres database and one Redis key prefix (the
// production shape behind a load balancer). Every request carries one of K keys, and each key is
// sent `copies` times at once, split evenly over the instances — a client retrying on timeouts
// through several replicas. Afterwards every key is sent once more with `Prefer: wait`, so that a
// request cut off by the end of the run still has its key settled; then SQL must find exactly one
// order per key, the one every response for that key named.
import { randomUUID } from 'node:crypto'
import autocannon from 'autocannon'
import { orderBody, orderHeaders } from './requests.mjs'

const ALLOWED_OUTCOMES = ['201 executed', '201 replayed', '409 request-in-progress']

/**
 * Hands each instance its next key so that every key's copies split evenly: an instance that still
 * owes copies of open keys sends those first; one that owes none opens a new key, whose copies
 * every instance then owes. `mostOwed` is how far the slowest instance fell behind, in keys: while
 * it stays under the connection count, a key's copies on different instances overlap in time.
 */
function keyDispenser(instances, copiesPerInstance) {
  const owed = new Map(instances.map(instance => [instance, []]))
  const dispenser = {
    keys: [],
    mostOwed: 0,
    next(instance) {
      const queue = owed.get(instance)
      if (queue.length === 0) {
        const key = `storm-${randomUUID()}`
        dispenser.keys.push(key)
        for (const pending of owed.values()) {
          pending.push({ key, remaining: copiesPerInstance })
          dispenser.mostOwed = Math.max(dispenser.mostOwed, pending.length)
        }
      }
      const head = queue[0]
      if (--head.remaining === 0) queue.shift()
      return head.key
    },
  }
  return dispenser
}

function parseJson(text) {
  try {
    return JSON.parse(text)
  }
  catch {
    return null
  }
}

/** What clients learned, per key: which order it names and how often a response said "executed". */
function outcomeLedger() {
  const counts = {}
  const orderIdByKey = new Map()
  const executionsByKey = new Map()
  const problems = []
  return {
    counts,
    orderIdByKey,
    executionsByKey,
    problems,
    record(key, status, text) {
      const body = parseJson(text)
      const kind = status === 201
        ? `201 ${body?.idempotency?.replayed ? 'replayed' : 'executed'}`
        : `${status} ${body?.type?.replace(/^\/problems\//, '') ?? 'unreadable'}`
      counts[kind] = (counts[kind] ?? 0) + 1
      if (!ALLOWED_OUTCOMES.includes(kind)) problems.push(`${key}: ${kind}`)
      if (status !== 201) return
      if (body.idempotency.key !== key) problems.push(`${key}: answered for key ${body.idempotency.key}`)
      const seen = orderIdByKey.get(key)
      if (seen && seen !== body.id) problems.push(`${key}: answered with orders ${seen} and ${body.id}`)
      orderIdByKey.set(key, body.id)
      if (kind === '201 executed') executionsByKey.set(key, (executionsByKey.get(key) ?? 0) + 1)
    },
  }
}

/** Sends every key once more, waiting for an in-flight original: each key ends with its order. */
async function settle(urls, keys, secretKey, ledger, concurrency) {
  let next = 0
  await Promise.all(Array.from({ length: concurrency }, async (_, lane) => {
    while (next < keys.length) {
      const key = keys[next++]
      const response = await fetch(`${urls[lane % urls.length]}/api/orders`, {
        method: 'POST', headers: { ...orderHeaders(secretKey, key), prefer: 'wait=10' }, body: orderBody(key),
      })
      ledger.record(key, response.status, await response.text())
    }
  }))
}

/**
 * One storm against `urls` for the tenant, then its verdict: `check` says orders = keys, and
 * `problems` lists every way in which the run was not exactly once (empty when it was).
 */
export async function runStorm({ urls, tenant, sql, connections, seconds, copies }) {
  const instances = urls.map(url => new URL(url).port)
  const dispenser = keyDispenser(instances, copies / urls.length)
  const storm = outcomeLedger()
  const result = await autocannon({
    url: urls.map(url => `${url}/api/orders`), method: 'POST', connections, duration: seconds,
    requests: [{
      // Connections are spread round-robin over the urls; the port says which instance this one hits.
      setupRequest: (request, context) => {
        context.key = dispenser.next(request.port)
        return { ...request, headers: orderHeaders(tenant.secretKey, context.key), body: orderBody(context.key) }
      },
      onResponse: (status, body, context) => storm.record(context.key, status, body),
    }],
  })
  const { keys } = dispenser
  const settled = outcomeLedger()
  await settle(urls, keys, tenant.secretKey, settled, connections)

  const problems = [...storm.problems, ...settled.problems]
  for (const key of keys) {
    const orderIds = new Set([storm.orderIdByKey.get(key), settled.orderIdByKey.get(key)].filter(Boolean))
    if (orderIds.size !== 1) problems.push(`${key}: answered with ${orderIds.size} different orders`)
    const executions = (storm.executionsByKey.get(key) ?? 0) + (settled.executionsByKey.get(key) ?? 0)
    if (executions > 1) problems.push(`${key}: ${executions} responses said "executed"`)
  }
  const rows = await sql`select id, idempotency_key as key from orders where tenant_id = ${tenant.tenant.id}`
  const orderIdByKey = new Map(rows.map(row => [row.key, row.id]))
  if (rows.length !== keys.length) problems.push(`${rows.length} orders for ${keys.length} keys`)
  if (orderIdByKey.size !== rows.length) problems.push(`${rows.length} orders for ${orderIdByKey.size} distinct keys`)
  for (const key of keys) {
    const answered = settled.orderIdByKey.get(key)
    if (orderIdByKey.get(key) !== answered) problems.push(`${key}: clients were answered ${answered}, the database holds ${orderIdByKey.get(key) ?? 'no order'}`)
  }
  return {
    result,
    keys: keys.length,
    mostOwed: dispenser.mostOwed,
    orders: rows.length,
    check: `${rows.length} orders ${rows.length === keys.length ? '=' : '≠'} ${keys.length} keys`,
    outcomes: { storm: storm.counts, settle: settled.counts },
    problems,
  }
}
