import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import type postgres from 'postgres'
import { orderResource } from '../../../shared/resources'
import type { AppProcess } from '../app'
import type { FaultProxy, ProxiedRequest, ProxyAction } from '../fault-proxy'
import { request, type TestResponse } from '../http'
import { opsRequest } from '../ops'
import { type OrderBody, postOrder, problemSlug, type TenantCredentials } from '../orders'
import { redisUrl } from '../services'
import { StandInRefusal } from '../stripe-api'
import { stockViolations } from '../stock-invariants'
import { startWorker, type WorkerProcess } from '../worker'
import { type Command, describeCommand, type FaultKind, type FaultTarget, type Sequence, type Slot } from './commands'

/**
 * Runs the ledger model's command sequences against two app instances, a standalone worker and a
 * provider stand-in with fault proxies on both sides, and checks, after every command and once the
 * sequence has settled, that our ledger is the provider's.
 */

/** A refund as the provider holds it, in the order's units. */
export interface ProviderRefund {
  /** The provider's id (Stripe re_…, Midtrans refund_chargeback_id). */
  providerId: string
  /** Our refund id it was asked under (Stripe metadata.refund_id, Midtrans refund_key), if any. */
  ourId: string | undefined
  amount: number
  status: 'pending' | 'succeeded' | 'failed' | 'canceled'
}

export interface ProviderLedger {
  /** Payments the provider made for the order (one at most). */
  payments: number
  /** What it captured, in the order's units. */
  captured: number
  refunds: ProviderRefund[]
}

/** What the model needs of one provider's stand-in. */
export interface ProviderSide {
  name: 'stripe' | 'midtrans'
  /** The order shapes `place` picks from. */
  orderBodies: Array<() => OrderBody>
  faults: FaultKind[]
  keepsRefundsPending: boolean
  keepsDashboardRefundsPending: boolean
  /** The order's payment exists at the provider. */
  paymentExists(orderId: string): boolean
  /** The shopper pays; throws StandInRefusal when the provider would not take it. */
  pay(orderId: string): void
  /** A dashboard refund of `percent` of what was paid (or all that is left), pending if asked and the provider can; throws StandInRefusal when refused. */
  dashboardRefund(orderId: string, percent: number | 'rest', pending: boolean): string
  /** From now on the next `count` API refunds stay pending (0: none). */
  pend(count: number): void
  /** The order's refunds the provider holds pending, oldest first. */
  pendingRefunds(orderId: string): string[]
  finish(refundId: string, outcome: 'succeeded' | 'failed'): void
  ledger(orderId: string, currency: string): ProviderLedger
  /** Strings that name the order in the provider's requests and webhooks (its ids, its payment's, its refunds'). */
  tokens(orderId: string): string[]
  /** Which kind of provider request this is, for fault targets. */
  requestKind(request: ProxiedRequest): FaultTarget | undefined
  /** A fault the stand-in itself plays (kept-500): armed for the next refund; the returned function disarms it if unused. */
  armStandInFault?(fault: FaultKind): () => void
  /** The proxy's answer for a status fault, in the provider's error shape. */
  statusFault(status: number): ProxyAction
  /** Webhooks (their bodies) the stand-in is still trying to deliver. */
  deliveriesUnderWay(): string[]
  /** The webhook path at the app. */
  webhookPath: string
}

export interface World {
  provider: ProviderSide
  sql: postgres.Sql
  tenant: TenantCredentials
  instances: [AppProcess, AppProcess]
  databaseUrl: string
  redisKeyPrefix: string
  workerEnv: Record<string, string>
  worker: WorkerProcess | undefined
  workerStarting: Promise<void> | undefined
  /** Disarms the stand-in faults the running sequence armed and did not use. */
  standInFaults: Array<() => void>
  apiProxy: FaultProxy
  hookProxy: FaultProxy
  /** The app's PAYMENT_PROVIDER_TIMEOUT_MS. */
  providerTimeoutMs: number
  /** The longest a sequence may take to settle once its commands ran. */
  settleMs: number
}

