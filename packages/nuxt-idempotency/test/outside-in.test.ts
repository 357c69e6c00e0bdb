import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes, randomUUID } from 'node:crypto'
import { cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { get as httpGet, request as httpRequest } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { Redis } from 'ioredis'
import { Webhook } from 'standardwebhooks'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { type Pgbouncer, startPgbouncer } from './support/pgbouncer.mjs'
import { freePort } from './support/ports.mjs'

/**
 * The module as a stranger gets it: the package and its database layer (@idempotent-checkout/db-kit)
 * are packed into tarballs and installed with npm into a fresh Nuxt app outside this repository,
 * next to the registry's own drivers (the template's package.json: nothing from the workspace),
 * built once with `nuxi build`. The built server then runs as real processes on three targets:
 * two instances on Postgres and Redis, two behind PgBouncer in transaction mode, one embedded on
 * PGlite with in-process locks. Each option of defineIdempotentEventHandler, runOnce and a webhook
 * endpoint have a route of their own in the template; each route's work counts its executions in a
 * file, so "once" is counted outside the module.
 */

const repoRoot = fileURLToPath(new URL('../../..', import.meta.url))
const templateDir = fileURLToPath(new URL('./outside-in/app', import.meta.url))

const postgresHost = '127.0.0.1'
const postgresUrl = (database: string, port = 5432) => `postgres://root@${postgresHost}:${port}/${database}`
const redisUrl = 'redis://127.0.0.1:6379'
/** The version the template pins: the registry's, not this repository's patched copy. */
const stockPostgresVersion = '3.4.10'

/** Long enough that the ten copies sent at once are all in flight while the first one runs. */
const handlerDelayMs = 400
const concurrentCopies = 10
/** One key for every instance of every target: AES-256-GCM, 32 bytes in base64. */
const encryptionKey = randomBytes(32).toString('base64')
const webhookSecret = `whsec_${randomBytes(24).toString('base64')}`

const stepTimeoutMs = {
  pack: 60_000,
  install: 420_000,
  appBuild: 300_000,
  database: 30_000,
  serverStart: 90_000,
  request: 30_000,
  /** One test: a few rounds of requests, each bounded by `request`. */
  test: 120_000,
}

/** How long each step took, printed once the file is done. */
const timings: Record<string, string> = {}
const took = (started: number) => `${((Date.now() - started) / 1000).toFixed(1)} s`

/**
 * The environment of every command and server: the test process's own without anything that
 * would point the app at the workspace, its services, or vitest (npm's own `npm_*` settings from
 * an `npm run` included).
 */
function isolatedEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(process.env)) {
    if (value === undefined) continue
    if (/^(?:DATABASE_.*|REDIS_.*|NUXT_.*|NITRO_.*|APP_BUILD_ROOT|NODE_PATH|NODE_ENV|VITEST.*|TEST|npm_.*|INIT_CWD|PORT|HOST)$/i.test(name)) continue
    env[name] = value
  }
  return { ...env, NUXT_TELEMETRY_DISABLED: '1', ...extra }
}

/** The last part of a process's output, for error messages. */
function outputTail(chunks: string[]): string {
  return chunks.join('').slice(-8_000)
}

/** A failed command's error lines (a build's may be far from its end), then the end of its output. */
function failureOutput(chunks: string[]): string {
  const errors = chunks.join('').split('\n').filter(line => /\berror\b/i.test(line)).slice(0, 20)
  return `${errors.length ? `${errors.join('\n')}\n...\n` : ''}${outputTail(chunks)}`
}

/** Runs a command to completion within `timeoutMs` and returns its stdout; rejects with its output when it fails. */
async function run(label: string, command: string, args: string[], options: { cwd: string, env: Record<string, string>, timeoutMs: number }): Promise<string> {
  const started = Date.now()
  const child = spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
  const output: string[] = []
  const stdout: string[] = []
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    output.push(chunk)
    stdout.push(chunk)
  })
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => output.push(chunk))
  let timedOut = false
  const timer = setTimeout(() => {
    timedOut = true
    // The whole process group: npm and nuxi start children of their own.
    try { process.kill(-child.pid!, 'SIGKILL') }
    catch { child.kill('SIGKILL') }
  }, options.timeoutMs)
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject)
    child.on('close', resolve)
  }).finally(() => clearTimeout(timer))
  timings[label] = took(started)
  if (timedOut) throw new Error(`${label} (${command} ${args.join(' ')}) did not finish within ${options.timeoutMs / 1000} s. Output:\n${failureOutput(output)}`)
  if (code !== 0) throw new Error(`${label} (${command} ${args.join(' ')}) exited with code ${code}. Output:\n${failureOutput(output)}`)
  return stdout.join('')
}

interface ServerProcess {
  label: string
  url: string
  child: ChildProcess
  output: string[]
  exited: Promise<void>
}

/** Every server started, for the failure output; each target stops its own after its block. */
const servers: ServerProcess[] = []

