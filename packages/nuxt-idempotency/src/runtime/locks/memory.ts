import { randomUUID } from 'node:crypto'
import type { Locks } from './types'

interface HeldLock {
  token: string
  tag?: string
  expiresAt: number
  expiryTimer: NodeJS.Timeout
}

interface ReleaseWaiter {
  resolve: (released: boolean) => void
  timeoutTimer: NodeJS.Timeout
}

/**
 * Single-process locks for development and tests, with the same contract as the Redis ones.
 * Timers are unref'd so that a held lock or a pending waiter never keeps the process alive.
 */
export function createMemoryLocks(): Locks {
  const heldLocks = new Map<string, HeldLock>()
  const waitersByKey = new Map<string, Set<ReleaseWaiter>>()

  // The expiry timer frees the lock and wakes waiters; checking expiresAt as well keeps expiry
  // exact when a busy event loop runs that timer late.
  function liveLock(key: string): HeldLock | undefined {
    const lock = heldLocks.get(key)
    if (lock && lock.expiresAt <= performance.now()) {
      free(key)
      return undefined
    }
    return lock
  }

  function hold(key: string, token: string, ttlMs: number, tag?: string): void {
    const previous = heldLocks.get(key)
    if (previous) clearTimeout(previous.expiryTimer)
    heldLocks.set(key, {
      token,
      tag,
      expiresAt: performance.now() + ttlMs,
      expiryTimer: setTimeout(() => free(key), ttlMs).unref(),
    })
  }

  function free(key: string): void {
    const lock = heldLocks.get(key)
    if (!lock) return
    clearTimeout(lock.expiryTimer)
    heldLocks.delete(key)
    const waiters = waitersByKey.get(key)
    if (!waiters) return
    waitersByKey.delete(key)
    for (const waiter of waiters) {
      clearTimeout(waiter.timeoutTimer)
      waiter.resolve(true)
    }
  }

  return {
    kind: 'memory',

    async acquire(key, ttlMs) {
      if (liveLock(key)) return null
      const token = randomUUID()
      hold(key, token, ttlMs)
      return token
    },

    async acquireTagged(key, ttlMs, tag) {
      const held = liveLock(key)
      if (held) return { acquired: false, holderTag: held.tag }
      const token = randomUUID()
      hold(key, token, ttlMs, tag)
      return { acquired: true, token }
    },

    async extend(key, token, ttlMs) {
      const held = liveLock(key)
      if (held?.token !== token) return false
      hold(key, token, ttlMs, held.tag)
      return true
    },

    async release(key, token) {
      if (liveLock(key)?.token !== token) return false
      free(key)
      return true
    },

    async waitForRelease(key, timeoutMs) {
      if (!liveLock(key)) return true
      return new Promise<boolean>((resolve) => {
        const waiters = waitersByKey.get(key) ?? new Set<ReleaseWaiter>()
        waitersByKey.set(key, waiters)
        const waiter: ReleaseWaiter = {
          resolve,
          timeoutTimer: setTimeout(() => {
            waiters.delete(waiter)
            if (waiters.size === 0 && waitersByKey.get(key) === waiters) waitersByKey.delete(key)
            resolve(false)
          }, timeoutMs).unref(),
        }
        waiters.add(waiter)
      })
    },

    // Pending waiters resolve false: with their timers cleared they would otherwise never settle.
    async close() {
      for (const lock of heldLocks.values()) clearTimeout(lock.expiryTimer)
      heldLocks.clear()
      for (const waiters of waitersByKey.values()) {
        for (const waiter of waiters) {
          clearTimeout(waiter.timeoutTimer)
          waiter.resolve(false)
        }
      }
      waitersByKey.clear()
    },
  }
}
