import type postgres from 'postgres'
import { request } from '../http'
import { opsHeaders } from '../ops'
import type { AnswerLog } from './answers'
import type { FleetEvent } from './fleet'
import type { LoadResult } from './load'
import { type AcceptedEvent, type EffectKind, effectsOf, expectedPaymentStatus } from './model'
import { orderIdOfResource, tenantScope } from '../../../shared/resources'

/**
 * "Never twice, never lost", checked on rows of the chaos database against what the clients were
 * told, once the run has settled. Each invariant says how many things it checked and which broke
 * it; an offender names what the evidence locker should be asked about.
 */

export const invariantNames = [
  '1. acknowledged orders exist',
  '2. orders per idempotency key = 1',
  '3. orders per cart ≤ 1',
  '4. each webhook event stored and applied once',
  '5. each side effect once per order and kind',
  '6. final payment status = model',
  '7. no job left running or pending',
  '8. dead letters explained',
  '9. every 5xx was 503 with Retry-After',
  '10. audit: no exactly-once violation',
  '11. every request got its final answer',
  '12. every process death was one the run caused',
] as const

export type InvariantName = typeof invariantNames[number]

/** What to ask GET /api/ops/evidence about. */
export type EvidenceSubject = { key: string, scope: string } | { orderId: string } | { eventId: string }

export interface InvariantResult {
  invariant: InvariantName
  checked: number
  violations: string[]
  offenders: EvidenceSubject[]
}

export interface InvariantInput {
  sql: postgres.Sql
  tenantId: string
  load: LoadResult
  answers: AnswerLog
  /** Where the ops API answers (the balancer). */
  baseUrl: string
  /** Deaths and restarts of the fleet's processes. */
  fleetEvents: FleetEvent[]
}