interface PlacedOrder { id: string, amount: number, currency: string }

export interface SequenceReport {
  /** Each command with what came of it. */
  log: string[]
  violations: string[]
  /** Commands that did something (not skipped), by kind. */
  executed: Record<string, number>
  settleMs: number
}

const PAID_STATUSES = new Set(['paid', 'partially_refunded', 'refunded'])

/** Runs one sequence on fresh orders, settles it and checks the ledgers. */
export async function runSequence(world: World, sequence: Sequence): Promise<SequenceReport> {
  const { provider } = world
  const orders: Array<PlacedOrder | undefined> = [undefined, undefined]
  const keys = Array.from({ length: 4 }, () => `ledger-${randomUUID()}`)
  const log: string[] = []
  const violations: string[] = []
  const executed: Record<string, number> = {}
  const placed = () => orders.filter((order): order is PlacedOrder => order !== undefined)
  const mentions = (orderId: string) => (proxied: ProxiedRequest) => provider.tokens(orderId).some(token => proxied.path.includes(token) || proxied.body.includes(token))
  const instance = (on: Slot) => world.instances[on]

  async function execute(command: Command): Promise<string> {
    if (command.kind === 'pause') {
      await sleep(command.ms)
      return 'waited'
    }
    if (command.kind === 'reconcile') {
      const run = await opsRequest(instance(command.on).url, '/api/ops/tasks/payments:reconcile', { method: 'POST', timeoutMs: 30_000 })
      if (run.status >= 500) violations.push(`reconciliation answered ${run.status}: ${run.text}`)
      return `${run.status}`
    }
    if (command.kind === 'pend-refunds') {
      provider.pend(command.count)
      return `next ${command.count} pending`
    }
    if (command.kind === 'crash-worker') return crashWorker(world)
    if (command.kind === 'place') {
      if (orders[command.slot]) return 'skipped: placed already'
      const body = provider.orderBodies[command.variant % provider.orderBodies.length]!()
      const created = await postOrder(instance(command.slot).url, { secretKey: world.tenant.secretKey, key: `ledger-order-${randomUUID()}`, body })
      if (created.status !== 201) {
        violations.push(`placing ${body.amount} ${body.currency} answered ${created.status}: ${created.text}`)
        return `${created.status}`
      }
      orders[command.slot] = { id: created.json.id, amount: body.amount, currency: body.currency }
      return `${created.json.id} ${body.amount} ${body.currency} ${body.paymentMethod}`
    }
    const order = orders[command.slot]
    if (!order) return 'skipped: no order in that slot'
    switch (command.kind) {
      case 'pay': {
        const deadline = Date.now() + 3_000
        while (!provider.paymentExists(order.id) && Date.now() < deadline) await sleep(25)
        if (!provider.paymentExists(order.id)) return 'skipped: no payment at the provider yet'
        return refusable(() => {
          provider.pay(order.id)
          return 'paid'
        })
      }
      case 'refund': {
        const body = command.percent === 'rest' ? {} : { amount: Math.max(1, Math.round(order.amount * command.percent / 100)) }
        const send = (on: Slot, key: string) => command.via === 'api'
          ? request(instance(on).url, `/api/orders/${order.id}/refunds`, { method: 'POST', headers: { 'authorization': `Bearer ${world.tenant.secretKey}`, 'idempotency-key': key }, body })
          : opsRequest(instance(on).url, `/api/ops/orders/${order.id}/refunds`, { method: 'POST', headers: { 'idempotency-key': key }, body })
        const key = keys[command.key]!
        const answers = command.twice === 'no'
          ? [await send(command.on, key)]
          : await Promise.all([send(command.on, key), send(command.on === 0 ? 1 : 0, command.twice === 'same-key' ? key : keys[(command.key + 1) % keys.length]!)])
        for (const answer of answers) await checkRefundAnswer(answer, order)
        return answers.map(answer => answer.status === 201 ? `201 ${answer.json.id} ${answer.json.amount}` : `${answer.status} ${problemSlug(answer) ?? ''}`).join(', ')
      }
      case 'dashboard-refund':
        return refusable(() => provider.dashboardRefund(order.id, command.percent, command.pending))
      case 'cancel': {
        const canceled = await request(instance(command.on).url, `/api/orders/${order.id}/cancel`, {
          method: 'POST', headers: { 'authorization': `Bearer ${world.tenant.secretKey}`, 'idempotency-key': `ledger-cancel-${randomUUID()}` },
        })
        if (canceled.status >= 500) violations.push(`cancel of ${order.id} answered ${canceled.status}: ${canceled.text}`)
        return `${canceled.status} ${canceled.json?.status ?? problemSlug(canceled) ?? ''}`
      }
      case 'finish-pending': {
        // The refund job may still be on its way to the provider.
        const deadline = Date.now() + 1_000
        while (provider.pendingRefunds(order.id).length === 0 && Date.now() < deadline) await sleep(25)
        const [pending] = provider.pendingRefunds(order.id)
        if (!pending) return 'skipped: nothing pending at the provider'
        provider.finish(pending, command.outcome)
        return `${pending} ${command.outcome}`
      }
      case 'fault': {
        const target = command.target
        if (provider.armStandInFault && command.fault.startsWith('kept-500')) {
          world.standInFaults.push(provider.armStandInFault(command.fault))
          return 'armed at the stand-in'
        }
        const faults: FaultKind[] = command.fault === 'late-commit-then-406' ? ['late-commit', '406'] : [command.fault]
        for (const fault of faults) {
          world.apiProxy.script.push({
            match: proxied => provider.requestKind(proxied) === target && mentions(order.id)(proxied),
            action: faultAction(world, fault),
            label: `${fault}:${order.id}`,
          })
        }
        return 'armed'
      }
      case 'webhooks':
        return webhooks(command.how, order.id)
    }
  }

  /** A refund request's answer: never a 5xx; a refused refund of a refunded order is the balance's 409 with `remaining`. */
  async function checkRefundAnswer(answer: TestResponse, order: PlacedOrder) {
    if (answer.status >= 500) violations.push(`refund of ${order.id} answered ${answer.status}: ${answer.text}`)
    if (answer.status === 409 && problemSlug(answer) === 'order-not-refundable' && ['partially_refunded', 'refunded'].includes(answer.json?.orderStatus)) {
      violations.push(`refund of ${order.id} (${answer.json.orderStatus}) answered 409 order-not-refundable, not refund-exceeds-remaining with remaining`)
    }
  }

  async function webhooks(how: 'hold' | 'release-reversed' | 'release-shuffled' | 'duplicate', orderId: string): Promise<string> {
    const hold = `hold:${orderId}`
    if (how === 'hold') {
      if (world.hookProxy.script.some(rule => rule.label === hold)) return 'skipped: held already'
      world.hookProxy.script.push({ match: mentions(orderId), action: { kind: 'queue' }, times: Infinity, label: hold })
      return 'holding'
    }
    if (how === 'duplicate') {
      world.hookProxy.script.unshift({ match: mentions(orderId), action: { kind: 'duplicate', copies: 1, gapMs: 20 }, times: 3, label: `duplicate:${orderId}` })
      return 'next three twice'
    }
    removeRules(world.hookProxy, rule => rule === hold)
    const count = world.hookProxy.queued().filter(mentions(orderId)).length
    await world.hookProxy.release({ which: mentions(orderId), order: how === 'release-reversed' ? queued => [...queued].reverse() : shuffled })
    return `released ${count}`
  }

  for (const command of sequence.commands) {
    let outcome: string
    try {
      outcome = await execute(command)
    }
    catch (error) {
      outcome = `threw ${(error as Error).message}`
      violations.push(`${describeCommand(command)} threw: ${(error as Error).stack ?? String(error)}`)
    }
    if (!outcome.startsWith('skipped')) executed[command.kind] = (executed[command.kind] ?? 0) + 1
    log.push(`${describeCommand(command)} → ${outcome}`)
    const placedIds = placed().map(order => order.id)
    const found = [...await balanceViolations(world.sql, placedIds), ...await stockViolations(world.sql, world.tenant.tenantId, placedIds)]
    violations.push(...found.map(violation => `after ${describeCommand(command)}: ${violation}`))
  }

  const settleStarted = Date.now()
  violations.push(...await settle(world, placed().map(order => order.id), mentions, sequence.pendingEnd))
  const settleMs = Date.now() - settleStarted
  for (const order of placed()) violations.push(...await ledgerViolations(world, order))
  violations.push(...(await stockViolations(world.sql, world.tenant.tenantId, placed().map(order => order.id))).map(violation => `once settled: ${violation}`))
  return { log, violations, executed, settleMs }
}

