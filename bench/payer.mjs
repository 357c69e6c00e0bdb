// The shoppers of the "as deployed" rows: every order's payment intent, once the worker has asked
// mockpay for it, is paid on mockpay's page (POST /api/mockpay/intents/:id/confirm), as the
// checkout page's shopper would. The load generator sends those confirmations between its orders;
// what is still unpaid when it stops is paid right after, so that every order of a run goes the
// whole way: create_intent, mockpay's signed deliveries (with their duplicate), webhook.apply and
// the order's effects. With the Stripe stand-in as the provider, in its own process, the bench pays
// on the stand-in instead (startStandInPayer). Helpers only: bench/run.mjs drives them.
import { setTimeout as sleep } from 'node:timers/promises'

const pollMs = 50
const confirmBody = JSON.stringify({ outcome: 'succeed' })

/** The run's orders by status (those created since `since`): a paid run's check, every order `paid`. */
async function ordersByStatus(sql, since) {
  const rows = await sql`select status, count(*)::int as count from orders where created_at >= ${since} group by status order by status`
  return rows.map(({ status, count }) => `${count} ${status}`).join(', ')
}

/** When the run began, by the database's clock: the orders and intents from then on are the payer's. */
async function databaseNow(sql) {
  const [{ now }] = await sql`select now() as now`
  return now
}

/**
 * Runs `poll` every `pollMs` until stopped. A failing poll stops the polling; `check()` throws its
 * error, and so does `stop()`.
 */
function pollEvery(poll) {
  let stopped = false
  let failure
  const polling = (async () => {
    while (!stopped && !failure) {
      await poll().catch((error) => { failure = error })
      await sleep(pollMs)
    }
  })()
  const check = () => {
    if (failure) throw failure
  }
  return {
    check,
    async stop() {
      stopped = true
      await polling
      check()
    },
  }
}

/** The request that pays one intent. */
export const confirmRequest = intentId => ({
  path: `/api/mockpay/intents/${intentId}/confirm`,
  headers: { 'content-type': 'application/json' },
  body: confirmBody,
})

/** Intents the worker has created since `since` (another scenario's are not this one's to pay) and nobody has paid yet. */
const unpaid = (sql, since) => sql`select id from payment_intents where status = 'requires_payment' and created_at >= ${since} order by created_at limit 5000`

/**
 * Polls for unpaid intents every `pollMs` and hands each out once (`take`). `payRest(url)` pays,
 * directly, every intent still unpaid (the ones created after the last request was sent) and
 * answers how many. Only the intents created after the payer started are its own.
 */
export async function startPayer(sql) {
  const since = await databaseNow(sql)
  const queue = []
  const handedOut = new Set()
  const offer = (ids) => {
    for (const { id } of ids) {
      if (handedOut.has(id)) continue
      handedOut.add(id)
      queue.push(id)
    }
  }
  const polling = pollEvery(async () => offer(await unpaid(sql, since)))
  return {
    take: () => queue.shift(),
    async payRest(url) {
      polling.check()
      queue.length = 0
      let paid = 0
      for (let ids = await unpaid(sql, since); ids.length; ids = await unpaid(sql, since)) {
        const pending = ids.map(({ id }) => id)
        const payOne = async () => {
          for (let id = pending.shift(); id; id = pending.shift()) {
            const { path, headers, body } = confirmRequest(id)
            const response = await fetch(new URL(path, url), { method: 'POST', headers, body })
            // 409: the load generator's own confirmation got there first.
            if (!response.ok && response.status !== 409) throw new Error(`confirming ${id} answered ${response.status}: ${await response.text()}`)
          }
        }
        paid += pending.length
        await Promise.all(Array.from({ length: 16 }, payOne))
      }
      return paid
    },
    outcome: () => ordersByStatus(sql, since),
    stop: polling.stop,
  }
}

/** Orders of the run still awaiting their payment, with the intent the worker created for them (null: not yet). */
const awaitingPayment = (sql, since) => sql`select payment_intent_id as "intentId" from orders where status = 'pending_payment' and created_at >= ${since} limit 5000`

/**
 * The shopper of a run whose provider is the Stripe stand-in (`standInUrl`): every intent the worker
 * created is paid on the stand-in (`POST /_stand-in/payment_intents/:id/succeed`) once, by the
 * bench's process, as soon as it is seen. The stand-in then sends `payment_intent.succeeded` to the
 * app. `take()` hands nothing to the load generator; `payRest()` pays what is left and resolves
 * once no order of the run awaits its payment (every payment's webhook applied), to how many it paid.
 */
export async function startStandInPayer(sql, standInUrl) {
  const since = await databaseNow(sql)
  const paid = new Set()
  const pay = async (intentId) => {
    const response = await fetch(new URL(`/_stand-in/payment_intents/${intentId}/succeed`, standInUrl), { method: 'POST' })
    if (!response.ok) throw new Error(`paying ${intentId} on the Stripe stand-in answered ${response.status}: ${await response.text()}`)
  }
  /** Pays the run's created intents not paid yet; resolves to the orders still awaiting payment and how many it paid. */
  const payNew = async () => {
    const awaiting = await awaitingPayment(sql, since)
    const unpaid = awaiting.map(({ intentId }) => intentId).filter(id => id !== null && !paid.has(id))
    // Marked before the first is sent: the poller and payRest() may both be looking.
    for (const id of unpaid) paid.add(id)
    for (let i = 0; i < unpaid.length; i += 8) await Promise.all(unpaid.slice(i, i + 8).map(pay))
    return { awaiting: awaiting.length, paid: unpaid.length }
  }
  const polling = pollEvery(payNew)
  return {
    take: () => undefined,
    async payRest() {
      let count = 0
      for (;;) {
        polling.check()
        const { awaiting, paid: now } = await payNew()
        count += now
        if (awaiting === 0) return count
        await sleep(pollMs)
      }
    },
    outcome: () => ordersByStatus(sql, since),
    stop: polling.stop,
  }
}
