import type { Database } from '../db/client'
import { sideEffects } from '../db/schema'

export type SideEffect = 'confirmation_email' | 'invoice' | 'refund_notice'

/**
 * Inserts the (order, effect) marker inside the transaction that performs the effect. True: this
 * transaction owns the effect and must perform it. False: it already happened (or is committing in
 * another transaction, which the unique index makes this one wait for) — do nothing.
 */
export async function claimSideEffect(tx: Database, orderId: string, effect: SideEffect, jobId: string): Promise<boolean> {
  const rows = await tx.insert(sideEffects).values({ orderId, effect, jobId })
    .onConflictDoNothing({ target: [sideEffects.orderId, sideEffects.effect] })
    .returning({ id: sideEffects.id })
  return rows.length === 1
}
