import { type ChildProcess, spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { get as httpGet } from 'node:http'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'

/**
 * The module as a stranger gets it: the package is packed into a tarball, installed with npm into a
 * fresh Nuxt app outside this repository (next to nuxt and the database and Redis drivers, nothing
 * from the workspace), built with `nuxi build`, and the built server runs as real processes: two
 * sharing a fresh Postgres database and Redis, one embedded on PGlite with in-process locks. The
 * app's one route counts its executions in a file, so "one execution per key" is counted outside
 * the module.
 */

const repoRoot = fileURLToPath(new URL('../../..', import.meta.url))
const templateDir = fileURLToPath(new URL('./outside-in/app', import.meta.url))

/** Exact versions that install together on Node 20 (the registry's `latest` tags are other majors). */
const appDependencies = ['nuxt@3.21.11', 'postgres@3.4.9', 'ioredis@5.11.1', '@electric-sql/pglite@0.5.16']

const postgresHost = '127.0.0.1'
const postgresUrl = (database: string) => `postgres://root@${postgresHost}:5432/${database}`
const redisUrl = 'redis://127.0.0.1:6379'

/** Long enough that the ten copies sent at once are all in flight while the first one runs. */
const handlerDelayMs = 400
const concurrentCopies = 10

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

/**
 * The environment of every command and server: the test process's own without anything that
 * would point the app at the workspace, its services, or vitest (npm's own `npm_*` settings from
 * an `npm run` included).
 */
function isolatedEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(process.env)) {
    if (value === undefined) continue
    if (/^(?:DATABASE_URL|REDIS_.*|NUXT_.*|NITRO_.*|APP_BUILD_ROOT|NODE_PATH|NODE_ENV|VITEST.*|TEST|npm_.*|INIT_CWD|PORT|HOST)$/i.test(name)) continue
    env[name] = value
  }
  return { ...env, NUXT_TELEMETRY_DISABLED: '1', ...extra }
}

/** The last part of a process's output, for error messages. */
function outputTail(chunks: string[]): string {
  return chunks.join('').slice(-8_000)
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
  timings[label] = `${((Date.now() - started) / 1000).toFixed(1)} s`
  if (timedOut) throw new Error(`${label} (${command} ${args.join(' ')}) did not finish within ${options.timeoutMs / 1000} s. Output:\n${outputTail(output)}`)
  if (code !== 0) throw new Error(`${label} (${command} ${args.join(' ')}) exited with code ${code}. Output:\n${outputTail(output)}`)
  return stdout.join('')
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.unref()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')))
    })
  })
}

interface ServerProcess {
  label: string
  url: string
  child: ChildProcess
  output: string[]
  exited: Promise<void>
}

const servers: ServerProcess[] = []

/** Starts `.output/server/index.mjs` and waits (with a deadline) until it answers HTTP. */
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
    if (await answers200(port)) {
      timings[`start ${label}`] = `${((Date.now() - started) / 1000).toFixed(1)} s`
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
function answers200(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const request = httpGet({ host: '127.0.0.1', port, path: '/', agent: false, timeout: 2_000 }, (response) => {
      response.resume()
      response.on('end', () => resolve(response.statusCode === 200))
      response.on('error', () => resolve(false))
    })
    request.on('timeout', () => request.destroy())
    // Not listening yet, or too slow: poll again.
    request.on('error', () => resolve(false))
  })
}