/** A provider's refusal (StandInRefusal) is a skipped command, not a failure. */
function refusable(action: () => string): string {
  try {
    return action()
  }
  catch (error) {
    if (error instanceof StandInRefusal) return `skipped: ${error.message}`
    throw error
  }
}

/** Odd positions first, then even: another order than arrival or its reverse, the same every run. */
function shuffled<T>(items: T[]): T[] {
  return [...items.filter((_, index) => index % 2 === 1), ...items.filter((_, index) => index % 2 === 0)]
}

function removeRules(proxy: FaultProxy, which: (label: string | undefined) => boolean) {
  for (let index = proxy.script.length - 1; index >= 0; index--) if (which(proxy.script[index]!.label)) proxy.script.splice(index, 1)
}

function faultAction(world: World, fault: FaultKind): ProxyAction {
  const pastTimeout = world.providerTimeoutMs + 400
  switch (fault) {
    case 'timeout-after-commit': return { kind: 'hold-answer', ms: pastTimeout }
    case 'late-commit': return { kind: 'delay', ms: pastTimeout }
    case 'drop-answer': return { kind: 'drop-answer' }
    default: return world.provider.statusFault(Number(fault))
  }
}

/** Kills the standalone worker and starts another in the background (one start at a time). */
function crashWorker(world: World): string {
  if (world.workerStarting || !world.worker) return 'skipped: a worker is starting'
  world.worker.kill('SIGKILL')
  const killed = world.worker.workerId
  world.worker = undefined
  world.workerStarting = startWorker({ databaseUrl: world.databaseUrl, redisUrl, redisKeyPrefix: world.redisKeyPrefix, label: 'ledger-worker', env: world.workerEnv })
    .then((started) => {
      world.worker = started
    })
    .finally(() => {
      world.workerStarting = undefined
    })
  return `killed ${killed}`
}