/** Starts `.output/server/index.mjs` and waits (with a deadline) until it answers HTTP from its database. */
async function startServer(label: string, outputDir: string, cwd: string, env: Record<string, string>): Promise<ServerProcess> {
  const started = Date.now()
  const port = await freePort()
  const child = spawn(process.execPath, [join(outputDir, 'server/index.mjs')], {
    cwd,
    env: isolatedEnv({ ...env, HOST: '127.0.0.1', PORT: String(port), NODE_ENV: 'production' }),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const output: string[] = []
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => output.push(chunk))
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => output.push(chunk))
  let hasExited = false
  const exited = new Promise<void>(resolve => child.on('exit', () => {
    hasExited = true
    resolve()
  }))
  const server: ServerProcess = { label, url: `http://127.0.0.1:${port}`, child, output, exited }
  servers.push(server)

  const deadline = Date.now() + stepTimeoutMs.serverStart
  while (Date.now() < deadline) {
    if (hasExited) throw new Error(`${label} exited (code ${child.exitCode}) before it answered. Output:\n${outputTail(output)}`)
    // The database opened and migrated too (the rows route reads it), not just the HTTP server.
    if (await answers200(port, '/') && await answers200(port, '/api/rows?key=startup')) {
      timings[`start ${label}`] = took(started)
      return server
    }
    await sleep(200)
  }
  throw new Error(`${label} did not answer within ${stepTimeoutMs.serverStart / 1000} s. Output:\n${outputTail(output)}`)
}

/**
 * GET / on a connection of its own that is closed afterwards: an idle pooled connection would be
 * reused by the first test request, and a server whose event loop is busy starting up (the embedded
 * database opening) may close it for idleness just as that request arrives (ECONNRESET).
 */
function answers200(port: number, path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const request = httpGet({ host: '127.0.0.1', port, path, agent: false, timeout: 2_000 }, (response) => {
      response.resume()
      response.on('end', () => resolve(response.statusCode === 200))
      response.on('error', () => resolve(false))
    })
    request.on('timeout', () => request.destroy())
    // Not listening yet, or too slow: poll again.
    request.on('error', () => resolve(false))
  })
}

async function stopServer(server: ServerProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (server.child.exitCode !== null || server.child.signalCode !== null) return
  server.child.kill(signal)
  const stopped = await Promise.race([server.exited.then(() => true), sleep(10_000).then(() => false)])
  if (!stopped) {
    server.child.kill('SIGKILL')
    await Promise.race([server.exited, sleep(5_000)])
  }
}

interface Answer {
  status: number
  headers: Headers
  text: string
  /** The parsed body; undefined when it is not JSON. */
  json: Record<string, unknown> | undefined
}

async function answerOf(response: Response): Promise<Answer> {
  const text = await response.text()
  let json: Record<string, unknown> | undefined
  try { json = JSON.parse(text) }
  catch { json = undefined }
  return { status: response.status, headers: response.headers, text, json }
}

/** POST `body` (JSON unless a string) to `path`, under `key` when there is one. */
async function post(url: string, path: string, key: string | undefined, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  return answerOf(await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key === undefined ? {} : { 'idempotency-key': key }), ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(stepTimeoutMs.request),
  }))
}

/** POST without Content-Length (chunked): the server can only count the bytes as it reads them. */
function postChunked(url: string, path: string, key: string, body: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const target = new URL(path, url)
    const request = httpRequest({
      host: target.hostname, port: target.port, path: target.pathname, method: 'POST', agent: false, timeout: stepTimeoutMs.request,
      headers: { 'content-type': 'application/json', 'idempotency-key': key, 'transfer-encoding': 'chunked' },
    }, (response) => {
      const chunks: Buffer[] = []
      response.on('data', (chunk: Buffer) => chunks.push(chunk))
      response.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8')
        let json: Record<string, unknown> | undefined
        try { json = JSON.parse(text) }
        catch { json = undefined }
        const headers = new Headers()
        for (const [name, value] of Object.entries(response.headers)) if (typeof value === 'string') headers.set(name, value)
        resolve({ status: response.statusCode!, headers, text, json })
      })
    })
    request.on('timeout', () => request.destroy(new Error('chunked request timed out')))
    request.on('error', reject)
    // Written in pieces, so no length is known up front.
    for (let offset = 0; offset < body.length; offset += 64) request.write(body.slice(offset, offset + 64))
    request.end()
  })
}

interface Execution { route: string, key: string, body: unknown }

function executions(file: string): Execution[] {
  if (!existsSync(file)) return []
  return readFileSync(file, 'utf8').split('\n').filter(Boolean).map(line => JSON.parse(line) as Execution)
}

interface Outcome { route: string, key?: string, outcome: string }

function outcomes(file: string): Outcome[] {
  if (!existsSync(file)) return []
  return readFileSync(file, 'utf8').split('\n').filter(Boolean).map(line => JSON.parse(line) as Outcome)
}

const newKey = (label: string) => `outside-in-${label}-${randomUUID()}`

function expectProblem(answer: Answer, status: number, slug: string): void {
  expect(answer.status, answer.text).toBe(status)
  expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json(?:;|$)/)
  expect(answer.json).toMatchObject({ type: expect.stringMatching(new RegExp(`/${slug}$`)), status })
  expect(answer.json?.detail).toEqual(expect.any(String))
}

/** The executing request's answer: not marked replayed. */
function expectExecuted(answer: Answer, status: number): void {
  expect(answer.status, answer.text).toBe(status)
  expect(answer.headers.get('idempotent-replayed')).toBeNull()
}

/** A replay of `original`: the same status, body and Location, marked `Idempotent-Replayed: true`. */
function expectReplay(answer: Answer, original: Answer): void {
  expect(answer.status, answer.text).toBe(original.status)
  expect(answer.headers.get('idempotent-replayed')).toBe('true')
  expect(answer.json).toEqual(original.json)
  expect(answer.headers.get('location')).toBe(original.headers.get('location'))
}

