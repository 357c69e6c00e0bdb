import { randomUUID } from 'node:crypto'
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { appEnv, stopAll } from '../support/app'
import { serverEntry } from '../support/build-once'
import { createTenant, request } from '../support/http'
import { postOrder, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { type ManagedProcess, spawnManaged } from '../support/processes'
import { createTestDatabase, describeWithServices, freePort } from '../support/services'

// `.output` is the deployment: copied alone to another machine (here: another folder) and started
// from any working directory, it carries what it needs, the database migrations included.

const projectJournal = readFileSync(new URL('../../drizzle/meta/_journal.json', import.meta.url), 'utf8')

describeWithServices('a copy of .output alone', ['postgres'], () => {
  const deployed = mkdtempSync(join(tmpdir(), 'ic-deployed-'))
  /** Where the server is started from: no drizzle/ folder, no project. */
  const elsewhere = mkdtempSync(join(tmpdir(), 'ic-elsewhere-'))
  const entry = join(deployed, '.output/server/index.mjs')
  let database: Awaited<ReturnType<typeof createTestDatabase>> | undefined

  beforeAll(() => {
    cpSync(dirname(dirname(serverEntry)), join(deployed, '.output'), { recursive: true })
  })

  afterAll(async () => {
    await stopAll()
    await database?.drop()
    rmSync(deployed, { recursive: true, force: true })
    rmSync(elsewhere, { recursive: true, force: true })
  })

  /** The copied server, started in `elsewhere` with the test environment and no MIGRATIONS_DIR. */
  async function startDeployed(label: string, options: { databaseUrl?: string, env?: Record<string, string> }): Promise<{ url: string, server: ManagedProcess }> {
    const port = await freePort()
    const env: Record<string, string | undefined> = { ...appEnv({ databaseUrl: options.databaseUrl, redisUrl: null, label, env: options.env }), PORT: String(port) }
    delete env.MIGRATIONS_DIR
    const server = spawnManaged({ label, args: [entry], env, cwd: elsewhere })
    const url = `http://127.0.0.1:${port}`
    await pollUntil(`${label} answers /api/ready with 200`, async () => {
      if (server.hasExited()) throw new Error(`${label} exited with code ${await server.exited}. Output:\n${server.output()}`)
      return (await request(url, '/api/ready', { timeoutMs: 2_000 }).catch(() => undefined))?.status === 200
    }, { timeoutMs: 60_000, intervalMs: 100 })
    return { url, server }
  }

  async function placesAnOrder(url: string): Promise<void> {
    const tenant = await createTenant(url, 'deployed')
    const key = `deployed-${randomUUID()}`
    const created = await postOrder(url, { secretKey: tenant.secretKey, key, body: validOrderBody() })
    expect(created.status, created.text).toBe(201)
    expect(created.json).toMatchObject({ object: 'order', status: 'pending_payment', idempotency: { key, replayed: false } })
  }

  it('ships the project\'s migrations in .output/server/drizzle', () => {
    expect(readFileSync(join(deployed, '.output/server/drizzle/meta/_journal.json'), 'utf8')).toBe(projectJournal)
    const journal = JSON.parse(projectJournal) as { entries: Array<{ tag: string }> }
    for (const { tag } of journal.entries) expect(existsSync(join(deployed, '.output/server/drizzle', `${tag}.sql`)), tag).toBe(true)
  })

  it('starts on PGlite from another working directory, migrates, and places an order', async () => {
    const { url, server } = await startDeployed('deployed-pglite', { env: { PGLITE_DIR: join(elsewhere, 'pglite') } })
    expect((await request(url, '/api/ready')).json).toMatchObject({ status: 'ready', checks: { database: { driver: 'pglite', ok: true } } })
    await placesAnOrder(url)
    await server.stop()
    expect(await server.exited).toBe(0)
  })

  it('starts on a fresh Postgres database from another working directory, migrates, and places an order', async () => {
    database = await createTestDatabase('deployed')
    const { url, server } = await startDeployed('deployed-postgres', { databaseUrl: database.url })
    expect((await request(url, '/api/ready')).json).toMatchObject({ status: 'ready', checks: { database: { driver: 'postgres', ok: true } } })
    await placesAnOrder(url)
    await server.stop()
    expect(await server.exited).toBe(0)
  })
})
