import { readFileSync } from 'node:fs'
import type { ConnectionOptions } from 'node:tls'
import type { Cluster, ClusterOptions, Redis, RedisOptions } from 'ioredis'
import type { Driver } from 'unstorage'
import redisDriver from 'unstorage/drivers/redis'
import { type AppConfig, ConfigError, hostPortList, redisSettingProblems, redisUsesTls, useConfig } from '../config'

/** One node (REDIS_URL), a Redis Cluster (REDIS_CLUSTER_NODES) or a master found through Sentinels (REDIS_SENTINELS). */
export type RedisTopology = 'standalone' | 'cluster' | 'sentinel'

/** A client of any topology: each command goes to the node that holds its key. */
export type RedisClient = Redis | Cluster

export const isCluster = (client: RedisClient): client is Cluster => client.isCluster

/** The settings the connection is made from (the app's configuration has them all). */
export type RedisSettings = Pick<AppConfig, 'REDIS_URL' | 'REDIS_CLUSTER_NODES' | 'REDIS_SENTINELS' | 'REDIS_SENTINEL_NAME'
  | 'REDIS_USERNAME' | 'REDIS_PASSWORD' | 'REDIS_TLS' | 'REDIS_CA_FILE' | 'REDIS_KEY_PREFIX'>

export interface RedisConnection {
  topology: RedisTopology
  /** Keys under REDIS_KEY_PREFIX: the processing and resource locks. */
  client: RedisClient
  /** The same connection as an unstorage driver (keys under `<prefix>replay:`), for Nitro storage to mount. */
  storageDriver: Driver
}

const RETRY_CAP_MS = 2000
/** Reconnecting after 100 ms, 200 ms, … at most every 2 s, for ever: Redis coming back is picked up. */
const backoff = (attempt: number) => Math.min(attempt * 100, RETRY_CAP_MS)

/**
 * Every Redis client of the app fails fast instead of queueing commands while Redis is away, so a
 * request never waits on a backend that is gone (it degrades to Postgres alone), and keeps
 * reconnecting in the background (capped backoff) so Redis coming back is picked up.
 */
const failFast = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
  connectTimeout: 1000,
  commandTimeout: 500,
  retryStrategy: backoff,
} satisfies RedisOptions

/**
 * The topology the settings name, or undefined without Redis. Settings that do not fit together
 * (redisSettingProblems, which the configuration reports at start-up) are a ConfigError here too.
 */
export function redisTopology(settings: RedisSettings): RedisTopology | undefined {
  const problems = redisSettingProblems(settings)
  if (problems.length) throw new ConfigError(`Redis settings to fix:\n${problems.map(problem => `  ${problem.name}: ${problem.message}`).join('\n')}`)
  if (!settings.REDIS_URL && !settings.REDIS_CLUSTER_NODES && !settings.REDIS_SENTINELS) return undefined
  return settings.REDIS_CLUSTER_NODES ? 'cluster' : settings.REDIS_SENTINELS ? 'sentinel' : 'standalone'
}

/** TLS with the server's certificate verified (Node's default), against REDIS_CA_FILE when set. */
function tlsOptions(settings: RedisSettings): ConnectionOptions | undefined {
  if (!redisUsesTls(settings)) return undefined
  if (!settings.REDIS_CA_FILE) return {}
  try {
    return { ca: readFileSync(settings.REDIS_CA_FILE) }
  }
  catch (error) {
    throw new ConfigError(`Redis: cannot read REDIS_CA_FILE ${settings.REDIS_CA_FILE}: ${error instanceof Error ? error.message : String(error)}`)
  }
}

export interface RedisConnectionOptions {
  /** Connect only on the first command or an explicit connect() (tests connect before use). */
  lazyConnect?: boolean
}

