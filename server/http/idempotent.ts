import type { H3Event } from 'h3'
import { type IdempotentReply, type IdempotentRoute, runIdempotentRoute } from 'nuxt-idempotency/server'
import { readCommitFaults } from '../faults'

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never

/**
 * The checkout's use of the idempotency layer (nuxt-idempotency), shared by its orders, refunds,
 * cancel and webhook routes: every body carries `idempotency: { key, replayed }`
 * (docs/api.md#create-an-order--exactly-once), and the test faults
 * (docs/testing.md#faults-tests-only) run around the commit.
 */
export async function runCheckoutIdempotent(event: H3Event, operation: DistributiveOmit<IdempotentRoute, 'annotateBody' | 'beforeCommit'>): Promise<IdempotentReply> {
  const faults = readCommitFaults(event)
  const reply = await runIdempotentRoute(event, { ...operation, annotateBody: true, beforeCommit: faults.beforeCommit } as IdempotentRoute)
  // drop-after-commit: the connection is closed before the answer is written.
  if (reply.outcome === 'miss' && faults.afterCommit && await faults.afterCommit(event)) return { outcome: 'miss', body: {} }
  return reply
}
