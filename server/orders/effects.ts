import { shiftParams } from 'nuxt-idempotency/db'
import type { JobEffect } from '../jobs/store'

/** A refund's notice is one per refund: `refund_notice:<refund id>`. */
export type SideEffect = 'confirmation_email' | 'invoice' | `refund_notice:${string}`

/**
 * A side effect of an order, performed once per (order, effect) however often its job runs: the
 * effect's write reads its rows from `marker`, the (order, effect) marker this completion inserts
 * (from `done`, so only under a current fence). The unique (order_id, effect) decides: a marker that
 * already exists, or that a concurrent transaction is committing (this one waits for it), inserts
 * nothing, and the write writes nothing. Rolled back with the statement, the marker never counted.
 *
 * `write` is one INSERT … SELECT … FROM marker (marker has `order_id`), numbered $1… on its own.
 */
export function markedEffect(orderId: string, effect: SideEffect, jobId: string, write: JobEffect): JobEffect {
  const shift = 3
  return {
    text: `marker as (insert into side_effects (order_id, effect, job_id) select $1::text, $2::text, $3::text from done `
      + `on conflict (order_id, effect) do nothing returning order_id), `
      + `effect as (${shiftParams(write.text, shift)})`,
    params: [orderId, effect, jobId, ...write.params],
  }
}
