import { readFileSync } from 'node:fs'
import type { ConnectionOptions } from 'node:tls'

/**
 * How DATABASE_URL is reached. `session`: directly, or through a pooler that gives each client
 * connection one server connection (PgBouncer session mode). `transaction`: through a transaction
 * pooler (PgBouncer transaction mode, Supavisor and Neon pooled URLs, RDS Proxy), where consecutive
 * transactions of one client connection may run on different server connections.
 */
export type PoolMode = 'session' | 'transaction'

/** libpq's sslmode values; `prefer` and `allow` encrypt when the server can, like `require` without its insistence. */
const sslModes = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full'] as const
type SslMode = typeof sslModes[number]

export class DatabaseUrlError extends Error {}

export interface PostgresConnection {
  /** The URL without the TLS parameters, which postgres.js would otherwise send as startup parameters. */
  url: string
  options: { ssl: false | 'prefer' | ConnectionOptions }
}

/**
 * The TLS settings of a postgres:// URL as libpq reads them — `sslmode` and `sslrootcert` (a PEM
 * file, or `system` for the platform's CAs) — with `caFile` (DATABASE_CA_FILE) standing in for
 * `sslrootcert`. `require` encrypts without checking the certificate (libpq's meaning), `verify-ca`
 * checks it was signed by the CA, `verify-full` also that it names the host.
 */
export function postgresConnection(url: string, caFile?: string): PostgresConnection {
  const parsed = new URL(url)
  const mode = parsed.searchParams.get('sslmode') ?? undefined
  const rootCert = parsed.searchParams.get('sslrootcert') ?? caFile
  parsed.searchParams.delete('sslmode')
  parsed.searchParams.delete('sslrootcert')
  if (mode !== undefined && !(sslModes as readonly string[]).includes(mode)) {
    throw new DatabaseUrlError(`sslmode=${mode} in the database URL is not one of ${sslModes.join(', ')}.`)
  }
  // As libpq: a root certificate named with `require` makes it verify-ca.
  const asked = (mode as SslMode | undefined) ?? (rootCert ? 'verify-full' : 'disable')
  const sslMode = asked === 'require' && rootCert ? 'verify-ca' : asked
  return { url: parsed.toString(), options: { ssl: sslOptions(sslMode, rootCert) } }
}

function sslOptions(mode: SslMode, rootCert: string | undefined): PostgresConnection['options']['ssl'] {
  if (mode === 'disable') return false
  if (mode === 'allow' || mode === 'prefer') return 'prefer'
  if (mode === 'require') return { rejectUnauthorized: false }
  const ca = rootCert && rootCert !== 'system' ? readCa(rootCert) : undefined
  return {
    rejectUnauthorized: true,
    ...(ca ? { ca } : {}),
    // verify-ca: the chain, not the name.
    ...(mode === 'verify-ca' ? { checkServerIdentity: () => undefined } : {}),
  }
}

function readCa(file: string): string {
  try {
    return readFileSync(file, 'utf8')
  }
  catch (error) {
    throw new DatabaseUrlError(`Cannot read the database CA file ${file} (sslrootcert or DATABASE_CA_FILE): ${(error as Error).message}`)
  }
}
