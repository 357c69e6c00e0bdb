import { existsSync } from 'node:fs'
import { describe } from 'vitest'
import { createRedisConnection, type RedisConnection, type RedisSettings } from '../../server/redis'
import { command, type RedisClusterProcesses, type RedisSentinelProcesses } from './redis-topology-servers.mjs'
import { redisUrl, requireServices, uniqueRedisPrefix } from './services'

/**
 * The Redis topologies of the suites: the servers come from redis-topology-servers.mjs (child processes,
 * also usable from the plain-JS benchmarks); this module adds what the TypeScript suites need —
 * the app's settings for each, connections made by the app's own factory, and a look at the keys
 * each node holds.
 */

export * from './redis-topology-servers.mjs'

const redisBinaries = [process.env.REDIS_SERVER_BINARY ?? '/usr/bin/redis-server', process.env.REDIS_CLI_BINARY ?? '/usr/bin/redis-cli']

/** `describe` for suites that start their own redis-server processes: skipped without the binaries, failing under REQUIRE_SERVICES=1. */
export function describeWithRedisServer(name: string, body: () => void): void {
  const missing = redisBinaries.filter(path => !existsSync(path))
  if (missing.length && requireServices) throw new Error(`REQUIRE_SERVICES=1 but ${missing.join(' and ')} is missing`)
  describe.skipIf(missing.length > 0)(name, body)
}

/**
 * The Redis the suites share ("the test Redis"): by default the one node at TEST_REDIS_URL. With
 * TEST_REDIS_CLUSTER_NODES (host:port,…) it is that Redis Cluster, with TEST_REDIS_SENTINELS and
 * TEST_REDIS_SENTINEL_NAME the master behind those sentinels (tests/run-topologies.mjs starts them):
 * instances started with the shared redisUrl then get these settings instead, and so do the lock
 * backends of the contract suites. Suites that start a Redis of their own are not affected.
 */
const sharedTopologyEnv: Record<string, string> | undefined = process.env.TEST_REDIS_CLUSTER_NODES
  ? { REDIS_CLUSTER_NODES: process.env.TEST_REDIS_CLUSTER_NODES }
  : process.env.TEST_REDIS_SENTINELS
    ? { REDIS_SENTINELS: process.env.TEST_REDIS_SENTINELS, REDIS_SENTINEL_NAME: process.env.TEST_REDIS_SENTINEL_NAME ?? 'mymaster' }
    : undefined

/** The shared test Redis's topology, for the run's reports: `standalone`, `cluster` or `sentinel`. */
export const testRedisTopology = sharedTopologyEnv?.REDIS_CLUSTER_NODES ? 'cluster' : sharedTopologyEnv ? 'sentinel' : 'standalone'

/** The Redis settings of an instance asked to use `url`: the shared test Redis's topology when `url` is the shared one. */
export function appRedisEnv(url: string): Record<string, string> {
  return url === redisUrl && sharedTopologyEnv ? { ...sharedTopologyEnv } : { REDIS_URL: url }
}

/**
 * A connection to the shared test Redis, whatever its topology, under a key prefix of its own (see
 * connectRedisTopology), or `prefix` ('' to read an instance's keys by their full names).
 */
export function connectSharedTestRedis(label: string, options: { prefix?: string } = {}): Promise<TestRedisConnection> {
  return connectRedisTopology(appRedisEnv(redisUrl), label, options)
}

/** The app's environment for a Redis Cluster: REDIS_CLUSTER_NODES alone, no REDIS_URL. */
export const clusterEnv = (cluster: Pick<RedisClusterProcesses, 'nodesSetting'>) => ({ REDIS_CLUSTER_NODES: cluster.nodesSetting })

/** The app's environment for Sentinel: the sentinels and the master's name. */
export const sentinelEnv = (sentinel: Pick<RedisSentinelProcesses, 'sentinelsSetting' | 'name'>) => ({ REDIS_SENTINELS: sentinel.sentinelsSetting, REDIS_SENTINEL_NAME: sentinel.name })

export interface TestRedisConnection extends RedisConnection {
  /** The key prefix the connection works under, unique to it. */
  prefix: string
  close: () => Promise<void>
}

/**
 * A connection made by the app's factory (server/redis) from `env`'s Redis settings, under a key
 * prefix of its own (or `prefix`), connected (ready) before it is returned.
 */
export async function connectRedisTopology(env: Partial<Record<keyof RedisSettings, string>>, label: string, options: { prefix?: string } = {}): Promise<TestRedisConnection> {
  const prefix = options.prefix ?? uniqueRedisPrefix(label)
  const settings: RedisSettings = { ...env, REDIS_TLS: env.REDIS_TLS === 'true', REDIS_KEY_PREFIX: prefix }
  const connection = createRedisConnection(settings, { lazyConnect: true })
  if (!connection) throw new Error('no Redis topology in the settings')
  await connection.client.connect().catch((error: unknown) => {
    // It would otherwise keep reconnecting in the background.
    connection.client.disconnect()
    throw error
  })
  return {
    ...connection,
    prefix,
    close: async () => {
      await connection.client.quit().catch(() => connection.client.disconnect())
    },
  }
}

/** Every key matching `pattern` on each server (SCAN on each of `ports`), by port. */
export async function keysByNode(ports: number[], pattern: string): Promise<Map<number, string[]>> {
  const found = new Map<number, string[]>()
  await Promise.all(ports.map(async (port) => {
    const keys: string[] = []
    let cursor = '0'
    do {
      const reply = await command(port, ['SCAN', cursor, 'MATCH', pattern, 'COUNT', 1000])
      if (!Array.isArray(reply)) throw new Error(`SCAN on ${port} answered ${String(reply)}`)
      cursor = String(reply[0])
      keys.push(...(reply[1] as string[]))
    } while (cursor !== '0')
    found.set(port, keys)
  }))
  return found
}
