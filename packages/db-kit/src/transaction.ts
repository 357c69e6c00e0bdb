import { type CommitPipeline, takeOpeningPipeline } from './pipeline'
import { asDrizzleSql } from './statements'
import type { AfterCommitHook, BoundStatement, Database, DatabaseHandle, DeferrableQuery } from './types'

const handles = new WeakMap<object, DatabaseHandle>()

interface OpenTransaction {
  handle: DatabaseHandle
  hooks: Set<AfterCommitHook>
  /** The queries writeAtCommit() deferred: the pipeline's own list, which it sends with COMMIT, when there is one. */
  deferred: DeferrableQuery[]
  /** The driver's pipeline for this transaction (postgres.js with pipelining): it sends the deferred queries and queryPrepared's statements itself. */
  pipeline?: CommitPipeline
}
const openTransactions = new WeakMap<object, OpenTransaction>()

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
    const open: OpenTransaction = { handle, hooks, deferred: pipeline?.atCommit ?? [], pipeline }
    openTransactions.set(tx, open)
    const done = await work(tx as unknown as Database)
    // Issued together: on postgres.js one write on the transaction's connection, before its COMMIT.
    if (!open.pipeline) await Promise.all(open.deferred.map(query => ('text' in query ? tx.execute(asDrizzleSql(query)) : query)))
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
 * Sends `query` (a drizzle query built on `tx`, not awaited, or a defineStatement's BoundStatement)
 * with the transaction's COMMIT: for a last write whose answer nobody reads, it costs no round trip
 * of its own. It runs after every other statement of the transaction, in the order deferred; if it
 * fails, the transaction rolls back and transaction() rejects with its error. `tx` must be a
 * transaction opened with transaction().
 */
export function writeAtCommit(tx: Database, query: DeferrableQuery): void {
  const open = openTransactions.get(tx)
  if (!open) throw new Error('writeAtCommit() outside transaction(): open the transaction with transaction() from @idempotent-checkout/db-kit')
  open.deferred.push(query)
}

/**
 * A BoundStatement as one of the transaction's statements (queryPrepared on `tx`): sent by the
 * driver on the transaction's connection where it pipelines, through drizzle otherwise.
 */
export async function queryInTransaction(tx: Database, statement: BoundStatement): Promise<Array<Record<string, unknown>>> {
  const pipeline = openTransactions.get(tx)?.pipeline
  if (pipeline) return pipeline.run(statement)
  const result = await tx.execute(asDrizzleSql(statement)) as Array<Record<string, unknown>> | { rows: Array<Record<string, unknown>> }
  return Array.isArray(result) ? result : result.rows
}
