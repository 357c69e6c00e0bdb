import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { postgresAdminUrl, reachable, redisUrl, requireServices, uniqueName } from '../../../../tests/support/services'

/**
 * The real Postgres and Redis the multi-instance suites use (loopback only), as the repository's own
 * suites reach them: the same URLs, and with REQUIRE_SERVICES=1 a service that does not answer fails
 * the suite instead of skipping it.
 */
export { postgresAdminUrl, redisUrl, requireServices } from '../../../../tests/support/services'

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
