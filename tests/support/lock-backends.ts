import { describe } from 'vitest'
import { createMemoryLocks, createRedisLocks } from 'nuxt-idempotency/core'
import type { Locks, RedisLocksOptions } from 'nuxt-idempotency/core'
import type { DatabaseDriver } from './databases'
import { clusterEnv, connectRedisTopology, connectSharedTestRedis, type RedisClusterProcesses, type RedisSentinelProcesses, sentinelEnv, startRedisCluster, startRedisSentinel, type TestRedisConnection, testRedisTopology } from './redis-topologies'
import { connectTestRedis, describeWithServices } from './services'

/** The locks of one contract suite, on one of the backends the app runs with. */
export interface LockBackend {
  locks: Locks
  /** Takes a held lock away from its owner the way this backend can lose one; renewals then fail. */
  loseLock(key: string, ownerToken: string): Promise<void>
  close(): Promise<void>
}

/**
 * Redis locks on the test server, under a key prefix of their own; on the shared test Redis's
 * Cluster or Sentinel when the run names one (TEST_REDIS_CLUSTER_NODES, TEST_REDIS_SENTINELS).
 */
export async function openRedisLockBackend(label: string): Promise<LockBackend> {
  if (testRedisTopology !== 'standalone') {
    const connection = await connectSharedTestRedis(label)
    const locks = createRedisLocks(connection.client)
    return {
      locks,
      loseLock: async (key) => { await connection.client.del(key) },
      close: async () => {
        await locks.close()
        await connection.close()
      },
    }
  }
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

/**
 * Redis locks on a topology of their own, started for the suite as child processes — a Redis Cluster
 * of 3 masters, or a master and a replica behind a Sentinel — and reached through the app's own
 * connection factory (server/redis), with the app's fail-fast options.
 */
export interface RedisTopologyLocks<Servers> {
  servers: Servers
  connection: TestRedisConnection
  /** Fresh locks on the shared connection (close() stops only their own timers). */
  newLocks: (options?: RedisLocksOptions) => Locks
  /** A LockBackend on the shared connection, for the suites written against one. */
  openBackend: () => Promise<LockBackend>
  /** Closes the connection and stops the servers. */
  close: () => Promise<void>
}

async function topologyLocks<Servers extends { stop: () => Promise<void> }>(servers: Servers, env: Record<string, string>, label: string): Promise<RedisTopologyLocks<Servers>> {
  let connection: TestRedisConnection
  try {
    connection = await connectRedisTopology(env, label)
  }
  catch (error) {
    await servers.stop()
    throw error
  }
  const newLocks = (options?: RedisLocksOptions) => createRedisLocks(connection.client, options)
  return {
    servers,
    connection,
    newLocks,
    openBackend: async () => {
      const locks = newLocks()
      return {
        locks,
        loseLock: async (key) => { await connection.client.del(key) },
        close: () => locks.close(),
      }
    },
    close: async () => {
      await connection.close()
      await servers.stop()
    },
  }
}

/** Redis locks on a Redis Cluster of 3 masters the suite owns (REDIS_CLUSTER_NODES only). */
export async function startClusterLocks(label: string): Promise<RedisTopologyLocks<RedisClusterProcesses>> {
  const cluster = await startRedisCluster()
  return topologyLocks(cluster, clusterEnv(cluster), label)
}

/** Redis locks on a master with a replica behind `sentinels` Sentinels the suite owns (REDIS_SENTINELS + REDIS_SENTINEL_NAME). */
export async function startSentinelLocks(label: string, sentinels = 1): Promise<RedisTopologyLocks<RedisSentinelProcesses>> {
  const sentinel = await startRedisSentinel({ sentinels })
  return topologyLocks(sentinel, sentinelEnv(sentinel), label)
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
