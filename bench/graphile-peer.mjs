// The worker drain benchmark's peer (spawned by bench/drain.mjs): graphile-worker running the same
// unit of work as the product's `order.send_confirmation` job kind: read the order, then insert the
// (order, 'confirmation_email') marker and the email in one statement, the email only when the
// marker is new. GRAPHILE_MODE=default keeps graphile-worker's defaults except concurrency and
// poll interval, which match our worker's; GRAPHILE_MODE=batched adds a local queue and batched
// completion; GRAPHILE_MODE=migrate installs graphile-worker's schema and exits, so no run times it.
// Stops on SIGTERM; on exit prints `max-attempt N` on stdout (the highest attempt any job ran).
import { randomBytes } from 'node:crypto'
import { Logger, run, runMigrations } from 'graphile-worker'

const connectionString = process.env.DATABASE_URL
const mode = process.env.GRAPHILE_MODE ?? 'default'
const concurrency = Number(process.env.WORKER_CONCURRENCY ?? 4)
const pollInterval = Number(process.env.JOB_POLL_INTERVAL_MS ?? 200)

// Warnings and errors only, as our worker runs with LOG_LEVEL=warn.
const logger = new Logger(() => (level, message) => {
  if (level === 'error' || level === 'warning') console.error(`graphile-worker ${level}: ${message}`)
})

if (mode === 'migrate') {
  await runMigrations({ connectionString, logger })
  process.exit(0)
}

const presets = {
  default: undefined,
  // Option names as in graphile-worker 0.17's GraphileConfig.WorkerOptions (dist/index.d.ts).
  batched: { worker: { localQueue: { size: concurrency + 1 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } },
}
if (!(mode in presets)) throw new Error(`GRAPHILE_MODE must be default, batched or migrate, not ${mode}`)

// Same text as the product's newId('msg') and its confirmation email (order-effects.ts).
const newId = prefix => `${prefix}_${randomBytes(15).toString('base64url')}`
const formatAmount = (amount, currency) => `${currency} ${amount.toLocaleString('en-US')}`

let maxAttempt = 0

const taskList = {
  'order.send_confirmation': async ({ orderId }, helpers) => {
    maxAttempt = Math.max(maxAttempt, helpers.job.attempts)
    await helpers.withPgClient(async (client) => {
      const { rows: [order] } = await client.query('select id, tenant_id, amount, currency, cart_id, customer from orders where id = $1', [orderId])
      if (!order) throw new Error(`order ${orderId} not found`)
      // bigint arrives as a string from node-postgres; the product formats a number.
      const amount = formatAmount(Number(order.amount), order.currency)
      // One statement, so one implicit transaction: the email exists only with its new marker.
      await client.query(`with marker as (
          insert into side_effects (order_id, effect, job_id) values ($1, 'confirmation_email', $2)
          on conflict (order_id, effect) do nothing returning order_id)
        insert into mailbox (id, tenant_id, order_id, "to", subject, body)
        select $3, $4, order_id, $5, $6, $7 from marker`, [
        order.id,
        String(helpers.job.id),
        newId('msg'),
        order.tenant_id,
        order.customer.email,
        `Order ${order.id} confirmed`,
        `Thank you. We received ${amount} for order ${order.id} (cart ${order.cart_id}).`,
      ])
    })
  },
}

const runner = await run({ connectionString, concurrency, pollInterval, noHandleSignals: true, logger, taskList, preset: presets[mode] })

let stopping = false
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, async () => {
    if (stopping) return
    stopping = true
    // stop() waits for running jobs and flushes batched completions.
    await runner.stop()
    process.stdout.write(`max-attempt ${maxAttempt}\n`)
    process.exit(0)
  })
}
await runner.promise
