import { log } from '../observability/logger'
import { isCluster, type RedisClient, useRedis } from '../redis'
import { createMemoryLocks, createRedisLocks, type Locks } from 'nuxt-idempotency/core'

export type { Locks }

let locks: Locks | undefined

/** Redis when REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS is set, in-process otherwise. */
export function useLocks(): Locks {
  if (locks) return locks
  const redis = useRedis()
  locks = redis
    ? createRedisLocks(redis.client, {
        onTaggedFallback: refusal => log.warn('Redis refused SET … NX GET; processing locks are taken with an equivalent script', { topology: redis.topology, reply: refusal.message }),
      })
    : createMemoryLocks()
  return locks
}

/**
 * Readiness of the lock backend: Redis answers PING — in a cluster every master it knows of, since
 * each holds a share of the keys — or the in-process backend is in use.
 */
export async function pingLocks(): Promise<boolean> {
  const redis = useRedis()?.client
  if (!redis) return true
  try {
    if (redis.status !== 'ready') await untilReady(redis, 1000)
    if (!isCluster(redis)) return (await redis.ping()) === 'PONG'
    const masters = redis.nodes('master')
    const replies = await Promise.all(masters.map(node => node.ping()))
    return masters.length > 0 && replies.every(reply => reply === 'PONG')
  }
  catch {
    return false
  }
}

/** Resolves once the client is connected; rejects after timeoutMs, leaving no listener behind. */
function untilReady(client: RedisClient, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const onReady = () => {
      clearTimeout(timer)
      resolve()
    }
    const timer = setTimeout(() => {
      client.off('ready', onReady)
      reject(new Error('Redis is not connected'))
    }, timeoutMs)
    client.once('ready', onReady)
  })
}

export async function closeLocks(): Promise<void> {
  await locks?.close()
  locks = undefined
}