/**
 * A connection for the settings' topology, or undefined without Redis; throws ConfigError for
 * settings that do not fit together. Locks and the shared replay cache share it, with
 * auto-pipelining: what a request sends in one tick (a cache read and a lock, a cache write and a
 * release) goes out in one socket write (per node in a cluster).
 *
 * - One node: REDIS_URL (`rediss://` for TLS). REDIS_USERNAME/REDIS_PASSWORD apply unless the URL
 *   carries credentials of its own. A write answered READONLY (the endpoint failed over to another
 *   node and this connection still reaches the demoted one) makes it reconnect.
 * - Cluster: REDIS_CLUSTER_NODES, any of its nodes; the others and the slot map are discovered,
 *   MOVED and ASK are followed and the slot map refreshed every 5 s. Every node connection fails
 *   fast like a single node's, and a command gives up after a few redirections (a slot in
 *   migration, a failover under way) instead of retrying for long.
 * - Sentinel: REDIS_SENTINELS + REDIS_SENTINEL_NAME; the master is asked of the sentinels. The
 *   client subscribes to the sentinels' `+switch-master` and reconnects to the new master as soon
 *   as a failover is announced; a write refused by a demoted master (READONLY) also makes it
 *   reconnect through the sentinels. Commands sent meanwhile fail at once (LockBackendError, a
 *   cache miss) and succeed again once it is connected to the new master.
 * TLS (rediss://, REDIS_TLS) is verified, against REDIS_CA_FILE when set; in a cluster and with
 * Sentinel it applies to every node and sentinel.
 */
export function createRedisConnection(settings: RedisSettings, options: RedisConnectionOptions = {}): RedisConnection | undefined {
  const topology = redisTopology(settings)
  if (!topology) return undefined
  const tls = tlsOptions(settings)
  const auth = { username: settings.REDIS_USERNAME, password: settings.REDIS_PASSWORD }
  const lazy = options.lazyConnect ? { lazyConnect: true } : {}
  // A demoted master (a failover behind one endpoint, or a replica promoted under Sentinel)
  // refuses writes with READONLY: reconnect, which finds the current master.
  const reconnectOnError = (error: Error) => error.message.startsWith('READONLY')
  const node = { ...auth, tls, connectTimeout: failFast.connectTimeout, commandTimeout: failFast.commandTimeout, maxRetriesPerRequest: failFast.maxRetriesPerRequest, reconnectOnError }
  const common = { ...failFast, ...node, ...lazy, keyPrefix: settings.REDIS_KEY_PREFIX, enableAutoPipelining: true }
  const base = 'replay'

  let storageDriver: Driver
  if (topology === 'cluster') {
    const clusterOptions: ClusterOptions = {
      keyPrefix: settings.REDIS_KEY_PREFIX,
      enableOfflineQueue: false,
      enableAutoPipelining: true,
      ...lazy,
      clusterRetryStrategy: backoff,
      // A redirection or retry (MOVED, ASK, TRYAGAIN, CLUSTERDOWN, a lost node) is followed at most
      // 4 times, 100 ms apart: a command fails within about half a second rather than waiting out a failover.
      maxRedirections: 4,
      retryDelayOnFailover: 100,
      retryDelayOnClusterDown: 100,
      retryDelayOnTryAgain: 100,
      slotsRefreshTimeout: 1000,
      slotsRefreshInterval: 5000,
      // With TLS, connect to the names the cluster announces (certificates name hosts, not addresses).
      ...(tls ? { dnsLookup: (address, callback) => callback(null, address) } : {}),
      // Each node's connection: the cluster itself queues nothing, and a node's commands time out.
      redisOptions: node,
    }
    storageDriver = redisDriver({ base, cluster: hostPortList(settings.REDIS_CLUSTER_NODES!), clusterOptions })
  }
  else if (topology === 'sentinel') {
    storageDriver = redisDriver({
      ...common,
      base,
      sentinels: hostPortList(settings.REDIS_SENTINELS!),
      name: settings.REDIS_SENTINEL_NAME,
      sentinelTLS: tls,
      enableTLSForSentinelMode: tls !== undefined,
      sentinelCommandTimeout: failFast.commandTimeout,
      // All sentinels unreachable: ask them again, backing off like the connection itself.
      sentinelRetryStrategy: backoff,
      failoverDetector: true,
    })
  }
  else {
    storageDriver = redisDriver({ ...common, base, url: settings.REDIS_URL })
  }
  const client = storageDriver.getInstance!() as RedisClient
  // Errors surface per command (LockBackendError, a cache miss); the connection's own events are only noise.
  client.on('error', () => {})
  return { topology, client, storageDriver }
}

let connection: RedisConnection | undefined

/** The app's one Redis connection (see createRedisConnection), undefined without Redis. */
export function useRedis(): RedisConnection | undefined {
  connection ??= createRedisConnection(useConfig())
  return connection
}

export function closeRedis(): void {
  connection?.client.disconnect()
  connection = undefined
}