/** Files of the built server that name this repository (the build must stand on the app's own node_modules). */
function filesContaining(dir: string, text: string, names = /\.(?:m?js|cjs|json)$/): string[] {
  const found: string[] = []
  const visit = (current: string) => {
    for (const entry of readdirSync(current, { withFileTypes: true })) {
      const path = join(current, entry.name)
      if (entry.isDirectory()) visit(path)
      else if (names.test(entry.name) && readFileSync(path, 'utf8').includes(text)) found.push(path)
    }
  }
  visit(dir)
  return found
}

let workDir: string
let appDir: string
let outputDir: string

beforeAll(async () => {
  workDir = mkdtempSync(join(tmpdir(), 'nuxt-idempotency-outside-in-'))
  appDir = join(workDir, 'app')
  const packDir = join(workDir, 'pack')
  mkdirSync(packDir)

  // 1. The packages as published: their builds (made by `npm ci`'s postinstall, never here: the other
  // suites load the same dist/ while this one runs) packed into tarballs.
  for (const dist of ['packages/nuxt-idempotency/dist/module.mjs', 'packages/db-kit/dist/index.js']) {
    expect(existsSync(join(repoRoot, dist)), `${dist} is missing: run \`npm run build -w nuxt-idempotency\` and \`npm run build -w @idempotent-checkout/db-kit\``).toBe(true)
  }
  const packed = JSON.parse(await run('npm pack', 'npm', ['pack', '--workspace', 'nuxt-idempotency', '--workspace', '@idempotent-checkout/db-kit', '--pack-destination', packDir, '--json'], { cwd: repoRoot, env: isolatedEnv(), timeoutMs: stepTimeoutMs.pack })) as { name: string, filename: string }[]
  expect(packed.map(tarball => tarball.name).sort()).toEqual(['@idempotent-checkout/db-kit', 'nuxt-idempotency'])
  const tarballs = packed.map(tarball => join(packDir, tarball.filename))
  for (const tarball of tarballs) expect(existsSync(tarball), tarball).toBe(true)

  // 2. A fresh app outside the repository: the template's registry dependencies and the two tarballs.
  // The template's sources only, should it ever have been installed or built in place.
  cpSync(templateDir, appDir, { recursive: true, filter: source => !/[\\/](?:node_modules|\.nuxt|\.output|\.data)$/.test(source) })
  await run('npm install', 'npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--save-exact', ...tarballs], { cwd: appDir, env: isolatedEnv(), timeoutMs: stepTimeoutMs.install })
  for (const name of ['nuxt-idempotency', '@idempotent-checkout/db-kit']) {
    const installed = join(appDir, 'node_modules', name)
    // A copy unpacked from the tarball, not a link into the workspace.
    expect(lstatSync(installed).isSymbolicLink(), name).toBe(false)
    expect(realpathSync(installed)).toBe(installed)
    expect(existsSync(join(installed, 'dist')), name).toBe(true)
    expect(existsSync(join(installed, 'src')), name).toBe(false)
  }
  // One db-kit (the module's dependency is the installed tarball) and one drizzle-orm (the app's `sql` and the module's tx agree).
  for (const nested of ['nuxt-idempotency/node_modules/@idempotent-checkout/db-kit', 'nuxt-idempotency/node_modules/drizzle-orm', '@idempotent-checkout/db-kit/node_modules/drizzle-orm']) {
    expect(existsSync(join(appDir, 'node_modules', nested)), nested).toBe(false)
  }
  // The registry's postgres.js, not this repository's patched copy.
  const postgresDir = join(appDir, 'node_modules/postgres')
  expect(JSON.parse(readFileSync(join(postgresDir, 'package.json'), 'utf8')).version).toBe(stockPostgresVersion)
  expect(filesContaining(postgresDir, 'idempotent-checkout', /\.(?:m?js|cjs|json|ts)$/)).toEqual([])
  expect(JSON.parse(readFileSync(join(appDir, 'node_modules/ioredis/package.json'), 'utf8')).version).toMatch(/^5\./)

  // 3. The production build, once for every target.
  await run('nuxi build', join(appDir, 'node_modules/.bin/nuxi'), ['build'], { cwd: appDir, env: isolatedEnv({ NODE_ENV: 'production' }), timeoutMs: stepTimeoutMs.appBuild })
  outputDir = join(appDir, '.output')
  expect(filesContaining(join(outputDir, 'server'), repoRoot)).toEqual([])
}, 900_000)

afterAll(async () => {
  await Promise.all(servers.map(server => stopServer(server)))
  if (workDir) rmSync(workDir, { recursive: true, force: true })
  console.log(`outside-in timings: ${Object.entries(timings).map(([step, time]) => `${step} ${time}`).join(', ')}`)
}, 120_000)

// A failed test shows what the servers said (and whether one of them exited).
beforeEach(({ onTestFailed }) => {
  onTestFailed(() => {
    for (const server of servers) {
      const state = server.child.exitCode !== null || server.child.signalCode !== null ? `exited (${server.child.exitCode ?? server.child.signalCode})` : 'running'
      console.error(`--- ${server.label} (${state}) output:\n${outputTail(server.output)}`)
    }
  })
})

interface TargetDefinition {
  name: 'postgres' | 'pgbouncer' | 'pglite'
  title: string
  instances: number
}

const targets: TargetDefinition[] = [
  { name: 'postgres', title: 'two instances on Postgres and Redis', instances: 2 },
  { name: 'pgbouncer', title: 'two instances through PgBouncer (transaction mode) and Redis', instances: 2 },
  { name: 'pglite', title: 'one embedded instance (PGlite, in-process locks)', instances: 1 },
]

