import { and, eq } from 'drizzle-orm'
import { type Database, shiftParams } from '@idempotent-checkout/db-kit'
import { sideEffects } from '../db/schema'
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
 * Each write is one INSERT … SELECT … FROM marker (marker has `order_id`), numbered $1… on its own
 * (an invoice sent by email writes its row and the email's).
 */
export function markedEffect(orderId: string, effect: SideEffect, jobId: string, ...writes: JobEffect[]): JobEffect {
  let shift = 3
  const ctes = writes.map((write, index) => {
    const cte = `effect_${index} as (${shiftParams(write.text, shift)})`
    shift += write.params.length
    return cte
  })
  return {
    text: [`marker as (insert into side_effects (order_id, effect, job_id) select $1::text, $2::text, $3::text from done `
      + `on conflict (order_id, effect) do nothing returning order_id)`, ...ctes].join(', '),
    params: [orderId, effect, jobId, ...writes.flatMap(write => write.params)],
  }
}

/** Whether the effect's marker exists: it was performed, by a job whose completion committed. */
export async function effectDone(db: Database, orderId: string, effect: SideEffect): Promise<boolean> {
  const [row] = await db.select({ id: sideEffects.id }).from(sideEffects).where(and(eq(sideEffects.orderId, orderId), eq(sideEffects.effect, effect))).limit(1)
  return row !== undefined
}
