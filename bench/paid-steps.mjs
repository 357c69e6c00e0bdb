// Where a paid order's Postgres round trips go, step by step. The counting proxy names each unit of
// work (a statement sent on its own, or a transaction however many turns it took) by its first
// statement; each step below is recognised by that statement's text. mockpay is the simulated
// provider running inside the app: its steps stand for a real provider's own work (creating the
// intent, taking the payment, sending its notifications) and are reported apart from the app's.

/** [step, owner, what its first statement matches], first match wins. */
const steps = [
  ['order created (POST /api/orders: record, order, job)', 'app', /insert into "orders"/],
  ['webhook received (record, event, webhook.apply job)', 'app', /insert into "webhook_events"/],
  ['webhook.apply: the payment applied to the order, its effects enqueued', 'app', /^update "jobs" set "status" = \$1, "last_error"/],
  ['payment.create_intent completed (the intent stored on the order)', 'app', /update orders set payment_intent_id/],
  ['effects completed (confirmation e-mail, invoice)', 'app', /insert into side_effects/],
  ['job claims (every kind, batched)', 'app', /"fence" = nextval/],
  ['jobs\' rows loaded for a batch (orders, webhook events)', 'app', /^select .* from "(orders|webhook_events)" where .*= any\(string_to_array/],
  ['worker wake-ups (NOTIFY)', 'app', /^select pg_notify/],
  ['request log batches', 'app', /^insert into "request_log"/],
  ['jobs put back (resource busy)', 'app', /"attempt" = "jobs"."attempt" - 1/],
  ['idempotency records read (replays, in-flight copies)', 'app', /from "idempotency_records"/],
  ['mockpay: intent created (the provider\'s API call of create_intent)', 'mockpay', /^insert into "payment_intents"/],
  ['mockpay: payment confirmed, its notifications scheduled', 'mockpay', /from "payment_intents" .*for update/],
  ['mockpay: notification jobs completed', 'mockpay', /^with done as \(update "jobs".*returning "id"\) select count/],
]

/**
 * The tally (first statement → round trips per order) by step: rows of { step, owner, round
 * trips } in the order above, then whatever no step recognised; and each owner's sum.
 */
export function paidRoundTripsBySteps(statements) {
  const rows = steps.map(([step, owner]) => ({ step, owner, perOrder: 0 }))
  const other = { step: 'other', owner: 'app', perOrder: 0 }
  for (const [text, perOrder] of statements) {
    const index = steps.findIndex(([, , pattern]) => pattern.test(text))
    ;(index === -1 ? other : rows[index]).perOrder += perOrder
  }
  const all = [...rows, other].filter(row => row.perOrder > 0)
  const shareOf = owner => all.filter(row => row.owner === owner).reduce((sum, row) => sum + row.perOrder, 0)
  return { rows: all, app: shareOf('app'), mockpay: shareOf('mockpay') }
}