async function stopServer(server: ServerProcess): Promise<void> {
  if (server.child.exitCode !== null || server.child.signalCode !== null) return
  server.child.kill('SIGTERM')
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

async function postSubscription(url: string, key: string | undefined, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const response = await fetch(`${url}/api/subscriptions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key === undefined ? {} : { 'idempotency-key': key }), ...headers },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(stepTimeoutMs.request),
  })
  const text = await response.text()
  let json: Record<string, unknown> | undefined
  try { json = JSON.parse(text) }
  catch { json = undefined }
  return { status: response.status, headers: response.headers, text, json }
}

interface Execution { key: string, body: unknown }

function executions(file: string): Execution[] {
  if (!existsSync(file)) return []
  return readFileSync(file, 'utf8').split('\n').filter(Boolean).map(line => JSON.parse(line) as Execution)
}

const executionsOf = (file: string, key: string) => executions(file).filter(execution => execution.key === key)

const newKey = (label: string) => `outside-in-${label}-${randomUUID()}`

function expectProblem(answer: Answer, status: number, slug: string): void {
  expect(answer.status, answer.text).toBe(status)
  expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json(?:;|$)/)
  expect(answer.json).toMatchObject({ type: `/problems/${slug}`, status })
}

/** The executing request's answer: 201, the handler's body and Location, not marked replayed. */
function expectExecuted(answer: Answer, plan: string): void {
  expect(answer.status, answer.text).toBe(201)
  expect(answer.headers.get('idempotent-replayed')).toBeNull()
  expect(answer.json).toEqual({ id: expect.stringMatching(/^sub_[0-9a-f-]{36}$/), plan })
  expect(answer.headers.get('location')).toBe(`/api/subscriptions/${String(answer.json?.id)}`)
}

/** A replay of `original`: the same status, body and Location, marked `Idempotent-Replayed: true`. */
function expectReplay(answer: Answer, original: Answer): void {
  expect(answer.status, answer.text).toBe(201)
  expect(answer.headers.get('idempotent-replayed')).toBe('true')
  expect(answer.json).toEqual(original.json)
  expect(answer.headers.get('location')).toBe(original.headers.get('location'))
}

/**
 * Ten copies of one request at once, spread over `urls`, then a later retry and another body
 * under the same key: one execution throughout.
 */
async function checkOneExecutionPerKey(urls: string[], executionsFile: string, label: string): Promise<void> {
  const key = newKey(label)
  const body = { plan: 'pro' }
  const answers = await Promise.all(Array.from({ length: concurrentCopies }, (_, i) => postSubscription(urls[i % urls.length]!, key, body)))

  expect(executionsOf(executionsFile, key)).toEqual([{ key, body }])
  const executed = answers.filter(answer => answer.status === 201 && answer.headers.get('idempotent-replayed') === null)
  expect(executed, answers.map(answer => `${answer.status} ${answer.text}`).join('\n')).toHaveLength(1)
  const original = executed[0]!
  expectExecuted(original, 'pro')
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

  const retry = await postSubscription(urls[urls.length - 1]!, key, body)
  expectReplay(retry, original)
  expect(executionsOf(executionsFile, key)).toHaveLength(1)

  const otherBody = await postSubscription(urls[0]!, key, { plan: 'team' })
  expectProblem(otherBody, 422, 'idempotency-key-reused')
  expect(executionsOf(executionsFile, key)).toHaveLength(1)
}

let workDir: string
let appDir: string
let database: string | undefined
let postgresUrls: string[] = []
let embeddedUrl: string
let postgresExecutions: string
let embeddedExecutions: string

beforeAll(async () => {
  workDir = mkdtempSync(join(tmpdir(), 'nuxt-idempotency-outside-in-'))
  appDir = join(workDir, 'app')
  const packDir = join(workDir, 'pack')
  mkdirSync(packDir)

  // 1. The package as published: its build (made by `npm ci`'s postinstall, never here: the other
  // suites load the same dist/ while this one runs) packed into a tarball.
  expect(existsSync(join(repoRoot, 'packages/nuxt-idempotency/dist/module.mjs')), 'packages/nuxt-idempotency/dist is missing: run `npm run build -w nuxt-idempotency`').toBe(true)
  const packed = JSON.parse(await run('npm pack', 'npm', ['pack', '--workspace', 'nuxt-idempotency', '--pack-destination', packDir, '--json'], { cwd: repoRoot, env: isolatedEnv(), timeoutMs: stepTimeoutMs.pack })) as { filename: string }[]
  const tarball = join(packDir, packed[0]!.filename)
  expect(existsSync(tarball), tarball).toBe(true)

  // 2. A fresh app outside the repository, installed from the registry and the tarball.
  // The template's sources only, should it ever have been installed or built in place.
  cpSync(templateDir, appDir, { recursive: true, filter: source => !/[\\/](?:node_modules|\.nuxt|\.output|\.data)$/.test(source) })
  await run('npm install', 'npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--save-exact', ...appDependencies, tarball], { cwd: appDir, env: isolatedEnv(), timeoutMs: stepTimeoutMs.install })
  const installed = join(appDir, 'node_modules/nuxt-idempotency')
  // A copy unpacked from the tarball, not a link into the workspace.
  expect(lstatSync(installed).isSymbolicLink()).toBe(false)
  expect(realpathSync(installed)).toBe(installed)
  expect(existsSync(join(installed, 'dist/module.mjs'))).toBe(true)
  expect(existsSync(join(installed, 'src'))).toBe(false)

  // 3. The production build.
  await run('nuxi build', join(appDir, 'node_modules/.bin/nuxi'), ['build'], { cwd: appDir, env: isolatedEnv({ NODE_ENV: 'production' }), timeoutMs: stepTimeoutMs.appBuild })
  const outputDir = join(appDir, '.output')
  expect(referencesToRepository(join(outputDir, 'server'))).toEqual([])

  // 4. A database of its own on the shared Postgres server.
  database = `nuxt_idempotency_outside_in_${process.pid}_${randomUUID().slice(0, 8)}`
  await run('createdb', 'createdb', ['-h', postgresHost, database], { cwd: workDir, env: isolatedEnv(), timeoutMs: stepTimeoutMs.database })

  // 5. Two instances on Postgres and Redis sharing one executions file, one embedded in its own directory.
  postgresExecutions = join(workDir, 'executions-postgres.jsonl')
  embeddedExecutions = join(workDir, 'executions-embedded.jsonl')
  writeFileSync(postgresExecutions, '')
  writeFileSync(embeddedExecutions, '')
  const embeddedCwd = join(workDir, 'embedded')
  mkdirSync(embeddedCwd)
  const shared = { DATABASE_URL: postgresUrl(database), REDIS_URL: redisUrl, EXECUTIONS_FILE: postgresExecutions, HANDLER_DELAY_MS: String(handlerDelayMs) }
  const started = await Promise.all([
    startServer('postgres-a', outputDir, appDir, shared),
    startServer('postgres-b', outputDir, appDir, shared),
    startServer('embedded', outputDir, embeddedCwd, { EXECUTIONS_FILE: embeddedExecutions, HANDLER_DELAY_MS: String(handlerDelayMs) }),
  ])
  postgresUrls = [started[0].url, started[1].url]
  embeddedUrl = started[2].url
}, 900_000)

afterAll(async () => {
  await Promise.all(servers.map(stopServer))
  if (database) {
    await run('dropdb', 'dropdb', ['-h', postgresHost, '--if-exists', '--force', database], { cwd: tmpdir(), env: isolatedEnv(), timeoutMs: stepTimeoutMs.database })
  }
  if (workDir) rmSync(workDir, { recursive: true, force: true })
  console.log(`outside-in timings: ${Object.entries(timings).map(([step, took]) => `${step} ${took}`).join(', ')}`)
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

/** Files of the built server that name this repository (the build must stand on the app's own node_modules). */
function referencesToRepository(dir: string): string[] {
  const found: string[] = []
  const visit = (current: string) => {
    for (const entry of readdirSync(current, { withFileTypes: true })) {
      const path = join(current, entry.name)
      if (entry.isDirectory()) visit(path)
      else if (/\.(?:m?js|cjs|json)$/.test(entry.name) && readFileSync(path, 'utf8').includes(repoRoot)) found.push(path)
    }
  }
  visit(dir)
  return found
}

describe('two instances on Postgres and Redis', () => {
  it('runs ten copies of one request sent at once once; a retry replays it; another body under the key is 422', async () => {
    await checkOneExecutionPerKey(postgresUrls, postgresExecutions, 'postgres')
  }, stepTimeoutMs.test)

  it('with Prefer: wait=5, the copies sent at once all get 201: one execution, the rest replays', async () => {
    const key = newKey('wait')
    const body = { plan: 'business' }
    const answers = await Promise.all(Array.from({ length: concurrentCopies }, (_, i) => postSubscription(postgresUrls[i % 2]!, key, body, { prefer: 'wait=5' })))

    expect(executionsOf(postgresExecutions, key)).toEqual([{ key, body }])
    const executed = answers.filter(answer => answer.headers.get('idempotent-replayed') === null)
    expect(executed, answers.map(answer => `${answer.status} ${answer.text}`).join('\n')).toHaveLength(1)
    expectExecuted(executed[0]!, 'business')
    for (const answer of answers) {
      if (answer !== executed[0]) expectReplay(answer, executed[0]!)
    }
  }, stepTimeoutMs.test)

  it('answers a request without a key 400 idempotency-key-missing, without running the handler', async () => {
    const before = executions(postgresExecutions).length
    expectProblem(await postSubscription(postgresUrls[0]!, undefined, { plan: 'pro' }), 400, 'idempotency-key-missing')
    expect(executions(postgresExecutions)).toHaveLength(before)
  }, stepTimeoutMs.test)

  it('takes the quoted key "k" for the key k: the second is a replay', async () => {
    const key = newKey('quoted')
    const body = { plan: 'starter' }
    const quoted = await postSubscription(postgresUrls[0]!, `"${key}"`, body)
    expectExecuted(quoted, 'starter')
    expectReplay(await postSubscription(postgresUrls[1]!, key, body), quoted)
    expect(executionsOf(postgresExecutions, key)).toEqual([{ key, body }])
  }, stepTimeoutMs.test)
})

describe('one embedded instance (PGlite, in-process locks)', () => {
  it('runs ten copies of one request sent at once once; a retry replays it; another body under the key is 422', async () => {
    await checkOneExecutionPerKey([embeddedUrl], embeddedExecutions, 'embedded')
    // Its executions went to its own file only.
    expect(executions(embeddedExecutions)).toHaveLength(1)
  }, stepTimeoutMs.test)
})