describe.each(targets)('$title', (target) => {
  let urls: string[] = []
  let targetServers: ServerProcess[] = []
  let executionsFile: string
  let outcomesFile: string
  let database: string | undefined
  let pooler: Pgbouncer | undefined
  let blockStarted: number
  /** The servers' environment, for one started later with other settings. */
  let serverEnv: Record<string, string>
  let targetDir: string

  const executionsOf = (route: string, key: string) => executions(executionsFile).filter(execution => execution.route === route && execution.key === key)
  const rowsOf = async (key: string) => {
    const response = await fetch(`${urls[0]}/api/rows?key=${encodeURIComponent(key)}`, { signal: AbortSignal.timeout(stepTimeoutMs.request) })
    expect(response.status).toBe(200)
    return await response.json() as { writes: number, records: string[] }
  }
  /** The records of `key` as the database holds them, read by psql on a direct connection. */
  const storedRecords = async (key: string) => {
    const literal = `'${key.replaceAll('\'', '\'\'')}'`
    const out = await run('psql', 'psql', ['-h', postgresHost, '-d', database!, '-At', '-c', `select to_jsonb(r)::text from idempotency_records r where key = ${literal}`], { cwd: workDir, env: isolatedEnv(), timeoutMs: stepTimeoutMs.database })
    return out.split('\n').filter(Boolean)
  }

  beforeAll(async () => {
    blockStarted = Date.now()
    const dir = join(workDir, target.name)
    mkdirSync(dir)
    executionsFile = join(dir, 'executions.jsonl')
    outcomesFile = join(dir, 'outcomes.jsonl')
    writeFileSync(executionsFile, '')
    writeFileSync(outcomesFile, '')
    targetDir = dir
    const env: Record<string, string> = serverEnv = {
      EXECUTIONS_FILE: executionsFile,
      OUTCOMES_FILE: outcomesFile,
      HANDLER_DELAY_MS: String(handlerDelayMs),
      NUXT_IDEMPOTENCY_ENCRYPTION_KEYS: encryptionKey,
      NUXT_WEBHOOK_SECRET: webhookSecret,
    }
    if (target.name !== 'pglite') {
      // A database of its own on the shared Postgres server.
      database = `nuxt_idempotency_outside_in_${target.name}_${process.pid}_${randomUUID().slice(0, 8)}`
      await run(`createdb ${target.name}`, 'createdb', ['-h', postgresHost, database], { cwd: workDir, env: isolatedEnv(), timeoutMs: stepTimeoutMs.database })
      Object.assign(env, { DATABASE_URL: postgresUrl(database), REDIS_URL: redisUrl })
    }
    if (target.name === 'pgbouncer') {
      const started = Date.now()
      pooler = await startPgbouncer({ serverUrl: postgresUrl('postgres') })
      timings['start pgbouncer'] = took(started)
      Object.assign(env, {
        DATABASE_URL: postgresUrl(database!, pooler.port),
        NUXT_IDEMPOTENCY_DATABASE_POOL_MODE: 'transaction',
        NUXT_IDEMPOTENCY_DATABASE_DIRECT_URL: postgresUrl(database!),
      })
    }
    // The embedded one works in a folder of its own (its database is .data/ under it).
    targetServers = await Promise.all(Array.from({ length: target.instances }, (_, i) => startServer(`${target.name}-${'ab'[i]}`, outputDir, dir, env)))
    urls = targetServers.map(server => server.url)
  }, 180_000)

  afterAll(async () => {
    await Promise.all(targetServers.map(server => stopServer(server)))
    await pooler?.destroy()
    if (database) {
      await run(`dropdb ${target.name}`, 'dropdb', ['-h', postgresHost, '--if-exists', '--force', database], { cwd: tmpdir(), env: isolatedEnv(), timeoutMs: stepTimeoutMs.database })
    }
    timings[`block ${target.name}`] = took(blockStarted)
  }, 120_000)

  it('runs ten copies of one request sent at once once; a retry replays it; another body is 422; no key is 400', async () => {
    const key = newKey('basics')
    const body = { plan: 'pro' }
    const answers = await Promise.all(Array.from({ length: concurrentCopies }, (_, i) => post(urls[i % urls.length]!, '/api/subscriptions', key, body)))

    expect(executionsOf('subscriptions', key)).toEqual([{ route: 'subscriptions', key, body }])
    const executed = answers.filter(answer => answer.status === 201 && answer.headers.get('idempotent-replayed') === null)
    expect(executed, answers.map(answer => `${answer.status} ${answer.text}`).join('\n')).toHaveLength(1)
    const original = executed[0]!
    expect(original.json).toEqual({ id: expect.stringMatching(/^sub_[0-9a-f-]{36}$/), plan: 'pro' })
    expect(original.headers.get('location')).toBe(`/api/subscriptions/${String(original.json?.id)}`)
    for (const answer of answers) {
      if (answer === original) continue
      if (answer.status === 409) {
        expectProblem(answer, 409, 'request-in-progress')
        expect(answer.headers.get('retry-after')).toBe('1')
      }
      else {
        expectReplay(answer, original)
      }
    }

    expectReplay(await post(urls[urls.length - 1]!, '/api/subscriptions', key, body), original)
    expectProblem(await post(urls[0]!, '/api/subscriptions', key, { plan: 'team' }), 422, 'idempotency-key-reused')
    expect(executionsOf('subscriptions', key)).toHaveLength(1)

    const before = executions(executionsFile).length
    expectProblem(await post(urls[0]!, '/api/subscriptions', undefined, body), 400, 'idempotency-key-missing')
    expect(executions(executionsFile)).toHaveLength(before)
  }, stepTimeoutMs.test)

  it('atomic: the handler\'s write in tx and the record commit together; a 500 after the write leaves neither', async () => {
    const key = newKey('atomic')
    const first = await post(urls[0]!, '/api/atomic', key, { note: 'first' })
    expectExecuted(first, 200)
    expect(first.json).toEqual({ key, written: true })
    expectReplay(await post(urls[urls.length - 1]!, '/api/atomic', key, { note: 'first' }), first)
    expect(await rowsOf(key)).toMatchObject({ writes: 1, records: [expect.any(String)] })
    expect(executionsOf('atomic', key)).toHaveLength(1)

    const failing = newKey('atomic-fail')
    expect((await post(urls[0]!, '/api/atomic', failing, { note: 'retried' }, { 'x-fail-after-write': '1' })).status).toBe(500)
    expect(executionsOf('atomic', failing)).toHaveLength(1)
    // No write, and no answer stored: at most the claim, released for the retry.
    const afterFailure = await rowsOf(failing)
    expect(afterFailure.writes).toBe(0)
    expect(afterFailure.records.map(record => JSON.parse(record) as Record<string, unknown>)).toEqual(afterFailure.records.length
      ? [expect.objectContaining({ status: 'processing', response_status: null, response_body: null })]
      : [])
    // Nothing was stored: the retry runs again, and this time commits.
    expectExecuted(await post(urls[urls.length - 1]!, '/api/atomic', failing, { note: 'retried' }), 200)
    expect(executionsOf('atomic', failing)).toHaveLength(2)
    expect(await rowsOf(failing)).toMatchObject({ writes: 1, records: [expect.any(String)] })
  }, stepTimeoutMs.test)

  it('scope from a header: two users\' equal keys run once each; each user\'s retry replays its own', async () => {
    const key = newKey('scoped')
    const alice = await post(urls[0]!, '/api/scoped', key, { item: 1 }, { 'x-user-id': 'alice' })
    const bob = await post(urls[urls.length - 1]!, '/api/scoped', key, { item: 1 }, { 'x-user-id': 'bob' })
    expectExecuted(alice, 200)
    expectExecuted(bob, 200)
    expect(alice.json).toEqual({ user: 'alice', scope: 'scope:user:alice' })
    expect(bob.json).toEqual({ user: 'bob', scope: 'scope:user:bob' })
    expectReplay(await post(urls[urls.length - 1]!, '/api/scoped', key, { item: 1 }, { 'x-user-id': 'alice' }), alice)
    expectReplay(await post(urls[0]!, '/api/scoped', key, { item: 1 }, { 'x-user-id': 'bob' }), bob)
    expect(executionsOf('scoped', key).map(execution => (execution.body as { user: string }).user).sort()).toEqual(['alice', 'bob'])
    expect((await rowsOf(key)).records).toHaveLength(2)
  }, stepTimeoutMs.test)

  it('per-route ttl: a key remembered for 1 s replays within it and runs again after it', async () => {
    const key = newKey('ttl')
    const first = await post(urls[0]!, '/api/short-ttl', key, { n: 1 })
    expectExecuted(first, 200)
    expectReplay(await post(urls[urls.length - 1]!, '/api/short-ttl', key, { n: 1 }), first)
    await sleep(2_100)
    const later = await post(urls[urls.length - 1]!, '/api/short-ttl', key, { n: 1 })
    expectExecuted(later, 200)
    expect(later.json?.run).not.toBe(first.json?.run)
    expect(executionsOf('short-ttl', key)).toHaveLength(2)
  }, stepTimeoutMs.test)

  it('per-route lease: renewed while the handler runs past it, so a duplicate is still in progress (409)', async () => {
    const key = newKey('lease')
    const body = { item: 'lease' }
    const original = post(urls[0]!, '/api/short-lease', key, body, { 'x-hold-ms': '2500' })
    // Past the 1 s lease: without its renewal the duplicate would take the key over.
    await sleep(1_600)
    const duplicate = await post(urls[urls.length - 1]!, '/api/short-lease', key, body)
    expectProblem(duplicate, 409, 'request-in-progress')
    const first = await original
    expectExecuted(first, 200)
    expectReplay(await post(urls[urls.length - 1]!, '/api/short-lease', key, body), first)
    expect(executionsOf('short-lease', key)).toHaveLength(1)
  }, stepTimeoutMs.test)

  it('storeIf: an answer it refuses is sent but not remembered (the retry runs again); one it accepts replays', async () => {
    const pending = newKey('store-if-pending')
    const first = await post(urls[0]!, '/api/store-if', pending, { pending: true })
    expectExecuted(first, 202)
    expect(first.json).toMatchObject({ state: 'pending' })
    const again = await post(urls[urls.length - 1]!, '/api/store-if', pending, { pending: true })
    expectExecuted(again, 202)
    expect(again.json?.run).not.toBe(first.json?.run)
    expect(executionsOf('store-if', pending)).toHaveLength(2)

    const done = newKey('store-if-done')
    const stored = await post(urls[0]!, '/api/store-if', done, { pending: false })
    expectExecuted(stored, 201)
    expectReplay(await post(urls[urls.length - 1]!, '/api/store-if', done, { pending: false }), stored)
    expect(executionsOf('store-if', done)).toHaveLength(1)
  }, stepTimeoutMs.test)

  it('fingerprint list: a retry with another timestamp and nonce replays; another amount or customer is 422', async () => {
    const key = newKey('fingerprint')
    const body = (amount: number, customer: string, sentAt: string) => ({ amount, customer: { id: customer, name: `name-${sentAt}` }, sentAt, nonce: randomUUID() })
    const first = await post(urls[0]!, '/api/fingerprint', key, body(100, 'c1', 't1'))
    expectExecuted(first, 200)
    expectReplay(await post(urls[urls.length - 1]!, '/api/fingerprint', key, body(100, 'c1', 't2')), first)
    expectProblem(await post(urls[0]!, '/api/fingerprint', key, body(200, 'c1', 't3')), 422, 'idempotency-key-reused')
    expectProblem(await post(urls[0]!, '/api/fingerprint', key, body(100, 'c2', 't4')), 422, 'idempotency-key-reused')
    expect(executionsOf('fingerprint', key)).toHaveLength(1)
  }, stepTimeoutMs.test)

  it('maxResponseBytes: a larger answer is sent but not stored (outcome response_too_large, a warning); a smaller one replays', async () => {
    const small = newKey('response-small')
    const kept = await post(urls[0]!, '/api/large-response', small, { size: 100 })
    expectExecuted(kept, 200)
    expectReplay(await post(urls[urls.length - 1]!, '/api/large-response', small, { size: 100 }), kept)
    expect(executionsOf('large-response', small)).toHaveLength(1)

    const large = newKey('response-large')
    for (const url of [urls[0]!, urls[urls.length - 1]!]) {
      const answer = await post(url, '/api/large-response', large, { size: 2_000 })
      expectExecuted(answer, 200)
      expect(String(answer.json?.padding)).toHaveLength(2_000)
    }
    expect(executionsOf('large-response', large)).toHaveLength(2)
    expect(outcomes(outcomesFile).filter(outcome => outcome.key === large)).toEqual([
      { route: 'POST /api/large-response', key: large, outcome: 'response_too_large' },
      { route: 'POST /api/large-response', key: large, outcome: 'response_too_large' },
    ])
    const warnings = targetServers.flatMap(server => server.output.join('').split('\n')).filter(line => line.includes('/api/large-response') && line.includes('1024'))
    expect(warnings.length, targetServers.map(server => outputTail(server.output)).join('\n')).toBeGreaterThan(0)
  }, stepTimeoutMs.test)

  it('maxBodyBytes: a larger body (by Content-Length or as read) is 413 request-too-large; nothing runs or is stored', async () => {
    const key = newKey('body')
    const big = JSON.stringify({ padding: 'x'.repeat(300) })
    const declared = await post(urls[0]!, '/api/small-body', key, big)
    expectProblem(declared, 413, 'request-too-large')
    expect(declared.json?.detail).toContain('256')
    const chunked = await postChunked(urls[urls.length - 1]!, '/api/small-body', key, big)
    expectProblem(chunked, 413, 'request-too-large')
    expect(executionsOf('small-body', key)).toEqual([])
    expect(await rowsOf(key)).toEqual({ writes: 0, records: [] })
    // The key is still free: a body within the limit runs.
    expectExecuted(await post(urls[0]!, '/api/small-body', key, { ok: true }), 200)
    expect(executionsOf('small-body', key)).toHaveLength(1)

    // The module's default, 1 MiB, on a route without its own limit.
    const defaultKey = newKey('body-default')
    const overMiB = await post(urls[0]!, '/api/subscriptions', defaultKey, JSON.stringify({ plan: 'pro', padding: 'x'.repeat(1_048_576) }))
    expectProblem(overMiB, 413, 'request-too-large')
    expect(String(overMiB.json?.detail)).toMatch(/1048576|1 MiB/)
    expect(executionsOf('subscriptions', defaultKey)).toEqual([])
  }, stepTimeoutMs.test)

  it('encryption: a stored answer replays on every instance; the stored record holds no plaintext', async () => {
    const key = newKey('encrypted')
    const marker = `plaintext-marker-${randomUUID()}`
    const first = await post(urls[0]!, '/api/subscriptions', key, { plan: 'secret', note: marker })
    expectExecuted(first, 201)
    expect(first.json).toMatchObject({ note: marker })
    const subscriptionId = String(first.json?.id)
    for (const url of urls) expectReplay(await post(url, '/api/subscriptions', key, { plan: 'secret', note: marker }), first)

    const { records } = await rowsOf(key)
    expect(records).toHaveLength(1)
    for (const text of [marker, subscriptionId]) expect(records[0]).not.toContain(text)
    expect(records[0]).toContain('"response_status": 201')
    if (database) {
      // Read beside the app, on a direct connection.
      const stored = await storedRecords(key)
      expect(stored).toHaveLength(1)
      for (const text of [marker, subscriptionId]) expect(stored[0]).not.toContain(text)
      // The shared replay cache in Redis too.
      const redis = new Redis(redisUrl, { lazyConnect: true })
      try {
        await redis.connect()
        const keys: string[] = []
        for await (const batch of redis.scanStream({ match: 'idempotency*', count: 1_000 })) keys.push(...batch as string[])
        const values: Array<string | null> = []
        for (let i = 0; i < keys.length; i += 500) values.push(...await redis.mget(keys.slice(i, i + 500)))
        expect(values.filter(value => value?.includes(marker) || value?.includes(subscriptionId))).toEqual([])
      }
      finally {
        redis.disconnect()
      }
    }
    expect(executionsOf('subscriptions', key)).toHaveLength(1)
  }, stepTimeoutMs.test)

  // Each target's own checks are defined for it alone: the others have nothing to skip.
  if (target.name === 'postgres') it('encryption keys rotated: the new key first, the old one still read; a record under a key no longer listed is 500 stored-response-unreadable', async () => {
    const newEncryptionKey = randomBytes(32).toString('base64')
    const rotated = await startServer(`${target.name}-rotated`, outputDir, targetDir, { ...serverEnv, NUXT_IDEMPOTENCY_ENCRYPTION_KEYS: `${newEncryptionKey},${encryptionKey}` })
    targetServers.push(rotated)
    try {
      const oldKey = newKey('rotation-old')
      const underOld = await post(urls[0]!, '/api/subscriptions', oldKey, { plan: 'old' })
      expectExecuted(underOld, 201)
      expectReplay(await post(rotated.url, '/api/subscriptions', oldKey, { plan: 'old' }), underOld)

      const rotatedKey = newKey('rotation-new')
      const underNew = await post(rotated.url, '/api/subscriptions', rotatedKey, { plan: 'new' })
      expectExecuted(underNew, 201)
      expectReplay(await post(rotated.url, '/api/subscriptions', rotatedKey, { plan: 'new' }), underNew)
      // An instance that lists only the old key cannot read it: it says which setting to fix, and runs nothing.
      const unreadable = await post(urls[urls.length - 1]!, '/api/subscriptions', rotatedKey, { plan: 'new' })
      expectProblem(unreadable, 500, 'stored-response-unreadable')
      expect(unreadable.json?.detail).toContain('NUXT_IDEMPOTENCY_ENCRYPTION_KEYS')
      expect(executionsOf('subscriptions', oldKey)).toHaveLength(1)
      expect(executionsOf('subscriptions', rotatedKey)).toHaveLength(1)
    }
    finally {
      await stopServer(rotated)
    }
  }, stepTimeoutMs.test)

  it('runOnce: concurrent calls on every instance get one stored result; a throw stores nothing; a running one is 409 after its lease', async () => {
    const id = `job-${randomUUID()}`
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => post(urls[i % urls.length]!, '/api/run-once', undefined, { id })))
    for (const answer of answers) expect(answer.status, answer.text).toBe(200)
    const result = answers[0]!.json
    expect(result).toEqual({ result: { job: id, token: expect.any(String) } })
    for (const answer of answers) expect(answer.json).toEqual(result)
    expect((await post(urls[0]!, '/api/run-once', undefined, { id })).json).toEqual(result)
    expect(executionsOf('run-once', id)).toHaveLength(1)

    const failing = `job-${randomUUID()}`
    expect((await post(urls[0]!, '/api/run-once', undefined, { id: failing, fail: true })).status).toBe(500)
    const retried = await post(urls[urls.length - 1]!, '/api/run-once', undefined, { id: failing })
    expect(retried.status, retried.text).toBe(200)
    expect(retried.json).toEqual({ result: { job: failing, token: expect.any(String) } })
    expect(executionsOf('run-once', failing)).toHaveLength(2)

    const slow = `job-${randomUUID()}`
    const running = post(urls[0]!, '/api/run-once', undefined, { id: slow, workMs: 2_000, lease: 300 })
    await sleep(300)
    const waiter = await post(urls[urls.length - 1]!, '/api/run-once', undefined, { id: slow, workMs: 2_000, lease: 300 })
    expect(waiter.status, waiter.text).toBe(409)
    expect(waiter.json).toEqual({ inProgress: true })
    expect((await running).status).toBe(200)
    expect(executionsOf('run-once', slow)).toHaveLength(1)
  }, stepTimeoutMs.test)

  it('webhook: a delivery and its redelivery (new timestamp and signature) run once; a bad signature is 401; a large body 413', async () => {
    const webhook = new Webhook(webhookSecret)
    const eventId = `msg_${randomUUID()}`
    const payload = JSON.stringify({ type: 'invoice.paid', data: { id: `in_${randomUUID()}` } })
    const deliver = (at: Date, body = payload, id = eventId, signature = webhook.sign(id, at, body)) => post(urls[urls.length - 1]!, '/api/webhooks', undefined, body, {
      'webhook-id': id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': signature,
    })
    const first = await deliver(new Date(Date.now() - 30_000))
    expectExecuted(first, 200)
    expect(first.json).toEqual({ received: eventId })
    const redelivery = await post(urls[0]!, '/api/webhooks', undefined, payload, (() => {
      const at = new Date()
      return { 'webhook-id': eventId, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': webhook.sign(eventId, at, payload) }
    })())
    expectReplay(redelivery, first)
    expect(executionsOf('webhooks', eventId)).toEqual([{ route: 'webhooks', key: eventId, body: JSON.parse(payload) }])

    const forged = newKey('forged')
    expectProblem(await deliver(new Date(), payload, forged, new Webhook(`whsec_${randomBytes(24).toString('base64')}`).sign(forged, new Date(), payload)), 401, 'webhook-signature-invalid')
    expect(executionsOf('webhooks', forged)).toEqual([])

    const largeId = `msg_${randomUUID()}`
    const large = await deliver(new Date(), JSON.stringify({ type: 'big', padding: 'x'.repeat(3_000) }), largeId)
    expectProblem(large, 413, 'request-too-large')
    expect(executionsOf('webhooks', largeId)).toEqual([])
  }, stepTimeoutMs.test)

  if (target.name === 'pgbouncer') it('PgBouncer killed for 3 s and restarted: requests answer 200 again within 5 s, and no key ran twice', async () => {
    const sent: Array<{ key: string, note: string, status: number }> = []
    const send = async (i: number, headers: Record<string, string> = {}) => {
      const key = newKey(`outage-${i}`)
      const note = `outage-${i}`
      const answer = await post(urls[i % urls.length]!, '/api/atomic', key, { note }, headers).catch(() => ({ status: 0 }))
      sent.push({ key, note, status: answer.status })
      return answer.status
    }
    expect(await send(0)).toBe(200)
    // Transactions open when PgBouncer dies: their writes are cut with their records.
    const inFlight = Array.from({ length: 4 }, (_, i) => send(100 + i, { 'x-hold-ms': '1000' }))
    await sleep(300)
    await pooler!.kill()
    const outageEnds = Date.now() + 3_000
    for (let i = 1; Date.now() < outageEnds; i++) {
      // Without its database a request fails as a whole, answered as such: a 503 problem to retry after a second.
      const key = newKey(`outage-${i}`)
      const answer = await post(urls[i % urls.length]!, '/api/atomic', key, { note: `outage-${i}` })
      sent.push({ key, note: `outage-${i}`, status: answer.status })
      expectProblem(answer, 503, 'service-unavailable')
      expect(answer.headers.get('retry-after')).toBe('1')
      await sleep(250)
    }
    for (const status of await Promise.all(inFlight)) expect(status === 0 || status >= 500, `cut in flight: ${status}`).toBe(true)
    await pooler!.start()
    const restarted = Date.now()
    // Each instance on its own: its pool reconnects by itself, whatever the other one does.
    const recoveredAfter = await Promise.all(urls.map(async (url, instance) => {
      for (let i = 0; Date.now() - restarted < 5_000; i++) {
        if (await send(1_000 + 2 * i + instance) === 200) return Date.now() - restarted
        await sleep(200)
      }
      return undefined
    }))
    timings['pgbouncer recovery'] = `${recoveredAfter.map(after => after === undefined ? 'none within 5 s' : `${(after / 1000).toFixed(1)} s`).join(' and ')} (answers: ${sent.map(({ status }) => status).join(' ')})`
    for (const [instance, after] of recoveredAfter.entries()) {
      if (after !== undefined) continue
      // Stock postgres.js 3.4.x can throw from a timer when a buffered write outlives its socket
      // (porsager/postgres#1154; the fix is upstream/postgres/0001): Nitro logs it and that
      // connection hangs. That bug, and nothing else, may keep an instance from recovering; its
      // supervisor then restarts it (README#faq), and its keys must still have run once.
      const server = targetServers[instance]!
      expect(outputTail(server.output), `${server.label} did not recover within 5 s and not for the known driver bug\n${pooler!.output()}`).toContain('Cannot read properties of null (reading \'write\')')
      await stopServer(server, 'SIGKILL')
      targetServers[instance] = await startServer(`${server.label}-restarted`, outputDir, targetDir, serverEnv)
      urls[instance] = targetServers[instance]!.url
      timings['pgbouncer recovery'] += `; ${server.label} hit postgres#1154 and was restarted`
    }
    // Every key sent, retried now, has committed its write exactly once.
    for (const [i, { key, note }] of sent.entries()) {
      // As a client retries: after Retry-After while the key is in progress.
      const retryStarted = Date.now()
      let retry = await post(urls[(i + 1) % urls.length]!, '/api/atomic', key, { note })
      // A request cut in flight could not release its claim: the key is free once the route's lease (2 s) ran out.
      while (retry.status === 409 && Date.now() - retryStarted < 8_000) {
        await sleep(Number(retry.headers.get('retry-after')) * 1000)
        retry = await post(urls[(i + 1) % urls.length]!, '/api/atomic', key, { note })
      }
      if (Date.now() - retryStarted > 500) timings[`pgbouncer retry of ${note}`] = took(retryStarted)
      expect(retry.status, retry.text).toBe(200)
      expect(retry.json).toEqual({ key, written: true })
      expect((await rowsOf(key)).writes, `${key}, first answered ${sent[i]!.status}`).toBe(1)
    }
  }, stepTimeoutMs.test)

  if (target.instances > 1) it('per-route lease: an instance killed mid-handler frees its key a lease (1 s) later; the other runs it', async () => {
    const key = newKey('crash')
    const body = { item: 'crash' }
    const doomed = post(urls[0]!, '/api/short-lease', key, body, { 'x-hold-ms': '20000' }).catch((error: Error) => error)
    const deadline = Date.now() + 5_000
    while (executionsOf('short-lease', key).length === 0 && Date.now() < deadline) await sleep(50)
    expect(executionsOf('short-lease', key)).toHaveLength(1)
    await stopServer(targetServers[0]!, 'SIGKILL')
    expect(await doomed).toBeInstanceOf(Error)
    // The module's default lease (30 s) would still hold the key; this route's (1 s) has run out.
    await sleep(1_500)
    const takeover = await post(urls[1]!, '/api/short-lease', key, body)
    expectExecuted(takeover, 200)
    expect(executionsOf('short-lease', key)).toHaveLength(2)
    expectReplay(await post(urls[1]!, '/api/short-lease', key, body), takeover)
  }, stepTimeoutMs.test)
})
