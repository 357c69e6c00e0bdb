import type { AfterCommitHook, Database, DatabaseHandle } from './types'

const handles = new WeakMap<object, DatabaseHandle>()
const openTransactions = new WeakMap<object, { handle: DatabaseHandle, hooks: Set<AfterCommitHook> }>()

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

/** `db.transaction`, whose work may register after-commit hooks on its `tx` (see afterCommit). */
export async function transaction<T>(db: Database, work: (tx: Database) => Promise<T>): Promise<T> {
  const handle = handles.get(db)
  if (!handle) throw new Error('transaction() needs a database opened by openDatabase()')
  const hooks = new Set<AfterCommitHook>()
  const result = await db.transaction(async (tx) => {
    openTransactions.set(tx, { handle, hooks })
    return work(tx as unknown as Database)
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
