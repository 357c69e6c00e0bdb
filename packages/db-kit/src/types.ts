import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core'
import type { PoolMode } from './postgres-options'

/**
 * The database as every piece sees it, in a file of its own so that the client, the statements and
 * the transactions each import it and none imports another.
 */

// Relational queries (`db.query.*`) are not used: the schema does not need to be part of the type.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Database = PgDatabase<PgQueryResultHKT, any>

/** A statement's text and its parameters as the driver takes them: what `DatabaseHandle.transact` sends. */
export interface BoundStatement {
  text: string
  params: unknown[]
  /** Runs once the transaction that carried the statement committed (`DatabaseHandle.transact`). */
  afterCommit?: AfterCommitHook
}

/**
 * Work that must wait until a transaction committed (wake the workers for the jobs it enqueued),
 * registered by whoever writes inside the transaction instead of by every caller after it. A
 * rolled-back transaction runs none of its hooks. Hooks are deduplicated: a transaction that
 * enqueues ten jobs wakes the workers once.
 */
export type AfterCommitHook = (handle: DatabaseHandle) => void

export interface DatabaseHandle {
  db: Database
  driver: 'postgres' | 'pglite'
  /**
   * postgres.js only. `transaction`: DATABASE_URL is a transaction pooler, so every statement is
   * unnamed (unprepared) and every transaction sets its own timeouts (SET LOCAL).
   */
  poolMode?: PoolMode
  /** Round trip to the server: readiness checks. */
  ping(): Promise<void>
  /**
   * Runs the statements as one transaction with one commit. On postgres.js they travel as one
   * statement (`with s0 as (…), s1 as (…) select 1`, prepared): one socket write, one round trip.
   * Rejects with the first failure, everything rolled back.
   */
  transact(statements: BoundStatement[], options?: TransactOptions): Promise<void>
  /**
   * Cross-process notifications (LISTEN/NOTIFY) on a dedicated connection that reconnects by itself;
   * absent on PGlite, which is one process, and behind a transaction pooler without a direct URL,
   * where a LISTEN does not outlive its transaction (their workers poll).
   */
  notifications?: {
    listen(channel: string, onNotify: () => void): Promise<() => Promise<void>>
    notify(channel: string): Promise<void>
  }
  close(): Promise<void>
}

export interface TransactOptions {
  /**
   * Runs after the statements, before COMMIT (an explicit transaction, test faults only); throwing
   * rolls back. On PGlite it runs before BEGIN, so that a delay does not hold the one connection.
   */
  beforeCommit?: () => Promise<void>
}

/**
 * What writeAtCommit() takes: a drizzle query not yet run (a query builder, or `tx.execute(sql…)`),
 * compiled when sent; or a BoundStatement (defineStatement's), whose text was compiled once — the
 * cheaper one for a write every request makes.
 */
export type DeferrableQuery = BoundStatement | (PromiseLike<unknown> & ({ toSQL(): CompiledQuery } | { getQuery(): CompiledQuery }))
type CompiledQuery = { sql: string, params: unknown[] }