/** Σ of the refunds that have not failed never exceeds what the order took. */
async function balanceViolations(sql: postgres.Sql, orderIds: string[]): Promise<string[]> {
  if (orderIds.length === 0) return []
  const rows = await sql<Array<{ id: string, amount: number, held: number }>>`
    select o.id, o.amount::float8 as amount, coalesce(sum(r.amount) filter (where r.status <> 'failed'), 0)::float8 as held
    from orders o left join refunds r on r.order_id = o.id where o.id = any(${orderIds}) group by o.id`
  return rows.filter(row => row.held > row.amount).map(row => `${row.id}: refunds not failed hold ${row.held} > ${row.amount} captured`)
}

/**
 * Waits until the sequence's orders are quiet: webhooks held back released, what the provider left
 * pending finished (as the sequence drew), every job of the orders completed or dead, every
 * stored event applied, nothing under way in the proxies or the stand-in's deliveries — twice in a
 * row. Violations when it is not quiet within the settle window.
 */
async function settle(world: World, orderIds: string[], mentions: (orderId: string) => (proxied: ProxiedRequest) => boolean, pendingEnd: 'succeeded' | 'failed'): Promise<string[]> {
  const { provider, sql } = world
  world.provider.pend(0)
  const ours = (proxied: ProxiedRequest) => orderIds.some(orderId => mentions(orderId)(proxied))
  const labels = new Set(orderIds.flatMap(orderId => [`hold:${orderId}`, `duplicate:${orderId}`]))
  removeRules(world.hookProxy, label => label !== undefined && labels.has(label))
  await world.hookProxy.release({ which: ours })
  const resources = orderIds.map(orderResource)
  const deadline = Date.now() + world.settleMs
  let quiet = 0
  let lastRescue = Date.now()
  let busy: string[] = []
  while (quiet < 2) {
    for (const orderId of orderIds) {
      for (const refundId of provider.pendingRefunds(orderId)) provider.finish(refundId, pendingEnd)
    }
    const jobs = await sql<Array<{ kind: string, status: string, attempt: number, lastError: string | null }>>`
      select kind, status, attempt, last_error as "lastError" from jobs
      where (resource_id = any(${resources}) or payload->>'orderId' = any(${orderIds})) and status not in ('completed', 'dead_letter')`
    const [events] = await sql<Array<{ count: number }>>`select count(*)::int as count from webhook_events where order_id = any(${orderIds}) and status = 'received'`
    busy = [
      ...jobs.map(job => `${job.kind} ${job.status} (attempt ${job.attempt}${job.lastError ? `: ${job.lastError.slice(0, 160)}` : ''})`),
      ...(events!.count > 0 ? [`${events!.count} events not applied`] : []),
      ...(world.apiProxy.inFlight() + world.hookProxy.inFlight() > 0 ? ['the proxies are forwarding'] : []),
      ...provider.deliveriesUnderWay().filter(body => orderIds.some(orderId => provider.tokens(orderId).some(token => body.includes(token)))).map(() => 'a webhook being delivered'),
      ...(world.workerStarting ? ['the worker is starting'] : []),
    ]
    quiet = busy.length === 0 ? quiet + 1 : 0
    if (Date.now() > deadline) return [`not settled within ${world.settleMs} ms: ${busy.join('; ')}`]
    // A killed worker's running jobs are rescued once its heartbeat is stale.
    if (jobs.some(job => job.status === 'running') && Date.now() - lastRescue > 1_500) {
      lastRescue = Date.now()
      await opsRequest(world.instances[0].url, '/api/ops/tasks/jobs:rescue', { method: 'POST', timeoutMs: 30_000 })
    }
    await sleep(quiet > 0 ? 60 : 30)
  }
  removeRules(world.apiProxy, label => orderIds.some(orderId => label?.endsWith(`:${orderId}`)))
  for (const disarm of world.standInFaults.splice(0)) disarm()
  return []
}

