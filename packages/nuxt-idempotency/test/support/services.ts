import { randomBytes } from 'node:crypto'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { describe } from 'vitest'

/**
 * The real Postgres and Redis the suites use (loopback only), at the same URLs as the repository's
 * other suites (TEST_POSTGRES_URL, TEST_REDIS_URL); with REQUIRE_SERVICES=1 a service that does not
 * answer fails the suite instead of skipping it.
 */
export const requireServices = process.env.REQUIRE_SERVICES === '1'
export const postgresAdminUrl = process.env.TEST_POSTGRES_URL ?? 'postgres://root@127.0.0.1:5432/postgres'
export const redisUrl = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'

/** Whether something accepts a TCP connection at the URL's host and port within a second. */
export function reachable(url: string, defaultPort: number): Promise<boolean> {
  const { hostname, port } = new URL(url)
  return new Promise((resolve) => {
    const socket = net.connect({ host: hostname, port: Number(port || defaultPort) })
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(1000, () => done(false))
    socket.once('connect', () => done(true))
    socket.once('error', () => done(false))
  })
}

export function uniqueName(label: string): string {
  return `${label.replace(/\W+/g, '_').toLowerCase()}_${process.pid}_${randomBytes(3).toString('hex')}`
}

const availability = {
  postgres: await reachable(postgresAdminUrl, 5432),
  redis: await reachable(redisUrl, 6379),
}

/** `describe` that skips when a needed service is down, or fails loudly under REQUIRE_SERVICES=1. */
export function describeWithServices(name: string, needs: Array<'postgres' | 'redis'>, body: () => void): void {
  const missing = needs.filter(service => !availability[service])
  if (missing.length && requireServices) throw new Error(`REQUIRE_SERVICES=1 but ${missing.join(' and ')} is not reachable (${postgresAdminUrl}, ${redisUrl})`)
  describe.skipIf(missing.length > 0)(name, body)
}

/** Which of Postgres and Redis do not answer; throws under REQUIRE_SERVICES=1 when any is missing. */
export async function missingServices(): Promise<string[]> {
  const [pg, redis] = await Promise.all([reachable(postgresAdminUrl, 5432), reachable(redisUrl, 6379)])
  const missing = [...(pg ? [] : [`Postgres (${postgresAdminUrl})`]), ...(redis ? [] : [`Redis (${redisUrl})`])]
  if (missing.length && requireServices) throw new Error(`REQUIRE_SERVICES=1 but ${missing.join(' and ')} is not reachable`)
  return missing
}

/** A fresh database on the real server: its URL now, created by `create()`, dropped by `drop()`. */
export function testDatabase(label: string): { url: string, create: () => Promise<void>, drop: () => Promise<void> } {
  const name = `nuxt_idempotency_${uniqueName(label)}`
  const url = new URL(postgresAdminUrl)
  url.pathname = `/${name}`
  const admin = async (statement: string) => {
    const sql = postgres(postgresAdminUrl, { max: 1, onnotice: () => {}, connect_timeout: 5 })
    try {
      await sql.unsafe(statement)
    }
    finally {
      await sql.end({ timeout: 5 })
    }
  }
  return {
    url: url.toString(),
    create: () => admin(`CREATE DATABASE "${name}"`),
    drop: () => admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`),
  }
}

/**
 * A build directory of its own for one suite's fixture (under APP_BUILD_ROOT when set), not existing
 * yet, so the test utilities delete it when the suite ends.
 */
export function fixtureBuildDir(label: string): string {
  return join(process.env.APP_BUILD_ROOT ?? tmpdir(), `nuxt-idempotency-${uniqueName(label)}`)
}
