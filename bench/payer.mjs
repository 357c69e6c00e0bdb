// The shoppers of the "as deployed" rows: every order's payment intent, once the worker has asked
// mockpay for it, is paid on mockpay's page (POST /api/mockpay/intents/:id/confirm), as the
// checkout page's shopper would. The load generator sends those confirmations between its orders;
// what is still unpaid when it stops is paid right after, so that every order of a run goes the
// whole way: create_intent, mockpay's signed deliveries (with their duplicate), webhook.apply and
// the order's effects. Helpers only: bench/run.mjs drives them.

const pollMs = 50
const confirmBody = JSON.stringify({ outcome: 'succeed' })

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
  const [{ since }] = await sql`select now() as since`
  const queue = []
  const handedOut = new Set()
  let stopped = false
  const offer = (ids) => {
    for (const { id } of ids) {
      if (handedOut.has(id)) continue
      handedOut.add(id)
      queue.push(id)
    }
  }
  const polling = (async () => {
    while (!stopped) {
      offer(await unpaid(sql, since))
      await new Promise(resolve => setTimeout(resolve, pollMs))
    }
  })()
  return {
    take: () => queue.shift(),
    async payRest(url) {
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
    stop: async () => {
      stopped = true
      await polling
    },
  }
}
