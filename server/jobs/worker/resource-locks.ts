import { LockBackendError, type Locks } from 'nuxt-idempotency/core'
import { log } from '../../observability/logger'
import { metrics } from '../../observability/metrics'

/** A resource lock this worker holds, shared by its claimed jobs on that resource (they run one at a time). */
export interface HeldLock {
  key: string
  /** Absent: the lock backend was unreachable and the job runs on the Postgres fence alone. */
  token?: string
  holders: number
  lost: boolean
}

/** A claimed job as the lock keeper sees it: the lock it wants, and what it got. */
export interface LockingJob {
  lockKey?: string
  /** A job that already failed takes no lock; one whose lock could not be asked for fails with this. */
  failure?: unknown
  lock?: HeldLock
  lockBusy?: boolean
}

export interface LockKeeperOptions {
  locks: Locks
  lockTtlMs: number
  workerId: string
  /** A lock whose job is paused (the stall fault) is not renewed, as in a GC pause. */
  paused: (held: HeldLock) => boolean
  /** Called once per lock found gone: another worker may hold the resource now. */
  lost: (held: HeldLock) => void
}

/** A token; 'busy' when another holds the resource; no token when the backend is unreachable (degraded). */
async function acquire(options: LockKeeperOptions, key: string): Promise<{ token?: string } | 'busy'> {
  const started = performance.now()
  const count = (result: 'acquired' | 'busy' | 'degraded') => {
    metrics.lockAcquires.inc({ result })
    metrics.lockWait.observe({ result }, (performance.now() - started) / 1000)
  }
  try {
    const token = await options.locks.acquire(key, options.lockTtlMs)
    count(token ? 'acquired' : 'busy')
    return token ? { token } : 'busy'
  }
  catch (error) {
    if (!(error instanceof LockBackendError)) throw error
    // Degrade instead of stalling every job: the fence token and the side-effect markers in
    // Postgres still make a concurrent run harmless.
    count('degraded')
    log.warn('lock backend unavailable; running on the Postgres fence alone', { lockKey: key, worker: options.workerId })
    return {}
  }
}

/** released; expired: the lock was no longer ours (TTL ran out, taken over); error: no answer. */
async function release(locks: Locks, key: string, token: string): Promise<'released' | 'expired' | 'error'> {
  const result = await locks.release(key, token).then(held => (held ? 'released' : 'expired'), () => 'error' as const)
  metrics.lockReleases.inc({ result })
  return result
}

/**
 * A lock this worker already holds is shared (its jobs run one after another); the others are
 * acquired together, in one tick, so the Redis client sends them in one write.
 */
async function lockBatch(heldLocks: Map<string, HeldLock>, options: LockKeeperOptions, entries: readonly LockingJob[]): Promise<void> {
  const wanted = new Map<string, LockingJob[]>()
  for (const entry of entries) {
    if (!entry.lockKey || entry.failure) continue
    const held = heldLocks.get(entry.lockKey)
    if (held && !held.lost) {
      held.holders++
      entry.lock = held
      continue
    }
    wanted.set(entry.lockKey, [...wanted.get(entry.lockKey) ?? [], entry])
  }
  await Promise.all([...wanted].map(async ([key, entries]) => {
    const acquired = await acquire(options, key).catch((error) => {
      for (const entry of entries) entry.failure = error
      return undefined
    })
    if (!acquired) return
    if (acquired === 'busy') {
      for (const entry of entries) entry.lockBusy = true
      return
    }
    const held: HeldLock = { key, token: acquired.token, holders: entries.length, lost: false }
    heldLocks.set(key, held)
    for (const entry of entries) entry.lock = held
  }))
}

export function createLockKeeper(options: LockKeeperOptions) {
  const heldLocks = new Map<string, HeldLock>()

  function lost(held: HeldLock): void {
    if (held.lost) return
    held.lost = true
    options.lost(held)
  }

  return {
    lockAll: (entries: readonly LockingJob[]) => lockBatch(heldLocks, options, entries),

    /** This job's share of its lock is given back; the last holder releases it. */
    drop(entry: LockingJob): Promise<string> | undefined {
      const held = entry.lock
      if (!held) return undefined
      entry.lock = undefined
      held.holders--
      if (held.holders > 0) return undefined
      if (heldLocks.get(held.key) === held) heldLocks.delete(held.key)
      return held.token ? release(options.locks, held.key, held.token) : undefined
    },

    /** Extends every lock this worker holds (every third of its TTL); a lock found gone is reported lost. */
    renew(): void {
      for (const held of heldLocks.values()) {
        if (!held.token || held.lost || options.paused(held)) continue
        options.locks.extend(held.key, held.token, options.lockTtlMs).then((still) => {
          if (!still) lost(held)
        }, (error) => {
          if (!(error instanceof LockBackendError)) return
          log.warn('lock renewal failed: lock backend unavailable; the Postgres fence still protects the work', { worker: options.workerId, lockKey: held.key })
        })
      }
    },
  }
}
