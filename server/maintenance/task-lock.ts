import { RETENTION_LOCK_TTL_MS } from '@idempotent-checkout/db-kit'
import { LockBackendError, type Locks } from 'nuxt-idempotency/core'
import { log } from '../observability/logger'

/**
 * Every instance runs the maintenance services (docs/operations.md#maintenance), so each run takes
 * a lock and the others skip; their statements use SKIP LOCKED, so even two runs at once (lock
 * backend down) only share the work.
 */

/**
 * How long a task's lock is held at most; it is not renewed, so a run must end first. The longest
 * runs, retention's, set it (their budget, RETENTION_PACE.budgetMs, ends first).
 */
const TASK_LOCK_TTL_MS = RETENTION_LOCK_TTL_MS

/** skipped: another instance holds the task's lock and does the work. */
export type Skippable<T> = { skipped: true } | ({ skipped: false } & T)

/** What most services report: rows or orders handled, by what happened to them. */
export type MaintenanceResult = Skippable<{ counts: Record<string, number> }>

/** Runs `work` under the task's lock, or skips when another instance holds it. */
export async function withTaskLock<T extends object>(locks: Locks, name: string, work: () => Promise<T>): Promise<Skippable<T>> {
  const key = `lock:task:${name}`
  let token: string | null | undefined
  try {
    token = await locks.acquire(key, TASK_LOCK_TTL_MS)
    if (!token) return { skipped: true }
  }
  catch (error) {
    if (!(error instanceof LockBackendError)) throw error
    log.warn('lock backend unavailable; running the task unlocked (its statements skip locked rows)', { task: name })
  }
  try {
    return { skipped: false, ...await work() }
  }
  finally {
    if (token) await locks.release(key, token).catch(() => {})
  }
}
