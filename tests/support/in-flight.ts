import type postgres from 'postgres'
import { pollUntil } from './poll'

/**
 * Resolves once an idempotent request is in flight inside its transaction: with the
 * `delay-before-commit` fault the app holds its one statement (the finished record, the order and
 * its job) uncommitted, so its connection sits "idle in transaction" after that insert. There is no
 * `processing` record to look for in atomic mode. The suites run one file at a time, so the one
 * such session in the test database is the request the test started.
 */
export function untilRequestInFlight(sql: postgres.Sql, what: string): Promise<void> {
  return pollUntil(`${what} is inside its transaction`, async () => {
    const [row] = await sql<Array<{ count: number }>>`
      select count(*)::int as count from pg_stat_activity
      where datname = current_database() and state = 'idle in transaction' and query like '%insert into "idempotency_records"%'`
    return row!.count === 1
  }, { intervalMs: 20 })
}
