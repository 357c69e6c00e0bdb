import { describe } from 'vitest'
import { createMemoryLocks } from '../../server/locks/memory'
import { createRedisLocks } from '../../server/locks/redis'
import type { Locks } from '../../server/locks/types'
import type { DatabaseDriver } from './databases'
import { connectTestRedis, describeWithServices } from './services'

/** The locks of one contract suite, on one of the backends the app runs with. */
export interface LockBackend {
  locks: Locks
  /** Takes a held lock away from its owner the way this backend can lose one; renewals then fail. */
  loseLock(key: string, ownerToken: string): Promise<void>
  close(): Promise<void>
}

/** Redis locks on the test server, under a key prefix of their own. */
export async function openRedisLockBackend(label: string): Promise<LockBackend> {
  const redis = await connectTestRedis(label)
  const locks = createRedisLocks(redis)
  return {
    locks,
    // The key vanishes under its owner, as after a failover to a replica that never saw it.
    loseLock: async (key) => { await redis.del(key) },
    close: async () => {
      await locks.close()
      await redis.quit()
    },
  }
}

/** In-process locks: one table, this process's. */
export function openMemoryLockBackend(): LockBackend {
  const locks = createMemoryLocks()
  return {
    locks,
    // In-process locks only go when they expire unrenewed or their owner releases them; with a
    // running renewal, a release with the owner's token is the way to take one from under it.
    loseLock: async (key, ownerToken) => { await locks.release(key, ownerToken) },
    close: () => locks.close(),
  }
}

export type BackendContract = (driver: DatabaseDriver, openLockBackend: () => Promise<LockBackend>) => void

/**
 * A contract suite on both pairs the app runs on: `<name>: Postgres and Redis locks` (skipped
 * without those services, or failing under REQUIRE_SERVICES=1) and `<name>: PGlite and in-process
 * locks`.
 */
export function describeOnBothBackends(name: string, contract: BackendContract): void {
  describeWithServices(`${name}: Postgres and Redis locks`, ['postgres', 'redis'], () => {
    contract('postgres', () => openRedisLockBackend(name))
  })
  describe(`${name}: PGlite and in-process locks`, () => {
    contract('pglite', async () => openMemoryLockBackend())
  })
}
