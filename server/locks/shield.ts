import { log } from '../observability/logger'
import { metrics } from '../observability/metrics'
import type { Locks } from './types'

export type ShieldResult = { state: 'acquired', token: string } | { state: 'held' } | { state: 'unavailable' }

/**
 * A lock used only to keep duplicate traffic off Postgres. When the backend fails the caller goes on
 * without it — Postgres still decides — and the degradation is logged and counted.
 */
export async function acquireShield(locks: Locks, key: string, ttlMs: number): Promise<ShieldResult> {
  try {
    const token = await locks.acquire(key, ttlMs)
    return token ? { state: 'acquired', token } : { state: 'held' }
  }
  catch (error) {
    reportLockBackendError('acquire', key, error)
    return { state: 'unavailable' }
  }
}

export async function releaseShield(locks: Locks, key: string, shield: ShieldResult): Promise<void> {
  if (shield.state !== 'acquired') return
  await locks.release(key, shield.token).catch(error => reportLockBackendError('release', key, error))
}

/** Waits for the key to be released; with the backend down it simply sleeps, so callers re-check. */
export async function waitForShield(locks: Locks, key: string, timeoutMs: number): Promise<void> {
  try {
    await locks.waitForRelease(key, timeoutMs)
  }
  catch (error) {
    reportLockBackendError('wait', key, error)
    await new Promise(resolve => setTimeout(resolve, Math.min(timeoutMs, 100)))
  }
}

const WARN_EVERY_MS = 10_000
let lastWarnedAt = Number.NEGATIVE_INFINITY
let failuresSinceWarning = 0

/** Every failure is counted; the log line is written at most every 10 s so an outage does not flood logs. */
function reportLockBackendError(operation: string, key: string, error: unknown): void {
  metrics.lockBackendErrors.inc({ operation })
  failuresSinceWarning++
  if (performance.now() - lastWarnedAt < WARN_EVERY_MS) return
  log.warn('lock backend unavailable: continuing with Postgres-only correctness', { operation, lockKey: key, failures: failuresSinceWarning, error })
  lastWarnedAt = performance.now()
  failuresSinceWarning = 0
}
