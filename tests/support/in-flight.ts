import type postgres from 'postgres'
import type { AppProcess } from './app'
import { processingLockKey as lockName } from '../../packages/nuxt-idempotency/src/runtime/core/run'
import { pollUntil } from './poll'
import { connectSharedTestRedis } from './redis-topologies'

/**
 * "The request with this key is in flight", for the atomic routes (POST /api/orders, webhooks).
 * Their record is inserted already finished, in one statement with the business rows, so nothing in
 * the idempotency table shows a request that has not committed. What does:
 * - its processing lock in Redis, `<REDIS_KEY_PREFIX>idempotency:<scope>:<key>` (value
 *   `<token> <fingerprint>`), taken before its statement and released after its answer;
 * - with the `delay-before-commit` fault (BEGIN; statement; sleep; COMMIT), its open transaction: a
 *   session of the app that ran the statement inserting the record and sits "idle in transaction".
 */

export interface InFlightRequest {
  /** The instance running it: the lock lives under its REDIS_KEY_PREFIX (none without Redis). */
  app: Pick<AppProcess, 'redisKeyPrefix'>
  /** `tenant:<tenantId>` for orders, `provider:<name>` for webhooks. */
  scope: string
  key: string
}

/** The Redis key of the request's processing lock, prefix included. */
export function processingLockKey({ app, scope, key }: InFlightRequest): string {
  if (app.redisKeyPrefix === undefined) throw new Error('an instance without Redis holds its processing locks in memory')
  return `${app.redisKeyPrefix}${lockName(scope, key)}`
}

/**
 * How many sessions of the app on `sql`'s database hold an idempotent statement uncommitted: the
 * record and the business rows composed into one statement (`with s0 as (…), s1 as (…) select 1`,
 * DatabaseHandle.transact). Matched by that opening, since pg_stat_activity cuts the text at
 * track_activity_query_size (1 KiB) — before the record's insert, which comes last.
 */
export async function openIdempotentTransactions(sql: postgres.Sql): Promise<number> {
  const [row] = await sql<Array<{ count: number }>>`
    select count(*)::int as count from pg_stat_activity
    where datname = current_database() and application_name = 'idempotent-checkout'
      and state = 'idle in transaction' and query like 'with s% as (%'`
  return row!.count
}

/**
 * Resolves once the request (sent with `delay-before-commit`) holds its processing lock and has run
 * its statement without committing it: a duplicate sent now is sure to find it in flight, and killing
 * its instance now kills it inside its transaction. Each suite has its own database and holds one
 * request in flight at a time, so that request's must be the one open transaction there.
 */
export async function untilRequestInFlight(sql: postgres.Sql, request: InFlightRequest): Promise<void> {
  // The instance's Redis is the shared test Redis, on this run's topology; its keys are read by their full names.
  const redis = request.app.redisKeyPrefix === undefined ? undefined : await connectSharedTestRedis('in-flight', { prefix: '' })
  try {
    await pollUntil(`the request with key ${request.key} holds its processing lock and its uncommitted statement`, async () =>
      (!redis || await redis.client.exists(processingLockKey(request)) === 1) && await openIdempotentTransactions(sql) === 1, { intervalMs: 20 })
  }
  finally {
    await redis?.close()
  }
}
