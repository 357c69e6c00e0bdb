import type postgres from 'postgres'
import { request } from '../http'
import { opsHeaders } from '../ops'
import type { AnswerLog } from './answers'
import type { FleetEvent } from './fleet'
import type { LoadResult } from './load'
import { type AcceptedEvent, expectedPaymentStatus, statusAfterRefunds } from './model'
import { type PaymentStatus, paymentStatusPrecedence } from '../../../server/orders/payment-state'
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
  '13. each acknowledged refund exists, one per key',
  '14. refunds held ≤ order amount',
  '15. order status = Σ succeeded refunds',
  '16. provider refunds ≤ amount paid',
  '17. each refund asked at the provider once, under its own key',
  '18. a canceled order is never confirmed',
  '19. a key refused for stock made no order',
  '20. stock never negative, reserved ≤ onHand',
  '21. stock counts = Σ ledger per SKU',
  '22. each reservation settled at most once',
  '23. reservations follow the order',
  '24. restocked ≤ sold, all of it once a restock was acknowledged',
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
  const orderRows = await sql<Array<{ id: string, key: string | null, cartId: string, status: string, amount: number }>>`
    select id, idempotency_key as key, cart_id as "cartId", status, amount::int as amount from orders where tenant_id = ${tenantId}`
  const orderById = new Map(orderRows.map(row => [row.id, row]))
  const ordersPerKey = new Map<string, number>()
  for (const row of orderRows) if (row.key) ordersPerKey.set(row.key, (ordersPerKey.get(row.key) ?? 0) + 1)

  // An intent every copy of which was told 409 insufficient-stock: checked by 19, not 1.
  const refusedForStock = (intent: LoadResult['orderIntents'][number]) => intent.finals.some(final => final?.problem === 'insufficient-stock')
  const refusedIntents = load.orderIntents.filter(refusedForStock)

  // 1. Every order intent was acknowledged, and every 201 names a row with that key and cart.
  const acknowledged = result('1. acknowledged orders exist', load.orderIntents.length - refusedIntents.length)
  for (const intent of load.orderIntents) {
    if (refusedForStock(intent)) continue
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

  // The refunds, the provider's (mockpay's) ledger of the refunds it made, and the cancels that took effect.
  type RefundRow = { id: string, orderId: string, key: string | null, amount: number, status: string, source: string }
  const refundRows = await sql<RefundRow[]>`
    select id, order_id as "orderId", idempotency_key as key, amount::int as amount, status, source from refunds where tenant_id = ${tenantId} order by created_at, id`
  const refundsOf = new Map<string, RefundRow[]>()
  for (const row of refundRows) refundsOf.set(row.orderId, [...(refundsOf.get(row.orderId) ?? []), row])
  const intentRows = await sql<Array<{ id: string, orderId: string, status: string, amount: number, amountRefunded: number }>>`
    select p.id, p.order_id as "orderId", p.status, p.amount::int as amount, p.amount_refunded::int as "amountRefunded"
    from payment_intents p join orders o on o.id = p.order_id where o.tenant_id = ${tenantId}`
  type LedgerRow = { id: string, intentId: string, token: string | null, amount: number }
  const ledgerRows = await sql<LedgerRow[]>`
    select l.id, l.intent_id as "intentId", l.idempotency_token as token, l.amount::int as amount
    from payment_intent_refunds l join payment_intents p on p.id = l.intent_id join orders o on o.id = p.order_id where o.tenant_id = ${tenantId}`
  const ledgerOf = new Map<string, LedgerRow[]>()
  for (const row of ledgerRows) ledgerOf.set(row.intentId, [...(ledgerOf.get(row.intentId) ?? []), row])
  const canceledRows = await sql<Array<{ orderId: string }>>`
    select distinct h.order_id as "orderId" from order_status_history h join orders o on o.id = h.order_id
    where o.tenant_id = ${tenantId} and h.reason = 'canceled' and h.outcome = 'applied'`
  const canceled = new Set(canceledRows.map(row => row.orderId))
  const isPaid = (status: string) => paymentStatusPrecedence.indexOf(status as PaymentStatus) >= paymentStatusPrecedence.indexOf('paid')
  const succeededOf = (orderId: string) => (refundsOf.get(orderId) ?? []).filter(row => row.status === 'succeeded')
  const sum = (rows: Array<{ amount: number }>) => rows.reduce((total, row) => total + row.amount, 0)

  // 5. Effects follow the state reached, once each: the intent always; the confirmation and the
  // invoice once paid, unless the order was canceled first; a notice per succeeded refund of a paid order.
  const effectRows = await sql<Array<{ id: string, status: string, intents: number, markers: Record<string, number>, confirmed: number, refundEmails: number, emails: number, invoices: number }>>`
    select o.id, o.status,
      (select count(*)::int from payment_intents p where p.order_id = o.id) as intents,
      (select coalesce(jsonb_object_agg(effect, n), '{}'::jsonb) from (select effect, count(*)::int as n from side_effects s where s.order_id = o.id group by effect) e) as markers,
      (select count(*)::int from mailbox m where m.order_id = o.id and m.subject = 'Order ' || o.id || ' confirmed') as confirmed,
      (select count(*)::int from mailbox m where m.order_id = o.id and m.subject in ('Order ' || o.id || ' refunded', 'Part of order ' || o.id || ' refunded')) as "refundEmails",
      (select count(*)::int from mailbox m where m.order_id = o.id) as emails,
      (select count(*)::int from invoices i where i.order_id = o.id) as invoices
    from orders o where o.tenant_id = ${tenantId}`
  const effects = result('5. each side effect once per order and kind', 0)
  for (const row of effectRows) {
    const confirmed = isPaid(row.status) && !canceled.has(row.id) ? 1 : 0
    const notices = isPaid(row.status) ? succeededOf(row.id).map(refund => `refund_notice:${refund.id}`) : []
    // [effect, its rows (the marker, then what it produced), how many of each it must have]
    // An order canceled before the worker created its payment never gets one.
    const intents = canceled.has(row.id) ? Math.min(row.intents, 1) : 1
    const checks: Array<[string, Record<string, number>, number]> = [
      ['payment intent', { intent: row.intents }, intents],
      ['confirmation email', { marker: row.markers.confirmation_email ?? 0, email: row.confirmed }, confirmed],
      ['invoice', { marker: row.markers.invoice ?? 0, invoice: row.invoices }, confirmed],
      ...notices.map((effect): [string, Record<string, number>, number] => [effect, { marker: row.markers[effect] ?? 0 }, 1]),
      ['refund notice emails', { email: row.refundEmails }, notices.length],
    ]
    effects.checked += checks.length
    const wrong = checks.filter(([, rows, expected]) => Object.values(rows).some(count => count !== expected))
      .map(([effect, rows, expected]) => `${effect}: ${Object.entries(rows).map(([what, count]) => `${count} ${what}`).join(', ')} (expected ${expected} each)`)
    const strayNotices = Object.keys(row.markers).filter(effect => effect.startsWith('refund_notice:') && !notices.includes(effect))
    if (strayNotices.length) wrong.push(`${strayNotices.join(', ')}: no succeeded refund of a paid order to notify`)
    const expectedEmails = confirmed + notices.length
    if (row.emails !== expectedEmails) wrong.push(`${row.emails} emails in all (expected ${expectedEmails})`)
    if (wrong.length) {
      effects.violations.push(`order ${row.id} (${row.status}): ${wrong.join('; ')}`)
      effects.offenders.push({ orderId: row.id })
    }
  }

  // 6. The model: the highest status any accepted event asked for (or canceled), above paid the most the provider said it refunded.
  const finalStatus = result('6. final payment status = model', load.orders.length)
  for (const order of load.orders) {
    const expected = expectedPaymentStatus(order)
    const actual = orderById.get(order.orderId)?.status
    if (actual !== expected) {
      const events = order.events.map(event => `${event.requested ?? 'informational'}${event.refundedTotal === undefined ? '' : ` ${event.refundedTotal}`}`).join(', ') || 'none'
      finalStatus.violations.push(`order ${order.orderId} (${order.path}, amount ${order.amount}${order.cancel ? `, cancel: ${order.cancel}` : ''}; events ${events}): ${actual ?? 'missing'}, model says ${expected}`)
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
  answered.offenders.push(...load.figures.stalledOrders.map(orderId => ({ orderId })))

  // 12. A process may die by the schedule's SIGKILL or by crash-after-commit (also a SIGKILL); one
  // that exits by itself (an uncaught error, say) is a finding, even though the supervisor restarts it.
  const deaths = input.fleetEvents.filter(event => event.event === 'died')
  const caused = result('12. every process death was one the run caused', deaths.length)
  for (const death of deaths.filter(event => event.lastOutput !== undefined)) {
    caused.violations.push(`${death.member} at +${(death.atMs / 1000).toFixed(1)} s, ${death.detail}; its output ended with:\n${death.lastOutput!.trim().split('\n').slice(-8).join('\n')}`)
  }

  // 13. Every refund a key was acknowledged (201) for exists once, as asked; a refused key made none; no API refund nobody asked for.
  const refundsPerKey = new Map<string, RefundRow[]>()
  for (const row of refundRows) if (row.source === 'api' && row.key) refundsPerKey.set(row.key, [...(refundsPerKey.get(row.key) ?? []), row])
  const refundIntents = load.orders.flatMap(order => order.refunds)
  const refundKeys = result('13. each acknowledged refund exists, one per key', refundIntents.length)
  for (const intent of refundIntents) {
    const ids = new Set(intent.finals.flatMap(final => final?.refundId ? [final.refundId] : []))
    const rows = refundsPerKey.get(intent.key) ?? []
    const told = `key ${intent.key} on order ${intent.orderId} (${intent.copies} asks${intent.fault ? `, ${intent.fault}` : ''}; answers ${intent.finals.map(final => final ? `${final.status}${final.problem ? ` ${final.problem}` : ''}` : 'none').join(', ')})`
    const [row] = rows
    const problems = [
      ...(ids.size > 1 ? [`copies told refunds ${[...ids].join(', ')}`] : []),
      ...(ids.size && rows.length !== 1 ? [`${rows.length} refund rows`] : []),
      ...(!ids.size && rows.length && intent.finals.some(final => final?.problem) ? [`refused, yet ${rows.length} refund rows`] : []),
      ...(ids.size === 1 && row && (!ids.has(row.id) || row.orderId !== intent.orderId || (intent.amount !== undefined && row.amount !== intent.amount))
        ? [`the row is ${JSON.stringify(row)}`]
        : []),
    ]
    if (problems.length) {
      refundKeys.violations.push(`${told}: ${problems.join(', ')}`)
      refundKeys.offenders.push({ key: intent.key, scope })
    }
  }
  const askedKeys = new Set(refundIntents.map(intent => intent.key))
  for (const [key, rows] of refundsPerKey) {
    if (!askedKeys.has(key)) {
      refundKeys.violations.push(`key ${key}: ${rows.length} API refunds nobody was told of`)
      refundKeys.offenders.push({ key, scope })
    }
  }

  // 14. The refundable balance: refunds not failed never hold more than the order's amount.
  const held = result('14. refunds held ≤ order amount', orderRows.length)
  for (const order of orderRows) {
    const holding = sum((refundsOf.get(order.id) ?? []).filter(row => row.status !== 'failed'))
    if (holding > order.amount) {
      held.violations.push(`order ${order.id}: refunds not failed hold ${holding} of ${order.amount} (${(refundsOf.get(order.id) ?? []).map(row => `${row.id} ${row.amount} ${row.status} ${row.source}`).join(', ')})`)
      held.offenders.push({ orderId: order.id })
    }
  }

  // 15. Above paid the status is what succeeded refunds add up to, no refund is left pending, and
  // an order paid at mockpay has had refunded what mockpay refunded, no more and no less.
  const intentOf = new Map(intentRows.map(row => [row.orderId, row]))
  const refundState = result('15. order status = Σ succeeded refunds', orderRows.length)
  for (const order of orderRows) {
    const succeeded = sum(succeededOf(order.id))
    const intent = intentOf.get(order.id)
    const problems = [
      ...(isPaid(order.status) && order.status !== statusAfterRefunds(order.amount, succeeded) ? [`${order.status} with ${succeeded} of ${order.amount} refunded`] : []),
      ...(refundsOf.get(order.id) ?? []).filter(row => row.status === 'pending').map(row => `refund ${row.id} still pending`),
      ...(intent && ['succeeded', 'refunded'].includes(intent.status) && intent.amountRefunded !== succeeded ? [`mockpay refunded ${intent.amountRefunded}, the order ${succeeded}`] : []),
    ]
    if (problems.length) {
      refundState.violations.push(`order ${order.id}: ${problems.join(', ')}`)
      refundState.offenders.push({ orderId: order.id })
    }
  }

  // 16. The provider never gave back more than it took: per intent, its ledger's refunds ≤ what was paid, and its total is their sum.
  const providerRefunds = result('16. provider refunds ≤ amount paid', intentRows.length)
  for (const intent of intentRows) {
    const paid = ['succeeded', 'refunded'].includes(intent.status) ? intent.amount : 0
    const given = sum(ledgerOf.get(intent.id) ?? [])
    if (given > paid || given !== intent.amountRefunded) {
      providerRefunds.violations.push(`intent ${intent.id} (order ${intent.orderId}, ${intent.status}): ledger refunds ${given} of ${paid} paid, amount_refunded ${intent.amountRefunded}`)
      providerRefunds.offenders.push({ orderId: intent.orderId })
    }
  }

  // 17. Each refund of ours reached the provider under refund:<id> and was made there once: one
  // ledger row if it succeeded, none if it failed; every keyed ledger row is one of the order's refunds.
  const refundById = new Map(refundRows.map(row => [row.id, row]))
  const ledgerByToken = new Map<string, LedgerRow[]>()
  for (const row of ledgerRows) if (row.token) ledgerByToken.set(row.token, [...(ledgerByToken.get(row.token) ?? []), row])
  const ours = refundRows.filter(row => row.source !== 'provider')
  const askedOnce = result('17. each refund asked at the provider once, under its own key', ours.length + ledgerRows.length)
  for (const refund of ours) {
    const made = ledgerByToken.get(`refund:${refund.id}`) ?? []
    const expected = refund.status === 'succeeded' ? 1 : 0
    if (made.length !== expected || made.some(row => row.intentId !== intentOf.get(refund.orderId)?.id)) {
      askedOnce.violations.push(`refund ${refund.id} (${refund.source}, ${refund.status}) of order ${refund.orderId}: ${made.length} provider refunds under its key (expected ${expected})${made.length ? `: ${made.map(row => `${row.id} on ${row.intentId}`).join(', ')}` : ''}`)
      askedOnce.offenders.push({ orderId: refund.orderId })
    }
  }
  for (const row of ledgerRows) {
    const refund = row.token?.startsWith('refund:') ? refundById.get(row.token.slice('refund:'.length)) : undefined
    if (row.token && (!refund || refund.source === 'provider')) {
      askedOnce.violations.push(`provider refund ${row.id} on ${row.intentId} under ${row.token}: no refund of ours has that key`)
    }
  }

  // 18. A canceled order gets its money back, never a confirmation: the cancels the shop was told of, and those in the history.
  const canceledOrders = new Set([...load.orders.filter(order => order.cancel === 'canceled').map(order => order.orderId), ...canceled])
  const neverConfirmed = result('18. a canceled order is never confirmed', canceledOrders.size)
  const effectsOf = new Map(effectRows.map(row => [row.id, row]))
  for (const orderId of canceledOrders) {
    const row = effectsOf.get(orderId)
    const problems = [
      ...(!canceled.has(orderId) ? ['the shop was told it was canceled, its history has no cancel'] : []),
      ...(row && (row.markers.confirmation_email || row.confirmed || row.markers.invoice || row.invoices)
        ? [`${row.markers.confirmation_email ?? 0} confirmation markers, ${row.confirmed} confirmation emails, ${row.invoices} invoices`]
        : []),
    ]
    if (problems.length) {
      neverConfirmed.violations.push(`order ${orderId} (${row?.status ?? 'missing'}): ${problems.join(', ')}`)
      neverConfirmed.offenders.push({ orderId })
    }
  }

  // 19. A refusal for stock is an answer like any: stored under the key, so every copy was told it,
  // and no order was made. Only an intent asking for the scarce SKU may be refused.
  const refusals = result('19. a key refused for stock made no order', refusedIntents.length)
  for (const intent of refusedIntents) {
    const problems = [
      ...(intent.scarceUnits === 0 ? ['refused, yet it asked for no scarce SKU'] : []),
      ...(intent.finals.some(final => final?.problem !== 'insufficient-stock') ? [`copies told ${intent.finals.map(final => final ? `${final.status} ${final.problem ?? final.orderId}` : 'none').join(', ')}`] : []),
      ...(ordersPerKey.get(intent.key) ? [`${ordersPerKey.get(intent.key)} order rows`] : []),
    ]
    if (problems.length) {
      refusals.violations.push(`${described(intent)}: ${problems.join(', ')}`)
      refusals.offenders.push({ key: intent.key, scope })
    }
  }

  // 20. The counts as the shop read them during the run, and as they ended: never below zero, never
  // more reserved than on hand, available what is left.
  const stockRows = await sql<Array<{ sku: string, onHand: number, reserved: number, ledgerOnHand: number, ledgerReserved: number }>>`
    select s.sku, s.on_hand::int as "onHand", s.reserved::int as reserved,
      (select coalesce(sum(m.on_hand_delta), 0)::int from stock_movements m where m.tenant_id = s.tenant_id and m.sku = s.sku) as "ledgerOnHand",
      (select coalesce(sum(m.reserved_delta), 0)::int from stock_movements m where m.tenant_id = s.tenant_id and m.sku = s.sku) as "ledgerReserved"
    from stock s where s.tenant_id = ${tenantId} order by s.sku`
  const counts = [...load.stockSamples, ...stockRows.map(row => ({ atMs: undefined, ...row, available: row.onHand - row.reserved }))]
  const bounded = result('20. stock never negative, reserved ≤ onHand', counts.length)
  for (const { atMs, sku, onHand, reserved, available } of counts) {
    if (onHand < 0 || reserved < 0 || reserved > onHand || available !== onHand - reserved) {
      bounded.violations.push(`${sku} ${atMs === undefined ? 'at the end' : `read at +${(atMs / 1000).toFixed(1)} s`}: onHand ${onHand}, reserved ${reserved}, available ${available}`)
    }
  }

  // 21. The ledger moves the counts: each SKU's counts are the sums of its movements.
  const ledgerSums = result('21. stock counts = Σ ledger per SKU', stockRows.length)
  for (const row of stockRows) {
    if (row.onHand !== row.ledgerOnHand || row.reserved !== row.ledgerReserved) {
      ledgerSums.violations.push(`${row.sku}: onHand ${row.onHand}, reserved ${row.reserved}; the ledger sums to ${row.ledgerOnHand} and ${row.ledgerReserved}`)
    }
  }

  // The tenant's movements of orders, by order and SKU.
  type Movement = { orderId: string, sku: string, kind: string, quantity: number, reason: string | null, sourceId: string }
  const movementRows = await sql<Movement[]>`
    select order_id as "orderId", sku, kind, quantity::int as quantity, reason, source_id as "sourceId" from stock_movements
    where tenant_id = ${tenantId} and order_id is not null order by id`
  const movementsOf = new Map<string, Movement[]>()
  for (const row of movementRows) movementsOf.set(`${row.orderId} ${row.sku}`, [...(movementsOf.get(`${row.orderId} ${row.sku}`) ?? []), row])
  const reservations = movementRows.filter(row => row.kind === 'reserve')
  const settlementsOf = (orderId: string, sku: string) => (movementsOf.get(`${orderId} ${sku}`) ?? []).filter(row => row.kind === 'commit' || row.kind === 'release')

  // 22. Whichever of the payment, a cancel or a refusal comes first settles a reservation; nothing after it does.
  const settledOnce = result('22. each reservation settled at most once', reservations.length)
  for (const { orderId, sku } of reservations) {
    const settlements = settlementsOf(orderId, sku)
    if (settlements.length > 1) {
      settledOnce.violations.push(`order ${orderId}, ${sku}: ${settlements.map(row => `${row.kind}${row.reason ? ` (${row.reason})` : ''}`).join(', ')}`)
      settledOnce.offenders.push({ orderId })
    }
  }

  // 23. Each order reserved its tracked items (quantities summed per SKU), and its reservations are
  // where its state says: committed once paid; released once canceled, even if a payment came after
  // (it is refunded automatically), or once its payment was refused at creation; held while unpaid.
  const tracked = new Set(stockRows.map(row => row.sku))
  const orderStates = await sql<Array<{ id: string, status: string, cancelReason: string | null, paymentRefused: boolean, items: Array<{ sku: string, quantity: number }> }>>`
    select id, status, cancel_reason as "cancelReason", payment_error is not null as "paymentRefused", items from orders where tenant_id = ${tenantId}`
  const followsOrder = result('23. reservations follow the order', orderStates.length)
  for (const order of orderStates) {
    const wanted = new Map<string, number>()
    for (const item of order.items) if (tracked.has(item.sku)) wanted.set(item.sku, (wanted.get(item.sku) ?? 0) + item.quantity)
    const reserved = new Map(reservations.filter(row => row.orderId === order.id).map(row => [row.sku, row.quantity]))
    const problems: string[] = []
    if (JSON.stringify([...wanted].sort()) !== JSON.stringify([...reserved].sort())) {
      problems.push(`reserved ${JSON.stringify(Object.fromEntries(reserved))}, its tracked items ${JSON.stringify(Object.fromEntries(wanted))}`)
    }
    const expected = order.cancelReason
      ? `release ${order.cancelReason === 'requested' ? 'canceled' : order.cancelReason}`
      : order.paymentRefused ? 'release refused' : isPaid(order.status) ? 'commit' : 'none'
    for (const sku of reserved.keys()) {
      const settled = settlementsOf(order.id, sku).map(row => row.kind === 'release' ? `release ${row.reason}` : row.kind).join(', ') || 'none'
      if (settled !== expected) problems.push(`${sku}: ${settled}, expected ${expected}`)
    }
    if (problems.length) {
      followsOrder.violations.push(`order ${order.id} (${order.status}${order.cancelReason ? `, cancelReason ${order.cancelReason}` : ''}): ${problems.join('; ')}`)
      followsOrder.offenders.push({ orderId: order.id })
    }
  }

  // 24. A refund puts back only what the payment took, once per refund; the first acknowledged
  // restocking refund of an order (restock: true, no items) put back all of it.
  const restockAcknowledged = new Set(refundIntents.filter(intent => intent.restock && intent.finals.some(final => final?.status === 201)).map(intent => intent.orderId))
  const refundOf = new Map(refundRows.map(row => [row.id, row]))
  const restocks = result('24. restocked ≤ sold, all of it once a restock was acknowledged', movementsOf.size)
  for (const [orderSku, rows] of movementsOf) {
    const [orderId, sku] = orderSku.split(' ') as [string, string]
    const committed = sum(rows.filter(row => row.kind === 'commit').map(row => ({ amount: row.quantity })))
    const restocked = rows.filter(row => row.kind === 'restock')
    const put = sum(restocked.map(row => ({ amount: row.quantity })))
    const problems = [
      ...(put > committed ? [`${put} restocked of ${committed} sold`] : []),
      ...(restockAcknowledged.has(orderId) && put !== committed ? [`a restocking refund was acknowledged, yet ${put} of ${committed} sold were put back`] : []),
      ...restocked.filter(row => refundOf.get(row.sourceId)?.orderId !== orderId).map(row => `restock by ${row.sourceId}, not a refund of the order`),
      ...(new Set(restocked.map(row => row.sourceId)).size !== restocked.length ? ['a refund restocked twice'] : []),
    ]
    if (problems.length) {
      restocks.violations.push(`order ${orderId}, ${sku}: ${problems.join(', ')}`)
      restocks.offenders.push({ orderId })
    }
  }

  return [acknowledged, perKey, perCart, events, effects, finalStatus, drained, explained, outages, audit, answered, caused, refundKeys, held, refundState, providerRefunds, askedOnce, neverConfirmed, refusals, bounded, ledgerSums, settledOnce, followsOrder, restocks]
}
