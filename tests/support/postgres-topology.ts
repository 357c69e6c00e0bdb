/**
 * How the suites reach Postgres. By default directly. With TEST_PGBOUNCER_URL (a PgBouncer in
 * transaction mode in front of the test server, as `.ci/run` starts one) every database a suite
 * opens — through the app's own driver or a started instance — is reached through that pooler in
 * DATABASE_POOL_MODE=transaction; TEST_PGBOUNCER_DIRECT=1 adds the direct URL
 * (DATABASE_DIRECT_URL) for migrations and LISTEN. Row checks the tests make themselves stay direct.
 */

const pgbouncerUrl = process.env.TEST_PGBOUNCER_URL
const withDirectUrl = process.env.TEST_PGBOUNCER_DIRECT === '1'

export interface AppDatabase {
  url: string
  poolMode: 'session' | 'transaction'
  directUrl?: string
}

/** The test pooler's name for the run's reports: `direct`, `pgbouncer` or `pgbouncer+direct`. */
export const postgresTopology = pgbouncerUrl ? (withDirectUrl ? 'pgbouncer+direct' : 'pgbouncer') : 'direct'

/** Where the app should reach `databaseUrl` (a database on the test server) in this run. */
export function appDatabase(databaseUrl: string): AppDatabase {
  if (!pgbouncerUrl) return { url: databaseUrl, poolMode: 'session' }
  return { url: throughPooler(databaseUrl, pgbouncerUrl), poolMode: 'transaction', directUrl: withDirectUrl ? databaseUrl : undefined }
}

/** The same, as an instance's environment. */
export function appDatabaseEnv(databaseUrl: string): Record<string, string> {
  const { url, poolMode, directUrl } = appDatabase(databaseUrl)
  return { DATABASE_URL: url, DATABASE_POOL_MODE: poolMode, ...(directUrl ? { DATABASE_DIRECT_URL: directUrl } : {}) }
}

/** `databaseUrl`'s database and user on the pooler's host and port. */
export function throughPooler(databaseUrl: string, poolerUrl: string): string {
  const url = new URL(databaseUrl)
  const pooler = new URL(poolerUrl)
  url.hostname = pooler.hostname
  url.port = pooler.port
  return url.toString()
}
