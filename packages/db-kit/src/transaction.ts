import { takeOpeningPipeline } from './pipeline'
import type { AfterCommitHook, BoundStatement, Database, DatabaseHandle } from './types'

const handles = new WeakMap<object, DatabaseHandle>()

interface OpenTransaction {
  handle: DatabaseHandle
  hooks: Set<AfterCommitHook>
  /** The statements writeAtCommit() deferred, where the driver sends them itself with COMMIT (postgres.js). */
  atCommit?: BoundStatement[]
  /** Elsewhere (PGlite, postgres.js without pipelining), the deferred queries, sent in order once the work is done. */
  deferred: DeferrableQuery[]
}
const openTransactions = new WeakMap<object, OpenTransaction>()

/**
 * A drizzle query not yet run (a query builder, or `tx.execute(sql…)`): its text and values, and
 * running it on the transaction it was built on.
 */
export type DeferrableQuery = PromiseLike<unknown> & ({ toSQL(): CompiledQuery } | { getQuery(): CompiledQuery })
type CompiledQuery = { sql: string, params: unknown[] }

/** Makes the handle's database known, so that a write on it (autocommit) can find its hooks' handle. */
export function registerDatabase(handle: DatabaseHandle): DatabaseHandle {
  handles.set(handle.db, handle)
  return handle
}

/** Runs hooks in order; one failing hook does not stop the others (they are best effort). */
export function runAfterCommit(handle: DatabaseHandle, hooks: Iterable<AfterCommitHook>): void {
  for (const hook of hooks) {
    try {
      hook(handle)
    }
    catch {
      // Hooks only hurry work along (a wake-up); what they hurry is already committed.
    }
  }
}

/**
 * `db.transaction`, whose work may register after-commit hooks on its `tx` (see afterCommit) and
 * defer its last writes to the COMMIT (see writeAtCommit). On postgres.js with `pipelining`, BEGIN
 * leaves with the transaction's first statements and COMMIT with the deferred ones, each in the
 * same socket write: a transaction costs its statements' round trips, none of its own. Without it
 * the deferred writes leave together once the work is done, and COMMIT after them.
 */
export async function transaction<T>(db: Database, work: (tx: Database) => Promise<T>): Promise<T> {
  const handle = handles.get(db)
  if (!handle) throw new Error('transaction() needs a database opened by openDatabase()')
  const hooks = new Set<AfterCommitHook>()
  const result = await db.transaction(async (tx) => {
    const pipeline = takeOpeningPipeline()
    const open: OpenTransaction = { handle, hooks, atCommit: pipeline?.atCommit, deferred: [] }
    openTransactions.set(tx, open)
    const done = await work(tx as unknown as Database)
    // Issued together: on postgres.js one write on the transaction's connection, before its COMMIT.
    await Promise.all(open.deferred)
    return done
  })
  runAfterCommit(handle, hooks)
  return result
}

/**
 * Runs `hook` once `db`'s transaction committed: `db` is a transaction opened with transaction(),
 * or the database itself, where every statement commits on its own (the hook runs now).
 */
export function afterCommit(db: Database, hook: AfterCommitHook): void {
  const open = openTransactions.get(db)
  if (open) {
    open.hooks.add(hook)
    return
  }
  const handle = handles.get(db)
  if (!handle) throw new Error('afterCommit() outside transaction(): open the transaction with transaction() from @idempotent-checkout/db-kit, so that its hooks run after COMMIT')
  runAfterCommit(handle, [hook])
}

/**
 * Sends `query` (a drizzle query built on `tx`, not awaited) with the transaction's COMMIT: for a
 * last write whose answer nobody reads, it costs no round trip of its own. It runs after every other
 * statement of the transaction, in the order deferred; if it fails, the transaction rolls back and
 * transaction() rejects with its error. `tx` must be a transaction opened with transaction().
 */
export function writeAtCommit(tx: Database, query: DeferrableQuery): void {
  const open = openTransactions.get(tx)
  if (!open) throw new Error('writeAtCommit() outside transaction(): open the transaction with transaction() from @idempotent-checkout/db-kit')
  if (!open.atCommit) {
    open.deferred.push(query)
    return
  }
  const { sql: text, params } = 'toSQL' in query ? query.toSQL() : query.getQuery()
  open.atCommit.push({ text, params })
}