interface OurRefund { id: string, amount: number, status: string, source: string, providerRefundId: string | null }

/** The order's ledger against the provider's, once settled. */
async function ledgerViolations(world: World, placed: PlacedOrder): Promise<string[]> {
  const { sql, provider } = world
  const orderId = placed.id
  const [order] = await sql<Array<{ status: string, amount: number, currency: string }>>`select status, amount::float8 as amount, currency from orders where id = ${orderId}`
  const ours = await sql<OurRefund[]>`
    select id, amount::float8 as amount, status, source, provider_refund_id as "providerRefundId" from refunds where order_id = ${orderId} order by created_at, id`
  const notices = (await sql<Array<{ effect: string }>>`select effect from side_effects where order_id = ${orderId} and effect like 'refund_notice:%'`).map(row => row.effect.slice('refund_notice:'.length))
  const [emails] = await sql<Array<{ count: number }>>`select count(*)::int as count from mailbox where order_id = ${orderId} and subject like '%refunded'`
  const theirs = provider.ledger(orderId, order!.currency)
  const violations: string[] = []
  const say = (text: string) => violations.push(`${orderId} (${order!.status}, ${order!.amount} ${order!.currency}): ${text}`)

  if (theirs.payments > 1) say(`the provider holds ${theirs.payments} payments`)
  const captured = PAID_STATUSES.has(order!.status) ? order!.amount : 0
  if (captured !== theirs.captured) say(`captured ${captured} here, ${theirs.captured} at the provider`)

  const byOurId = new Map<string, ProviderRefund[]>()
  for (const refund of theirs.refunds) if (refund.ourId) byOurId.set(refund.ourId, [...byOurId.get(refund.ourId) ?? [], refund])
  for (const [ourId, made] of byOurId) {
    if (made.length > 1) say(`the provider holds ${made.length} refunds for our refund ${ourId}: ${made.map(refund => `${refund.providerId} ${refund.amount} ${refund.status}`).join(', ')}`)
    if (!ours.some(refund => refund.id === ourId)) say(`the provider holds refund ${made[0]!.providerId} (${made[0]!.amount} ${made[0]!.status}) for refund id ${ourId}, which we do not hold`)
  }
  const refundJobs = async (refundId: string) => {
    const jobs = await sql<Array<{ status: string, attempt: number, lastError: string | null }>>`
      select status, attempt, last_error as "lastError" from jobs where kind = 'payment.refund' and dedupe_key = ${refundId}`
    return jobs.map(job => `job ${job.status} at attempt ${job.attempt}${job.lastError ? `: ${job.lastError.slice(0, 200)}` : ''}`).join('; ') || 'no job'
  }
  for (const refund of ours) {
    const atProvider = refund.source === 'provider'
      ? theirs.refunds.filter(made => made.providerId === refund.providerRefundId)
      : byOurId.get(refund.id) ?? []
    const [made] = atProvider
    const theirsSays = made ? `${made.providerId} ${made.amount} ${made.status}` : 'nothing'
    if (refund.status === 'pending') {
      say(`refund ${refund.id} (${refund.source}, ${refund.amount}) is still pending after the settle window (${await refundJobs(refund.id)}); the provider has ${theirsSays}`)
      continue
    }
    if (refund.status === 'succeeded') {
      if (refund.source !== 'provider' && !made) say(`refund ${refund.id} (${refund.source}, ${refund.amount}) succeeded here; the provider has no refund under its id`)
      if (made && made.status !== 'succeeded') say(`refund ${refund.id} (${refund.source}, ${refund.amount}) succeeded here; at the provider ${theirsSays}`)
      if (made && refund.source !== 'provider' && made.amount !== refund.amount) say(`refund ${refund.id} is ${refund.amount} here; at the provider ${theirsSays}`)
    }
    if (refund.status === 'failed' && made && made.status !== 'failed' && made.status !== 'canceled') {
      say(`refund ${refund.id} (${refund.source}, ${refund.amount}) failed here (${await refundJobs(refund.id)}); at the provider ${theirsSays}`)
    }
  }
  const sum = (amounts: number[]) => amounts.reduce((total, amount) => total + amount, 0)
  const succeededHere = ours.filter(refund => refund.status === 'succeeded')
  const refundedHere = sum(succeededHere.map(refund => refund.amount))
  const refundedThere = sum(theirs.refunds.filter(refund => refund.status === 'succeeded').map(refund => refund.amount))
  if (refundedHere !== refundedThere) {
    say(`Σ succeeded refunds ${refundedHere} here (${ours.map(refund => `${refund.id} ${refund.source} ${refund.amount} ${refund.status}`).join(', ') || 'none'}), `
      + `${refundedThere} at the provider (${theirs.refunds.map(refund => `${refund.providerId}${refund.ourId ? ` for ${refund.ourId}` : ''} ${refund.amount} ${refund.status}`).join(', ') || 'none'})`)
  }
  if (captured > 0) {
    const expected = refundedHere === 0 ? 'paid' : refundedHere < captured ? 'partially_refunded' : 'refunded'
    if (order!.status !== expected) say(`status ${order!.status}, but its succeeded refunds (${refundedHere}) make it ${expected}`)
  }
  const succeededIds = succeededHere.map(refund => refund.id).sort()
  if (JSON.stringify([...notices].sort()) !== JSON.stringify(succeededIds) || emails!.count !== succeededIds.length) {
    say(`refund notices for [${[...notices].sort().join(', ')}] (${emails!.count} e-mails), succeeded refunds [${succeededIds.join(', ')}]`)
  }
  return violations
}
