import type postgres from 'postgres'
import { paymentStatusPrecedence } from '../../../server/orders/payment-state'
import { opsRequest } from '../ops'
import type { AnswerLog } from './answers'
import type { InjectedFault } from './faults'
import type { FleetEvent } from './fleet'
import type { EvidenceSubject, InvariantResult } from './invariants'
import type { LoadResult } from './load'
import { expectedPaymentStatus } from './model'

/** What the chaos run prints: its figures, the invariants table and, on a violation, the evidence. */

const seconds = (ms: number) => `+${(ms / 1000).toFixed(1)} s`

export interface RunFigures {
  durationMs: number
  load: LoadResult
  answers: AnswerLog
  faults: InjectedFault[]
  fleetEvents: FleetEvent[]
}

/** Longer than the longest outage: a client waited on something that never answered it. */
const slowAnswerMs = 5_000

export function printFigures({ durationMs, load, answers, faults, fleetEvents }: RunFigures): void {
  const { figures } = load
  console.log(`\nChaos run: ${durationMs / 1000} s of load, ${figures.intents} order intents, ${load.orders.length} orders acknowledged`)
  console.log('Requests by kind and answer (network error: no answer; balancer 502: made up by the test\'s balancer, not the app):')
  console.table(answers.byKindAndOutcome())
  console.log('How long the clients waited for each answer:')
  console.table(answers.latencies())
  const slow = answers.slow(slowAnswerMs)
  if (slow.length) {
    console.log(`Answers that took longer than ${slowAnswerMs / 1000} s:`)
    console.table(slow)
  }

  const serverErrors = new Map<string, { count: number, firstAt: number, lastAt: number }>()
  for (const answer of answers.appServerErrors()) {
    const kind = `${answer.outcome}${answer.retryAfter ? ` Retry-After: ${answer.retryAfter}` : ' no Retry-After'}`
    const seen = serverErrors.get(kind) ?? { count: 0, firstAt: answer.atMs, lastAt: answer.atMs }
    serverErrors.set(kind, { count: seen.count + 1, firstAt: Math.min(seen.firstAt, answer.atMs), lastAt: Math.max(seen.lastAt, answer.atMs) })
  }
  console.log('5xx answers of the app, with when they were seen:')
  console.table(Object.fromEntries([...serverErrors].map(([kind, seen]) => [kind, { count: seen.count, first: seconds(seen.firstAt), last: seconds(seen.lastAt) }])))

  const copies = load.orderIntents.reduce((sum, intent) => sum + intent.copies, 0)
  console.log('Order intents:')
  console.table({
    'intents': { count: figures.intents },
    'fired as 2 concurrent copies': { count: figures.duplicatedIntents.twoCopies },
    'fired as 3 concurrent copies': { count: figures.duplicatedIntents.threeCopies },
    'requests (copies) in all': { count: copies },
    'X-Fault drop-after-commit': { count: figures.faults['drop-after-commit'] },
    'X-Fault crash-after-commit': { count: figures.faults['crash-after-commit'] },
  })

  console.log('Faults injected:')
  console.table(faults.map(fault => ({ at: seconds(fault.atMs), fault: fault.fault, detail: fault.detail })))
  console.log('Process deaths and restarts:')
  console.table(fleetEvents.map(event => ({ at: seconds(event.atMs), process: event.member, event: event.event, detail: event.detail.slice(0, 160) })))
  for (const event of fleetEvents.filter(event => event.lastOutput)) {
    console.log(`${event.member} ${event.detail} at ${seconds(event.atMs)}; the end of its output:\n${event.lastOutput}`)
  }

  console.log('Direct webhook deliveries by provider:')
  console.table(figures.webhooks)
  console.log('mockpay actions (refund: the dashboard\'s; deliveries scheduled: events × copies, plus earlier events sent again; refused: 409):')
  console.table(figures.mockpay)
  console.log('Refunds through the API (keys, and the requests their copies, retries and later replays made; answers by kind):')
  console.table({ refunds: figures.refunds })
  console.log('Cancels (racing the payment: sent at the same moment as the shopper\'s payment; paid after cancel: the shopper\'s payment went through too):')
  console.table({ cancels: figures.cancels })
  console.log('Stock (scarce intents: asking for SKU-SCARCE, bulk ones for more than there ever is; refused: keys answered 409 insufficient-stock; samples: counts read during the run):')
  console.table({ stock: figures.stock })

  const paths: Record<string, Record<string, number>> = {}
  for (const order of load.orders) {
    const row = (paths[order.path] ??= Object.fromEntries(paymentStatusPrecedence.map(status => [status, 0])))
    row[expectedPaymentStatus(order)]! += 1
  }
  console.log('Orders by payment path and the final status the model expects:')
  console.table(paths)
}

