import { appendFileSync } from 'node:fs'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, it } from 'vitest'
import { type AppProcess, fastJobsEnv, stopAll, testSecrets } from '../support/app'
import { request } from '../support/http'
import { type FaultProxy, startFaultProxy } from '../support/fault-proxy'
import { describeCommand, type Sequence, sequenceArbitrary } from '../support/ledger-model/commands'
import { midtransSide, stripeSide } from '../support/ledger-model/providers'
import { runSequence, type World } from '../support/ledger-model/world'
import { startMidtransApi } from '../support/midtrans-api'
import { midtransEnv, type ProviderStack, startProviderStack, stripeEnv, stripeSecretKey } from '../support/providers'
import { describeWithServices, redisUrl } from '../support/services'
import { startStripeApi } from '../support/stripe-api'
import { startWorker } from '../support/worker'

// The ledger model (docs/testing.md): random sequences of commands — orders placed, paid, refunded
// through the API and the ops console on two instances at once, under reused keys, in the
// provider's dashboard, canceled; refunds the provider keeps pending and then finishes or fails;
// faults of a proxy in front of the provider (an answer lost or held past the app's timeout after
// the provider acted, a request reaching it only after the timeout, 500/429/406/409, a 500 Stripe
// keeps under the refund's key); webhooks held
// back, duplicated and released out of order; reconciliation runs; the standalone worker killed —
// against each provider's stand-in, and after every command and once each sequence settled, our
// ledger checked against the provider's, and the orders' stock against the stock ledger
// (tests/support/stock-invariants.ts: every order's SKU is tracked). `npm run test:ledger -- --runs N --seed S` runs more.

const RUNS = Number(process.env.LEDGER_MODEL_RUNS ?? 200)
const SEED = Number(process.env.LEDGER_MODEL_SEED ?? 39)
/** Stops looking (and shrinking) after this many seconds per provider; 0: no limit. */
const TIME_LIMIT_S = Number(process.env.LEDGER_MODEL_TIME_LIMIT_S ?? 0)
/** Shrinks a failing sequence unless 0. */
const SHRINK = process.env.LEDGER_MODEL_SHRINK !== '0'
/**
 * Runs every sequence even after one failed, and fails at the end with the list of failing runs
 * (each replayable with --path <run index>): a survey of what the model finds.
 */
const KEEP_GOING = process.env.LEDGER_MODEL_KEEP_GOING === '1'
/** One sequence to run instead of drawn ones: its commands as JSON (a failure's shrunk list, or one written by hand). */
const SEQUENCE = process.env.LEDGER_MODEL_SEQUENCE
/** Appends one JSON line per provider with the run's counts. */
const REPORT_FILE = process.env.LEDGER_MODEL_REPORT
const PROVIDERS = (process.env.LEDGER_MODEL_PROVIDERS ?? 'stripe,midtrans').split(',')

/** Short, so timeouts cost little; the stand-ins answer in milliseconds. */
const PROVIDER_TIMEOUT_MS = 700
const SETTLE_MS = 25_000

interface StartedWorld { world: World, close: () => Promise<void> }

async function startWorld(name: 'stripe' | 'midtrans'): Promise<StartedWorld> {
  const instances: AppProcess[] = []
  let turn = 0
  // Webhooks reach the two instances in turn, through the proxy.
  const hookProxy = await startFaultProxy({ target: () => instances[turn++ % instances.length]!.url })
  const closers: Array<() => Promise<void>> = [() => hookProxy.close()]
  let apiProxy: FaultProxy | undefined
  let stack: ProviderStack | undefined
  try {
    const standIn = name === 'stripe'
      ? await startStripeApi({ secretKey: stripeSecretKey, webhook: { url: `${hookProxy.url}/api/webhooks/stripe`, secret: testSecrets.webhookStripeSecret } })
      : await startMidtransApi({ serverKey: testSecrets.midtransServerKey, webhookUrl: `${hookProxy.url}/api/webhooks/midtrans` })
    closers.push(() => standIn.close())
    const provider = name === 'stripe' ? stripeSide(standIn as Awaited<ReturnType<typeof startStripeApi>>) : midtransSide(standIn as Awaited<ReturnType<typeof startMidtransApi>>)
    apiProxy = await startFaultProxy({ target: standIn.url })
    closers.push(() => apiProxy!.close())
    const env = {
      ...(name === 'stripe' ? stripeEnv(apiProxy) : midtransEnv(apiProxy)),
      ...fastJobsEnv,
      JOB_POLL_INTERVAL_MS: '25',
      PAYMENT_PROVIDER_TIMEOUT_MS: String(PROVIDER_TIMEOUT_MS),
      PAYMENT_RECONCILE_AFTER_SECONDS: '1',
      // A killed worker's jobs are rescued, and its order locks expire, within seconds.
      JOB_HEARTBEAT_TIMEOUT_MS: '2000',
      JOB_LOCK_TTL_MS: '2000',
    }
    stack = await startProviderStack(`ledger_${name}`, env)
    closers.unshift(() => stack!.close())
    instances.push(stack.app, await stack.startInstance(`ledger-${name}-b`))
    // Every order's SKU is tracked, so each order reserves, and its payment or cancel settles, stock.
    for (const sku of new Set(provider.orderBodies.flatMap(body => body().items.map(item => item.sku)))) {
      const set = await request(stack.app.url, `/api/inventory/${sku}`, { method: 'PUT', headers: { 'authorization': `Bearer ${stack.tenant.secretKey}`, 'content-type': 'application/json' }, body: '{"onHand":1000000}' })
      if (set.status !== 200) throw new Error(`PUT /api/inventory/${sku} answered ${set.status}: ${set.text}`)
    }
    const worker = await startWorker({ databaseUrl: stack.databaseUrl, redisUrl, redisKeyPrefix: stack.redisKeyPrefix, label: `ledger-${name}-worker`, env })
    const world: World = {
      provider,
      sql: stack.sql,
      tenant: stack.tenant,
      instances: [instances[0]!, instances[1]!],
      databaseUrl: stack.databaseUrl,
      redisKeyPrefix: stack.redisKeyPrefix,
      workerEnv: env,
      worker,
      workerStarting: undefined,
      standInFaults: [],
      apiProxy,
      hookProxy,
      providerTimeoutMs: PROVIDER_TIMEOUT_MS,
      settleMs: SETTLE_MS,
    }
    return {
      world,
      close: async () => {
        await world.workerStarting?.catch(() => {})
        await world.worker?.stop()
        for (const close of closers) await close()
      },
    }
  }
  catch (error) {
    for (const close of closers) await close().catch(() => {})
    throw error
  }
}

