import { randomBytes } from 'node:crypto'
import postgres from 'postgres'
import { describe } from 'vitest'
import { Redis } from 'ioredis'
import { postgresAdminUrl, reachable, redisUrl, requireServices } from '../../packages/nuxt-idempotency/test/support/services'

export { freePort } from './ports.mjs'

/**
 * Real Postgres and Redis for the integration and e2e suites, reached as the module's suites reach
 * them (its test support). With REQUIRE_SERVICES=1 (CI) a missing service fails the run instead of
 * skipping the suites that need it.
 */
export { postgresAdminUrl, reachable, redisUrl, requireServices }

type Service = 'postgres' | 'redis'

const availability = {
  postgres: await reachable(postgresAdminUrl, 5432),
  redis: await reachable(redisUrl, 6379),
}

/** `describe` that skips when a needed service is down, or fails loudly under REQUIRE_SERVICES=1. */
export function describeWithServices(name: string, needs: Service[], body: () => void) {
  const missing = needs.filter(service => !availability[service])
  if (missing.length && requireServices) {
    throw new Error(`REQUIRE_SERVICES=1 but ${missing.join(' and ')} is not reachable (${postgresAdminUrl}, ${redisUrl})`)
  }
  describe.skipIf(missing.length > 0)(name, body)
}

export function uniqueName(label: string): string {
  return `${label.replace(/\W+/g, '_').toLowerCase()}_${process.pid}_${randomBytes(3).toString('hex')}`
}

/** A fresh database on the real server, dropped by `drop()`. */
export async function createTestDatabase(label: string): Promise<{ url: string, drop: () => Promise<void> }> {
  const name = `ic_${uniqueName(label)}`
  const admin = postgres(postgresAdminUrl, { max: 1, onnotice: () => {} })
  await admin.unsafe(`CREATE DATABASE "${name}"`)
  await admin.end()
  const url = new URL(postgresAdminUrl)
  url.pathname = `/${name}`
  return {
    url: url.toString(),
    async drop() {
      const sql = postgres(postgresAdminUrl, { max: 1, onnotice: () => {} })
      await sql.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
      await sql.end()
    },
  }
}

/**
 * A Redis client on the one node at TEST_REDIS_URL under its own key prefix, configured like the
 * app's (fail fast: no offline queue, one retry, 2 s commands), connected before it is returned.
 * That node whatever the run's topology: for tests of a single node's behaviour. A suite that must
 * follow the shared test Redis onto a Cluster or Sentinel (TEST_REDIS_CLUSTER_NODES,
 * TEST_REDIS_SENTINELS) uses connectSharedTestRedis (redis-topologies.ts) instead.
 */
export async function connectTestRedis(label: string): Promise<Redis> {
  const redis = new Redis(redisUrl, {
    keyPrefix: uniqueRedisPrefix(label),
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: 2_000,
  })
  // With the offline queue disabled, commands sent before the connection is ready would fail.
  await redis.connect()
  return redis
}

/** A Redis key prefix no other test run shares. */
export function uniqueRedisPrefix(label: string): string {
  return `test:${uniqueName(label)}:`
}
