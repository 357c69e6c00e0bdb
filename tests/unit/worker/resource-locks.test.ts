import { afterEach, describe, expect, it } from 'vitest'
import { createMemoryLocks, LockBackendError, type Locks } from 'nuxt-idempotency/core'
import { setLogLevel } from '../../../server/observability/logger'
import { createLockKeeper, type HeldLock, type LockingJob } from '../../../server/jobs/worker/resource-locks'

const TTL_MS = 30_000

// The degraded lock logs a warning; LOG_LEVEL=info brings it back.
if (!process.env.LOG_LEVEL) setLogLevel('error')

/** In-process locks, each call recorded as `command key`. */
function recordingLocks(overrides: { acquire?: Locks['acquire'] }) {
  const inner = createMemoryLocks()
  const calls: string[] = []
  const recorded = <A extends unknown[], R>(command: string, call: (key: string, ...rest: A) => R) => (key: string, ...rest: A): R => {
    calls.push(`${command} ${key}`)
    return call(key, ...rest)
  }
  const locks: Locks = {
    ...inner,
    acquire: recorded('acquire', overrides.acquire ?? inner.acquire),
    extend: recorded('extend', inner.extend),
    release: recorded('release', inner.release),
  }
  return { locks, inner, calls }
}

let opened: Locks[] = []
afterEach(async () => {
  await Promise.all(opened.map(locks => locks.close()))
  opened = []
})

/** A lock keeper over recorded in-process locks (`acquire` replaced when given); the locks it reported lost. */
function keeper(options: { acquire?: Locks['acquire'], paused?: (held: HeldLock) => boolean } = {}) {
  const recorded = recordingLocks({ acquire: options.acquire })
  opened.push(recorded.inner)
  const lost: HeldLock[] = []
  const lockKeeper = createLockKeeper({ locks: recorded.locks, lockTtlMs: TTL_MS, workerId: 'worker-1', paused: options.paused ?? (() => false), lost: held => lost.push(held) })
  return { lockKeeper, lost, ...recorded }
}

const wanting = (...keys: string[]): LockingJob[] => keys.map(lockKey => ({ lockKey }))

describe('createLockKeeper', () => {
  it('takes each distinct lock once, in the same tick, and shares it among the jobs of its resource', async () => {
    const { lockKeeper, calls } = keeper()
    const entries = wanting('lock:order:a', 'lock:order:b', 'lock:order:a')
    const locking = lockKeeper.lockAll(entries)
    // Both acquires are out before anything is awaited: the Redis client sends them in one write.
    expect(calls).toEqual(['acquire lock:order:a', 'acquire lock:order:b'])
    await locking
    expect(entries[0]!.lock).toBe(entries[2]!.lock)
    expect(entries[0]!.lock).toMatchObject({ key: 'lock:order:a', holders: 2, lost: false })
    expect(entries[1]!.lock).toMatchObject({ key: 'lock:order:b', holders: 1 })
    expect(entries[0]!.lock!.token).toEqual(expect.any(String))
  })

  it('counts a later job on a held lock as one more holder, and releases once, by the last holder', async () => {
    const { lockKeeper, calls } = keeper()
    const [first] = wanting('lock:order:a')
    await lockKeeper.lockAll([first!])
    const [second] = wanting('lock:order:a')
    await lockKeeper.lockAll([second!])
    expect(calls).toEqual(['acquire lock:order:a'])
    expect(second!.lock).toBe(first!.lock)
    expect(first!.lock!.holders).toBe(2)
    expect(lockKeeper.drop(first!)).toBeUndefined()
    expect(first!.lock).toBeUndefined()
    expect(await lockKeeper.drop(second!)).toBe('released')
    expect(calls).toEqual(['acquire lock:order:a', 'release lock:order:a'])
    // Dropped already: nothing more to give back.
    expect(lockKeeper.drop(second!)).toBeUndefined()
  })

  it('marks the jobs of a resource held elsewhere busy, without a lock', async () => {
    const { lockKeeper, inner } = keeper()
    await inner.acquire('lock:order:a', TTL_MS)
    const entries = wanting('lock:order:a', 'lock:order:a')
    await lockKeeper.lockAll(entries)
    expect(entries).toEqual([{ lockKey: 'lock:order:a', lockBusy: true }, { lockKey: 'lock:order:a', lockBusy: true }])
  })

  it('runs degraded, without a token, when the backend is unreachable, and then has nothing to release', async () => {
    const { lockKeeper, calls } = keeper({ acquire: async () => { throw new LockBackendError('redis down') } })
    const entries = wanting('lock:order:a')
    await lockKeeper.lockAll(entries)
    expect(entries[0]!.lock).toEqual({ key: 'lock:order:a', token: undefined, holders: 1, lost: false })
    expect(lockKeeper.drop(entries[0]!)).toBeUndefined()
    lockKeeper.renew()
    expect(calls).toEqual(['acquire lock:order:a'])
  })

  it('fails the jobs of a lock whose acquire threw anything else, and skips jobs that failed already', async () => {
    const broken = new TypeError('bad key')
    const { lockKeeper, calls } = keeper({ acquire: async () => { throw broken } })
    const failedBefore = new Error('invalid payload')
    const entries: LockingJob[] = [{ lockKey: 'lock:order:a' }, { lockKey: 'lock:order:b', failure: failedBefore }, {}]
    await lockKeeper.lockAll(entries)
    expect(calls).toEqual(['acquire lock:order:a'])
    expect(entries).toEqual([{ lockKey: 'lock:order:a', failure: broken }, { lockKey: 'lock:order:b', failure: failedBefore }, {}])
  })

  it('renews the held locks except those of a paused job', async () => {
    const { lockKeeper, calls } = keeper({ paused: held => held.key === 'lock:order:b' })
    await lockKeeper.lockAll(wanting('lock:order:a', 'lock:order:b'))
    calls.length = 0
    lockKeeper.renew()
    expect(calls).toEqual(['extend lock:order:a'])
  })

  it('reports a lock found gone once, and no longer shares or renews it', async () => {
    const { lockKeeper, inner, calls, lost } = keeper()
    const [entry] = wanting('lock:order:a')
    await lockKeeper.lockAll([entry!])
    const held = entry!.lock!
    await inner.release(held.key, held.token!)
    lockKeeper.renew()
    await new Promise(resolve => setImmediate(resolve))
    expect(lost).toEqual([held])
    expect(held.lost).toBe(true)
    lockKeeper.renew()
    await new Promise(resolve => setImmediate(resolve))
    expect(lost).toHaveLength(1)
    // A job claimed after the loss asks for the lock anew.
    const [next] = wanting('lock:order:a')
    await lockKeeper.lockAll([next!])
    expect(next!.lock).not.toBe(held)
    expect(calls).toEqual(['acquire lock:order:a', 'extend lock:order:a', 'acquire lock:order:a'])
  })
})