/** Runs RUNS sequences through fast-check; a failure names its seed, path and shrunk commands. */
async function checkModel(world: World): Promise<void> {
  const { provider } = world
  const arbitrary = SEQUENCE
    ? fc.constant(JSON.parse(SEQUENCE) as Sequence)
    : sequenceArbitrary({ faults: provider.faults, keepsRefundsPending: provider.keepsRefundsPending, keepsDashboardRefundsPending: provider.keepsDashboardRefundsPending, variants: provider.orderBodies.length, crashes: true })
  const executed: Record<string, number> = {}
  let sequences = 0
  let failing = 0
  let slowestSettleMs = 0
  const failures: string[] = []
  const started = Date.now()
  const property = fc.asyncProperty(arbitrary, async (sequence) => {
    const report = await runSequence(world, sequence)
    if (KEEP_GOING && report.violations.length > 0) {
      failures.push(`path ${sequences}: ${report.violations.join(' | ')}\n    ${JSON.stringify(sequence)}`)
      report.violations = []
      failing++
    }
    sequences++
    slowestSettleMs = Math.max(slowestSettleMs, report.settleMs)
    for (const [kind, count] of Object.entries(report.executed)) executed[kind] = (executed[kind] ?? 0) + count
    if (report.violations.length > 0) {
      failing++
      throw new Error(`${report.violations.length} violation(s):\n  ${report.violations.join('\n  ')}\nCommands and what came of them:\n  ${report.log.join('\n  ')}`)
    }
  })
  const summary = () => ({
    provider: provider.name, seed: SEED, runs: RUNS, sequencesRun: sequences, failingSequences: failing, keptGoing: KEEP_GOING,
    seconds: Math.round((Date.now() - started) / 1000), slowestSettleMs, commandsExecuted: executed,
  })
  try {
    await fc.assert(property, {
      numRuns: SEQUENCE ? 1 : RUNS,
      seed: SEED,
      verbose: 1,
      endOnFailure: !SHRINK,
      ...(TIME_LIMIT_S > 0 && { interruptAfterTimeLimit: TIME_LIMIT_S * 1000, markInterruptAsFailure: false }),
      reporter: (details) => {
        if (!details.failed) return
        const sequence = details.counterexample?.[0]
        const commands = sequence?.commands.map(describeCommand) ?? []
        throw new Error(`ledger model (${provider.name}) failed: seed ${details.seed}, path "${details.counterexamplePath}", shrunk ${details.numShrinks} time(s) to:\n  ${commands.join('\n  ')}\n  (refunds left pending then ${sequence?.pendingEnd})\n`
          + `replay: npm run test:ledger -- --provider ${provider.name} --seed ${details.seed} --path ${details.counterexamplePath}\n`
          + `or: npm run test:ledger -- --provider ${provider.name} --sequence '${JSON.stringify(sequence)}'\n${String(details.errorInstance)}`)
      },
      ...(process.env.LEDGER_MODEL_PATH && { path: process.env.LEDGER_MODEL_PATH }),
    })
  }
  finally {
    console.info(`ledger model: ${JSON.stringify(summary())}`)
    if (REPORT_FILE) appendFileSync(REPORT_FILE, `${JSON.stringify({ ...summary(), failures })}\n`)
  }
  if (failures.length > 0) throw new Error(`ledger model (${provider.name}, seed ${SEED}): ${failures.length} of ${sequences} sequences failed:\n  ${failures.join('\n  ')}`)
}

describeWithServices('ledger model: random command sequences, our ledger against the provider\'s', ['postgres', 'redis'], () => {
  afterAll(async () => {
    await stopAll()
  })

  for (const name of ['stripe', 'midtrans'] as const) {
    describe.runIf(PROVIDERS.includes(name))(name === 'stripe' ? 'Stripe stand-in' : 'Midtrans stand-in', () => {
      let started: StartedWorld | undefined
      beforeAll(async () => {
        started = await startWorld(name)
      }, 180_000)
      afterAll(async () => {
        await started?.close()
      })

      it(`${RUNS} sequences (seed ${SEED}) on two instances and a worker: ledgers equal, refunds within the payment, one provider refund per refund id, one notice per succeeded refund, stock settled once and equal to its ledger, nothing left pending`, async () => {
        await checkModel(started!.world)
      }, 6 * 3600_000)
    })
  }
})
