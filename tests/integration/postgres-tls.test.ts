import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type DatabaseHandle, openDatabase, queryPrepared } from '@idempotent-checkout/db-kit'
import { startPostgresServer, type TestPostgresServer } from '../support/chaos/postgres-server'
import { makeTestCertificates, type TestCertificates } from '../support/test-certificates.mjs'
import { testMigrations } from '../support/migrations'

/**
 * TLS to Postgres as a managed service asks for it: a server of the test's own with ssl = on and a
 * certificate signed by a CA the test made. `sslmode` and `sslrootcert` in DATABASE_URL, or
 * DATABASE_CA_FILE, are honoured as libpq honours them.
 */

describe('Postgres over TLS', () => {
  let folder: string
  let certificates: TestCertificates
  let otherCa: TestCertificates
  let server: TestPostgresServer
  const opened: DatabaseHandle[] = []

  const open = async (query: string, caFile?: string) => {
    const handle = await openDatabase({ url: `${server.url}?${query}`, caFile, pgliteDir: '', migrations: testMigrations, poolSize: 1 })
    opened.push(handle)
    return handle
  }
  const encrypted = async (handle: DatabaseHandle) =>
    (await queryPrepared(handle.db, { text: 'select ssl from pg_stat_ssl where pid = pg_backend_pid()', params: [] }))[0]!.ssl

  beforeAll(async () => {
    folder = await mkdtemp(join(tmpdir(), 'ic-pg-tls-'))
    certificates = await makeTestCertificates(folder)
    await mkdtemp(join(folder, 'other-')).then(async other => (otherCa = await makeTestCertificates(other, 'Another CA')))
    server = await startPostgresServer('checkout', { tls: { cert: certificates.cert, key: certificates.key } })
  }, 60_000)

  afterAll(async () => {
    await Promise.allSettled(opened.map(handle => handle.close()))
    await server?.destroy()
    await rm(folder, { recursive: true, force: true })
  })

  it('sslmode=verify-full with sslrootcert in the URL: connected, migrated, encrypted', async () => {
    const handle = await open(`sslmode=verify-full&sslrootcert=${encodeURIComponent(certificates.caFile)}`)
    expect(await encrypted(handle)).toBe(true)
  })

  it('sslmode=verify-full with DATABASE_CA_FILE instead', async () => {
    expect(await encrypted(await open('sslmode=verify-full', certificates.caFile))).toBe(true)
  })

  it('sslmode=require encrypts without checking the certificate (libpq\'s meaning)', async () => {
    expect(await encrypted(await open('sslmode=require'))).toBe(true)
  })

  it('sslmode=verify-full refuses a certificate its CA did not sign, and one no CA was given for', async () => {
    await expect(open('sslmode=verify-full', otherCa.caFile)).rejects.toThrow(/certificate/i)
    await expect(open('sslmode=verify-full')).rejects.toThrow(/certificate/i)
  })

  it('no sslmode: a plain connection, as before', async () => {
    expect(await encrypted(await open('application_name=plain'))).toBe(false)
  })

  it('an unknown sslmode or an unreadable CA file is refused with the setting named', async () => {
    await expect(open('sslmode=always')).rejects.toThrow(/sslmode=always .* not one of disable, allow, prefer, require, verify-ca, verify-full/)
    await expect(open('sslmode=verify-full', join(folder, 'missing.pem'))).rejects.toThrow(/Cannot read the database CA file .*DATABASE_CA_FILE/)
  })
})
