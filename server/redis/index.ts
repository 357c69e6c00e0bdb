import type { Redis, RedisOptions } from 'ioredis'
import type { Driver } from 'unstorage'
import redisDriver from 'unstorage/drivers/redis'
import { useConfig } from '../config'

/**
 * Every Redis client of the app fails fast instead of queueing commands while Redis is away, so a
 * request never waits on a backend that is gone, and keeps reconnecting in the background (capped
 * backoff) so Redis coming back is picked up.
 */
const failFast: RedisOptions = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
  connectTimeout: 1000,
  commandTimeout: 500,
  retryStrategy: attempt => Math.min(attempt * 100, 2000),
}

export interface RedisConnection {
  /** Keys under REDIS_KEY_PREFIX: the processing and resource locks. */
  client: Redis
  /** The same connection as an unstorage driver (keys under `<prefix>replay:`), for Nitro storage to mount. */
  storageDriver: Driver
}

let connection: RedisConnection | undefined

/**
 * The app's one Redis connection (REDIS_URL), undefined without one. Locks and the shared replay
 * cache share it, with auto-pipelining: what a request sends in one tick (a cache read and a lock,
 * a cache write and a release) goes out in one socket write.
 */
export function useRedis(): RedisConnection | undefined {
  if (connection) return connection
  const config = useConfig()
  if (!config.REDIS_URL) return undefined
  const storageDriver = redisDriver({ ...failFast, url: config.REDIS_URL, keyPrefix: config.REDIS_KEY_PREFIX, base: 'replay', enableAutoPipelining: true })
  const client = storageDriver.getInstance!() as Redis
  // Errors surface per command (LockBackendError, a cache miss); the connection's own events are only noise.
  client.on('error', () => {})
  connection = { client, storageDriver }
  return connection
}

export function closeRedis(): void {
  connection?.client.disconnect()
  connection = undefined
}