export async function checkInvariants(input: InvariantInput): Promise<InvariantResult[]> {
  const { sql, tenantId, load } = input
  const scope = tenantScope(tenantId)
  /** The intent as its violations name it: key, copies fired, injected fault. */
  const described = (intent: LoadResult['orderIntents'][number]) => `key ${intent.key} (${intent.copies} ${intent.copies > 1 ? 'copies' : 'copy'}${intent.fault ? `, ${intent.fault}` : ''})`
  const result = (invariant: InvariantName, checked: number): InvariantResult => ({ invariant, checked, violations: [], offenders: [] })
  const orderRows = await sql<Array<{ id: string, key: string | null, cartId: string, status: string }>>`
    select id, idempotency_key as key, cart_id as "cartId", status from orders where tenant_id = ${tenantId}`
  const orderById = new Map(orderRows.map(row => [row.id, row]))
  const ordersPerKey = new Map<string, number>()
  for (const row of orderRows) if (row.key) ordersPerKey.set(row.key, (ordersPerKey.get(row.key) ?? 0) + 1)

  // 1. Every order intent was acknowledged, and every 201 names a row with that key and cart.
  const acknowledged = result('1. acknowledged orders exist', load.orderIntents.length)
  for (const intent of load.orderIntents) {
    if (!intent.finals.some(final => final?.status === 201)) {
      acknowledged.violations.push(`${described(intent)}: no 201 (final answers: ${intent.finals.map(final => final?.status ?? 'none').join(', ')})`)
      acknowledged.offenders.push({ key: intent.key, scope })
    }
    for (const final of intent.finals) {
      if (final?.status !== 201) continue
      const row = final.orderId ? orderById.get(final.orderId) : undefined
      if (!row || row.key !== intent.key || row.cartId !== intent.cartId) {
        acknowledged.violations.push(`${described(intent)}: 201 for ${final.orderId}, but the row is ${row ? JSON.stringify(row) : 'missing'}`)
        acknowledged.offenders.push({ key: intent.key, scope })
      }
    }
  }

  // 2. One order per key: in the rows, and in what every copy of a duplicated intent was told.
  const perKey = result('2. orders per idempotency key = 1', 0)
  for (const intent of load.orderIntents) {
    const ids = new Set(intent.finals.flatMap(final => final?.status === 201 && final.orderId ? [final.orderId] : []))
    if (ids.size === 0) continue
    perKey.checked++
    const rows = ordersPerKey.get(intent.key) ?? 0
    if (ids.size !== 1 || rows !== 1) {
      perKey.violations.push(`${described(intent)}: ${rows} order rows, copies told ${[...ids].join(', ')}`)
      perKey.offenders.push({ key: intent.key, scope })
    }
  }
  for (const [key, rows] of ordersPerKey) {
    if (rows > 1 && !load.orderIntents.some(intent => intent.key === key)) {
      perKey.violations.push(`key ${key}: ${rows} order rows`)
      perKey.offenders.push({ key, scope })
    }
  }

  // 3. One order per cart.
  const carts = new Map<string, string[]>()
  for (const row of orderRows) carts.set(row.cartId, [...(carts.get(row.cartId) ?? []), row.id])
  const perCart = result('3. orders per cart ≤ 1', carts.size)
  for (const [cartId, ids] of carts) {
    if (ids.length > 1) {
      perCart.violations.push(`cart ${cartId}: orders ${ids.join(', ')}`)
      perCart.offenders.push(...ids.map(orderId => ({ orderId })))
    }
  }

  // 4. Each accepted event stored once, processed once, applied at most once; nothing stored that nobody was told about.
  const expectedEvents = new Map<string, AcceptedEvent & { orderId: string }>(load.orders.flatMap(order => order.events.map(event => [`${event.provider}:${event.eventId}`, { ...event, orderId: order.orderId }])))
  type StoredEvent = { id: string, provider: string, eventId: string, orderId: string, status: string, history: number, applied: number }
  const storedEvents = await sql<StoredEvent[]>`
    select w.id, w.provider, w.event_id as "eventId", w.order_id as "orderId", w.status,
      (select count(*)::int from order_status_history h where h.webhook_event_id = w.id) as history,
      (select count(*)::int from order_status_history h where h.webhook_event_id = w.id and h.outcome = 'applied') as applied
    from webhook_events w join orders o on o.id = w.order_id where o.tenant_id = ${tenantId}`
  const events = result('4. each webhook event stored and applied once', expectedEvents.size)
  const storedById = new Map<string, StoredEvent[]>()
  for (const row of storedEvents) {
    const id = `${row.provider}:${row.eventId}`
    storedById.set(id, [...(storedById.get(id) ?? []), row])
  }
  for (const [id, event] of expectedEvents) {
    if (!storedById.has(id)) {
      events.violations.push(`${id} (order ${event.orderId}): accepted, not stored`)
      events.offenders.push({ eventId: event.eventId })
    }
  }
  for (const [id, rows] of storedById) {
    const problems = [
      ...(rows.length > 1 ? [`stored ${rows.length} times`] : []),
      ...(!expectedEvents.has(id) ? ['stored, yet no delivery of it was acknowledged'] : []),
      ...rows.flatMap(row => [
        ...(row.status === 'received' ? ['never processed'] : []),
        ...(row.history !== 1 ? [`${row.history} history rows`] : []),
        ...(row.applied > 1 ? [`applied ${row.applied} times`] : []),
      ]),
    ]
    if (problems.length) {
      events.violations.push(`${id} (order ${rows[0]!.orderId}): ${problems.join(', ')}`)
      events.offenders.push({ eventId: rows[0]!.eventId })
    }
  }

  // 5. Effects follow the state reached, once each: the intent always, emails and invoice as the status implies.
  const effectRows = await sql<Array<{ id: string, status: string, intents: number, markers: Record<string, number>, confirmed: number, refunded: number, emails: number, invoices: number }>>`
    select o.id, o.status,
      (select count(*)::int from payment_intents p where p.order_id = o.id) as intents,
      (select coalesce(jsonb_object_agg(effect, n), '{}'::jsonb) from (select effect, count(*)::int as n from side_effects s where s.order_id = o.id group by effect) e) as markers,
      (select count(*)::int from mailbox m where m.order_id = o.id and m.subject = 'Order ' || o.id || ' confirmed') as confirmed,
      (select count(*)::int from mailbox m where m.order_id = o.id and m.subject = 'Order ' || o.id || ' refunded') as refunded,
      (select count(*)::int from mailbox m where m.order_id = o.id) as emails,
      (select count(*)::int from invoices i where i.order_id = o.id) as invoices
    from orders o where o.tenant_id = ${tenantId}`
  const effects = result('5. each side effect once per order and kind', effectRows.length * 4)
  for (const row of effectRows) {
    const implied = effectsOf(row.status)
    const once = (effect: EffectKind) => (implied.includes(effect) ? 1 : 0)
    // [effect, its rows (the marker, then what it produced), how many of each it must have]
    const checks: Array<[string, Record<string, number>, number]> = [
      ['payment intent', { intent: row.intents }, 1],
      ['confirmation email', { marker: row.markers.confirmation_email ?? 0, email: row.confirmed }, once('confirmation_email')],
      ['invoice', { marker: row.markers.invoice ?? 0, invoice: row.invoices }, once('invoice')],
      ['refund notice', { marker: row.markers.refund_notice ?? 0, email: row.refunded }, once('refund_notice')],
    ]
    const wrong = checks.filter(([, rows, expected]) => Object.values(rows).some(count => count !== expected))
      .map(([effect, rows, expected]) => `${effect}: ${Object.entries(rows).map(([what, count]) => `${count} ${what}`).join(', ')} (expected ${expected} each)`)
    const expectedEmails = once('confirmation_email') + once('refund_notice')
    if (row.emails !== expectedEmails) wrong.push(`${row.emails} emails in all (expected ${expectedEmails})`)
    if (wrong.length) {
      effects.violations.push(`order ${row.id} (${row.status}): ${wrong.join('; ')}`)
      effects.offenders.push({ orderId: row.id })
    }
  }

  // 6. The model: the highest status any accepted event asked for.
  const finalStatus = result('6. final payment status = model', load.orders.length)
  for (const order of load.orders) {
    const expected = expectedPaymentStatus(order.events)
    const actual = orderById.get(order.orderId)?.status
    if (actual !== expected) {
      finalStatus.violations.push(`order ${order.orderId} (${order.path}; events ${order.events.map(event => `${event.requested ?? 'informational'}`).join(', ') || 'none'}): ${actual ?? 'missing'}, model says ${expected}`)
      finalStatus.offenders.push({ orderId: order.orderId })
    }
  }

  // 7 and 8. The outbox drained: nothing running or waiting, and no dead letter (none is expected in this run).
  const jobCounts = await sql<Array<{ status: string, count: number }>>`select status, count(*)::int as count from jobs group by status`
  const totalJobs = jobCounts.reduce((sum, row) => sum + row.count, 0)
  const drained = result('7. no job left running or pending', totalJobs)
  for (const row of jobCounts) {
    if (['queued', 'running', 'failed'].includes(row.status)) drained.violations.push(`${row.count} jobs ${row.status}`)
  }
  const stuck = await sql<Array<{ resourceId: string | null }>>`
    select distinct resource_id as "resourceId" from jobs where status in ('queued', 'running', 'failed') and resource_id like 'order:%' limit 5`
  drained.offenders.push(...stuck.map(row => ({ orderId: orderIdOfResource(row.resourceId)! })))
  const deadLetters = await sql<Array<{ id: string, kind: string, lastError: string | null, resourceId: string | null, attempt: number }>>`
    select id, kind, last_error as "lastError", resource_id as "resourceId", attempt from jobs where status = 'dead_letter' order by created_at`
  const explained = result('8. dead letters explained', totalJobs)
  for (const job of deadLetters) {
    explained.violations.push(`${job.id} ${job.kind} (${job.resourceId ?? 'no resource'}) after ${job.attempt} attempts: ${job.lastError}`)
    const orderId = orderIdOfResource(job.resourceId)
    if (orderId) explained.offenders.push({ orderId })
  }

  // 9. Outages answered as such: 503 with Retry-After, never a 500 — as the clients saw it and as the app logged it.
  const serverErrors = input.answers.appServerErrors()
  const loggedServerErrors = await sql<Array<{ status: number, count: number }>>`
    select status, count(*)::int as count from request_log where status >= 500 group by status order by status`
  const outages = result('9. every 5xx was 503 with Retry-After', serverErrors.length + loggedServerErrors.reduce((sum, row) => sum + row.count, 0))
  for (const answer of serverErrors) {
    if (answer.outcome !== 503 || !answer.retryAfter) outages.violations.push(`${answer.kind} at +${(answer.atMs / 1000).toFixed(1)} s (${answer.route}): ${answer.outcome}${answer.retryAfter ? '' : ' without Retry-After'}`)
  }
  for (const row of loggedServerErrors) {
    if (row.status !== 503) outages.violations.push(`request_log: ${row.count} answers with status ${row.status}`)
  }

  // 10. The product's own audit agrees.
  const audited = await request(input.baseUrl, '/api/ops/audit/duplicates', { headers: opsHeaders })
  const audit = result('10. audit: no exactly-once violation', 1)
  if (audited.status !== 200) audit.violations.push(`GET /api/ops/audit/duplicates answered ${audited.status}: ${audited.text.slice(0, 300)}`)
  for (const violation of audited.json?.exactlyOnceViolations ?? []) {
    audit.violations.push(JSON.stringify(violation))
    const orderId = violation.ids?.orderId ?? violation.ids?.orderIds?.[0]
    if (typeof orderId === 'string') audit.offenders.push({ orderId })
  }

  // 11. Liveness: nothing was left without an answer, and no valid request got a 4xx.
  const requests = input.answers.answers.length
  const answered = result('11. every request got its final answer', requests)
  answered.violations.push(...load.figures.abandoned, ...load.figures.unexpectedFinals)

  // 12. A process may die by the schedule's SIGKILL or by crash-after-commit (also a SIGKILL); one
  // that exits by itself (an uncaught error, say) is a finding, even though the supervisor restarts it.
  const deaths = input.fleetEvents.filter(event => event.event === 'died')
  const caused = result('12. every process death was one the run caused', deaths.length)
  for (const death of deaths.filter(event => event.lastOutput !== undefined)) {
    caused.violations.push(`${death.member} at +${(death.atMs / 1000).toFixed(1)} s, ${death.detail}; its output ended with:\n${death.lastOutput!.trim().split('\n').slice(-8).join('\n')}`)
  }

  return [acknowledged, perKey, perCart, events, effects, finalStatus, drained, explained, outages, audit, answered, caused]
}
