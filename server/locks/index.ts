import type { Redis } from 'ioredis'
import { useRedis } from '../redis'
import { createMemoryLocks } from './memory'
import { createRedisLocks } from './redis'
import type { Locks } from './types'

export type { Locks }

let locks: Locks | undefined

/** Redis when REDIS_URL is set, in-process otherwise. */
export function useLocks(): Locks {
  if (locks) return locks
  const redis = useRedis()
  locks = redis ? createRedisLocks(redis.client) : createMemoryLocks()
  return locks
}

/** Readiness of the lock backend: Redis answers PING, or the in-process backend is in use. */
export async function pingLocks(): Promise<boolean> {
  const redis = useRedis()?.client
  if (!redis) return true
  try {
    if (redis.status !== 'ready') await untilReady(redis, 1000)
    return (await redis.ping()) === 'PONG'
  }
  catch {
    return false
  }
}

/** Resolves once the client is connected; rejects after timeoutMs, leaving no listener behind. */
function untilReady(client: Redis, timeoutMs: number): Promise<void> {
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
