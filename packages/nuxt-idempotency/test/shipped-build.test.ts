import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { checkedMigrationsDir } from '../src/runtime/core/migrations'
import { type Instance, startInstance, waitUntilReady } from './support/instances'
import { SETUP_TIMEOUT_MS } from './support/key-contract'
import { startPgbouncer } from './support/pgbouncer.mjs'
import { describeWithServices, fixtureBuildDir, postgresAdminUrl, testDatabase } from './support/services'

/**
 * A build carries no path of the machine that built it: the module's migrations and the app's
 * (`appMigrationsDirs: ['migrations']`, relative to rootDir) ship inside it, and the server finds
 * them from its own files, started from any working directory.
 */

const fixture = fileURLToPath(new URL('./fixtures/shipped', import.meta.url))
const repositoryRoot = fileURLToPath(new URL('../../..', import.meta.url))
const buildDir = fixtureBuildDir('shipped')
const nuxi = fileURLToPath(new URL('../../../node_modules/@nuxt/cli/bin/nuxi.mjs', import.meta.url))

/** Every file under `dir`, recursively. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true }).filter(entry => entry.isFile()).map(entry => join(entry.parentPath, entry.name))
}

describe('a built server without the build machine\'s paths', () => {
  // A production build as an app makes it (`nuxi build`, NODE_ENV=production), outside the repository.
  const output = join(buildDir, '.output')
  const workDirs: string[] = []
  const instances: Instance[] = []
  /** An empty working directory elsewhere, and a fresh embedded database. */
  const elsewhere = () => {
    const dir = mkdtempSync(join(tmpdir(), 'nuxt-idempotency-elsewhere-'))
    workDirs.push(dir)
    mkdirSync(join(dir, 'cwd'))
    return { cwd: join(dir, 'cwd'), pgliteDir: join(dir, 'pglite') }
  }
  const start = async (env: Record<string, string> = {}) => {
    const { cwd, pgliteDir } = elsewhere()
    const instance = await startInstance(join(output, 'server/index.mjs'), { NODE_ENV: 'production', NUXT_IDEMPOTENCY_PGLITE_DIR: pgliteDir, ...env }, { cwd })
    instances.push(instance)
    return instance
  }

  beforeAll(async () => {
    await promisify(execFile)(process.execPath, [nuxi, 'build', fixture], { cwd: fixture, env: { ...process.env, NODE_ENV: 'production', SHIPPED_BUILD_DIR: buildDir }, timeout: SETUP_TIMEOUT_MS })
  }, SETUP_TIMEOUT_MS)

  afterAll(async () => {
    await Promise.all(instances.map(instance => instance.stop()))
    for (const dir of [...workDirs, buildDir]) rmSync(dir, { recursive: true, force: true })
  }, 60_000)

  it('ships the module\'s migrations and the app\'s folder inside the server', () => {
    expect(readdirSync(join(output, 'server/idempotency-migrations')).sort()).toEqual(['0000_records.sql', 'meta'])
    expect(JSON.parse(readFileSync(join(output, 'server/idempotency-app-migrations/order.json'), 'utf8'))).toEqual(['0'])
    expect(readFileSync(join(output, 'server/idempotency-app-migrations/0/0000_greetings.sql'), 'utf8')).toBe(readFileSync(join(fixture, 'migrations/0000_greetings.sql'), 'utf8'))
  })

  it('has no /work/, /tmp/ or /root/ path in its code, and no path of this checkout or build anywhere', () => {
    const files = filesUnder(output)
    expect(files.length).toBeGreaterThan(10)
    // Source maps name the sources relative to the output, and traced packages may mention /tmp/ in
    // their own comments: the server's own code is what must carry none.
    const own = files.filter(file => !file.endsWith('.map') && !relative(output, file).startsWith('server/node_modules/'))
    const withMachinePaths = own.flatMap((file) => {
      const found = /.{0,40}\/(work|tmp|root)\/.{0,40}/.exec(readFileSync(file, 'latin1'))
      return found ? [`${relative(output, file)}: ${found[0]}`] : []
    })
    expect(withMachinePaths).toEqual([])
    const here = [repositoryRoot.replace(/\/$/, ''), buildDir]
    const withThisMachine = files.filter(file => !file.endsWith('.map') && here.some(path => readFileSync(file, 'latin1').includes(path)))
    expect(withThisMachine.map(file => relative(output, file))).toEqual([])
  })

  it('started from another working directory, migrates the app\'s table and the module\'s', async () => {
    const instance = await start()
    await waitUntilReady(instance, '/api/greetings')
    const response = await fetch(`${instance.url}/api/greetings`)
    expect(response.status).toBe(200)
    expect(await response.json()).toEqual({ greetings: 2, records: true })
  })

  describeWithServices('behind a transaction pooler', ['postgres'], () => {
    it('in transaction mode with a direct URL set, migrates and serves through the pooler', async () => {
      const pooler = await startPgbouncer({ serverUrl: postgresAdminUrl })
      const database = testDatabase('shipped_direct')
      await database.create()
      try {
        const pooled = new URL(database.url)
        pooled.port = String(pooler.port)
        const instance = await start({ DATABASE_URL: pooled.toString(), NUXT_IDEMPOTENCY_DATABASE_POOL_MODE: 'transaction', NUXT_IDEMPOTENCY_DATABASE_DIRECT_URL: database.url })
        await waitUntilReady(instance, '/api/greetings')
        expect(await (await fetch(`${instance.url}/api/greetings`)).json()).toEqual({ greetings: 2, records: true })
        await instance.stop()
      }
      finally {
        await database.drop()
        await pooler.destroy()
      }
    })

    it('started in session mode, stops naming the module\'s settings to set', async () => {
      const pooler = await startPgbouncer({ serverUrl: postgresAdminUrl })
      const database = testDatabase('shipped_pooler')
      await database.create()
      try {
        const url = new URL(database.url)
        url.port = String(pooler.port)
        const instance = await start({ DATABASE_URL: url.toString() })
        const exited = await new Promise<number | null>(resolve => instance.child.once('exit', code => resolve(code)))
        expect(exited).toBe(1)
        expect(instance.output()).toMatch(/TransactionPoolerError.*unsupported startup parameter/s)
        expect(instance.output()).toMatch(/Set NUXT_IDEMPOTENCY_DATABASE_POOL_MODE=transaction \(idempotency\.databasePoolMode\), and NUXT_IDEMPOTENCY_DATABASE_DIRECT_URL \(idempotency\.databaseDirectUrl\) to a direct connection/)
        expect(instance.output()).not.toMatch(/Set DATABASE_POOL_MODE/)
      }
      finally {
        await database.drop()
        await pooler.destroy()
      }
    })
  })

  it('a run-time migrations folder that does not exist stops the server, naming the folder, the setting and the command', async () => {
    const instance = await start({ NUXT_IDEMPOTENCY_APP_MIGRATIONS_DIRS: 'no-such-migrations' })
    const exited = await new Promise<number | null>(resolve => instance.child.once('exit', code => resolve(code)))
    expect(exited).toBe(1)
    expect(instance.output()).toMatch(/the app migrations folder \/\S+\/cwd\/no-such-migrations does not exist\. Check the setting idempotency\.appMigrationsDirs \(NUXT_IDEMPOTENCY_APP_MIGRATIONS_DIRS at run time; relative entries are read from the working directory\), and generate the folder's migrations with `npx drizzle-kit generate`/)
  })
})

describe('checkedMigrationsDir', () => {
  it('accepts a drizzle-kit folder and names what is wrong with any other', () => {
    expect(checkedMigrationsDir(join(fixture, 'migrations'), 'build')).toBe(join(fixture, 'migrations'))
    expect(existsSync(join(fixture, 'server'))).toBe(true)
    expect(() => checkedMigrationsDir(join(fixture, 'server'), 'build')).toThrow(
      `nuxt-idempotency: the app migrations folder ${join(fixture, 'server')} has no meta/_journal.json. Check the setting idempotency.appMigrationsDirs `
      + '(NUXT_IDEMPOTENCY_APP_MIGRATIONS_DIRS at run time; relative entries are read from the Nuxt rootDir), and generate the folder\'s migrations with `npx drizzle-kit generate` (its `out` folder).',
    )
  })
})