/** The refunds the run left, by source and state, and mockpay's ledger of the refunds it made. */
export async function printRefundRows(sql: postgres.Sql, tenantId: string): Promise<void> {
  const refunds = await sql<Array<{ source: string, status: string, count: number, amount: number }>>`
    select source, status, count(*)::int as count, sum(amount)::float8 as amount from refunds where tenant_id = ${tenantId} group by source, status order by source, status`
  console.log('Refunds by source and state:')
  console.table(refunds)
  const [ledger] = await sql<[{ rows: number, keyed: number, askedAgain: number, dashboard: number }]>`
    select count(*)::int as rows,
      count(*) filter (where l.idempotency_token is not null)::int as keyed,
      count(*) filter (where l.requests > 1)::int as "askedAgain",
      count(*) filter (where l.idempotency_token is null)::int as dashboard
    from payment_intent_refunds l join payment_intents p on p.id = l.intent_id join orders o on o.id = p.order_id where o.tenant_id = ${tenantId}`
  console.log('mockpay\'s refund ledger (keyed: asked by the app under refund:<id>; asked again: a key the app repeated, answered with the first refund; dashboard: no key):')
  console.table({ 'provider refunds': ledger })
}

/** Each tracked SKU's counts at the end, and its movements by kind (units moved, how many rows). */
export async function printStockRows(sql: postgres.Sql, tenantId: string): Promise<void> {
  const counts = await sql<Array<{ sku: string, onHand: number, reserved: number }>>`
    select sku, on_hand::int as "onHand", reserved::int as reserved from stock where tenant_id = ${tenantId} order by sku`
  console.log('Stock at the end:')
  console.table(counts)
  const movements = await sql<Array<{ sku: string, kind: string, reason: string | null, rows: number, units: number }>>`
    select sku, kind, reason, count(*)::int as rows, sum(quantity)::int as units from stock_movements where tenant_id = ${tenantId}
    group by sku, kind, reason order by sku, kind, reason`
  console.log('The stock ledger by SKU, kind and reason:')
  console.table(movements)
}

export function printInvariants(results: InvariantResult[]): void {
  console.log('Invariants:')
  console.table(results.map(result => ({ invariant: result.invariant, checked: result.checked, violations: result.violations.length })))
  for (const result of results.filter(result => result.violations.length)) {
    console.log(`${result.invariant}: ${result.violations.length} violation(s), the first ones:\n  ${result.violations.slice(0, 20).join('\n  ')}`)
  }
}

/** The evidence locker's timeline of the first few offenders, one line per entry. */
export async function printEvidence(baseUrl: string, results: InvariantResult[], limit = 3): Promise<void> {
  const subjects = new Map<string, EvidenceSubject>()
  for (const subject of results.flatMap(result => result.offenders)) {
    if (subjects.size >= limit) break
    subjects.set(JSON.stringify(subject), subject)
  }
  for (const subject of subjects.values()) {
    const query = new URLSearchParams(subject as Record<string, string>)
    const response = await opsRequest(baseUrl, `/api/ops/evidence?${query}`)
    const timeline: Array<{ at: string, kind: string, summary: string }> = response.json?.timeline ?? []
    console.log(`\nEvidence for ${query} (${response.status}${response.json?.truncated ? ', truncated' : ''}):\n${
      timeline.map(entry => `  ${entry.at} ${entry.kind.padEnd(18)} ${entry.summary}`).join('\n') || response.text.slice(0, 500)}`)
  }
}
