import Redis from 'ioredis'
import { useConfig } from '../config'
import { createMemoryLocks } from './memory'
import { createRedisLocks } from './redis'
import type { Locks } from './types'

export type { Locks }

let locks: Locks | undefined
let redis: Redis | undefined

/**
 * Redis when REDIS_URL is set, in-process otherwise. The client fails fast instead of queueing
 * commands while Redis is away, so a request never waits on a lock backend that is gone.
 */
export function useLocks(): Locks {
  if (locks) return locks
  const config = useConfig()
  if (config.REDIS_URL) {
    redis = new Redis(config.REDIS_URL, {
      keyPrefix: config.REDIS_KEY_PREFIX,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: 1000,
      commandTimeout: 500,
      // Keep reconnecting in the background (capped backoff) so Redis coming back is picked up.
      retryStrategy: attempt => Math.min(attempt * 100, 2000),
    })
    // Errors surface per command as LockBackendError; the connection's own events are only noise.
    redis.on('error', () => {})
    locks = createRedisLocks(redis)
  }
  else {
    locks = createMemoryLocks()
  }
  return locks
}

/** Readiness of the lock backend: Redis answers PING, or the in-process backend is in use. */
export async function pingLocks(): Promise<boolean> {
  useLocks()
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
  redis?.disconnect()
  locks = undefined
  redis = undefined
}
