import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PGLITE_LOCK_FILE } from '@idempotent-checkout/db-kit'
import { appEnv } from '../support/app'
import { serverEntry } from '../support/build-once'
import { request } from '../support/http'
import { newIdempotencyKey, type OrderBody, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { projectRoot, spawnManaged } from '../support/processes'
import { freePort } from '../support/services'

/**
 * `npm run dev` as a newcomer runs it (nuxt dev, embedded PGlite, generated secrets, faults on),
 * asked with real HTTP: what the built server guarantees must hold behind the dev server's proxy
 * too. It runs in a copy of the project's files, so edits in the checkout do not reload it mid-test.
 */

const readyTimeoutMs = 240_000

interface DevServer {
  child: ChildProcess
  output: () => string
  exited: Promise<number | null>
}

let workDir: string
let copy: string
let port: number
let url: string
let env: Record<string, string | undefined>
let server: DevServer | undefined
const pgliteDir = () => join(workDir, 'pglite')
const secretsFile = () => join(workDir, 'secrets', 'dev-secrets.json')

function startDev(): DevServer {
  // Its own process group: nuxt dev forks its server, and the whole group is stopped together.
  const child = spawn(process.execPath, [join(projectRoot, 'node_modules/nuxt/bin/nuxt.mjs'), 'dev', '--port', String(port), '--host', '127.0.0.1'], {
    cwd: copy, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
  const exited = new Promise<number | null>(resolve => child.once('close', code => resolve(code)))
  return { child, output: () => output, exited }
}

async function untilReady(dev: DevServer): Promise<void> {
  await pollUntil('nuxt dev to answer /api/ready with 200', async () => {
    if (dev.child.exitCode !== null) throw new Error(`nuxt dev exited:\n${dev.output()}`)
    try {
      const ready = await fetch(`${url}/api/ready`, { signal: AbortSignal.timeout(5_000) })
      return ready.status === 200
    }
    catch {
      return false
    }
  }, { timeoutMs: readyTimeoutMs, intervalMs: 500 })
}

async function stopDev(dev: DevServer): Promise<void> {
  if (dev.child.exitCode !== null || dev.child.signalCode !== null) return
  process.kill(-dev.child.pid!, 'SIGTERM')
  const forced = setTimeout(() => process.kill(-dev.child.pid!, 'SIGKILL'), 10_000)
  await dev.exited
  clearTimeout(forced)
}

/** The OPS_TOKEN the latest start printed. */
function printedOpsToken(dev: DevServer): string {
  const tokens = [...dev.output().matchAll(/^ {2}OPS_TOKEN=(\S+)$/gm)].map(match => match[1]!)
  expect(tokens.length, dev.output()).toBeGreaterThan(0)
  return tokens.at(-1)!
}

/**
 * Writes `text` on a fresh connection and resolves with every byte the server sent once it closed
 * the connection (closed or reset): a server that keeps it open fails the test by its timeout.
 */
function exchange(text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(text))
    let received = ''
    socket.setEncoding('utf8').on('data', (chunk: string) => { received += chunk })
    socket.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'ECONNRESET') reject(error)
    })
    socket.on('close', () => resolve(received))
  })
}

function parseResponse(raw: string): { status: number, headers: Record<string, string>, body: string } {
  const [head, ...rest] = raw.split('\r\n\r\n')
  const [statusLine, ...headerLines] = head!.split('\r\n')
  const headers = Object.fromEntries(headerLines.map((line) => {
    const colon = line.indexOf(':')
    return [line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()]
  }))
  return { status: Number(statusLine!.split(' ')[1]), headers, body: rest.join('\r\n\r\n') }
}

function orderRequest(secretKey: string, key: string, order: OrderBody, extraHeaders = ''): string {
  const body = JSON.stringify(order)
  return `POST /api/orders HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${secretKey}\r\nContent-Type: application/json\r\n`
    + `Idempotency-Key: ${key}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n${extraHeaders}\r\n${body}`
}

function runTenantCreate(name: string): { status: number, output: string } {
  try {
    const stdout = execFileSync(process.execPath, [join(projectRoot, 'node_modules/jiti/lib/jiti-cli.mjs'), 'scripts/tenant-create.ts', name], { cwd: copy, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
    return { status: 0, output: stdout }
  }
  catch (error) {
    const failed = error as { status: number, stdout: string, stderr: string }
    return { status: failed.status, output: `${failed.stdout}${failed.stderr}` }
  }
}

beforeAll(async () => {
  workDir = mkdtempSync(join(tmpdir(), 'dev-server-'))
  copy = join(workDir, 'project')
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: projectRoot, encoding: 'utf8' }).split('\0').filter(Boolean)
  for (const file of files) {
    if (!existsSync(join(projectRoot, file))) continue
    mkdirSync(dirname(join(copy, file)), { recursive: true })
    cpSync(join(projectRoot, file), join(copy, file))
  }
  symlinkSync(join(projectRoot, 'node_modules'), join(copy, 'node_modules'))
  port = await freePort()
  url = `http://127.0.0.1:${port}`
  env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^(VITEST(_\w+)?|TEST|NODE_ENV|DATABASE_URL|REDIS_URL|OPS_TOKEN|WEBHOOK_\w+|MIDTRANS_\w+|MOCKPAY_\w+|SESSION_PASSWORD|PORT|LOG_LEVEL)$/.test(name)))
  Object.assign(env, {
    APP_BUILD_ROOT: join(workDir, 'build'),
    PGLITE_DIR: pgliteDir(),
    DEV_SECRETS_FILE: secretsFile(),
    FAULTS_ENABLED: 'true',
    PORT: String(port),
    NUXT_TELEMETRY_DISABLED: '1',
  })
  server = startDev()
  await untilReady(server)
}, readyTimeoutMs + 30_000)

afterAll(async () => {
  if (server) await stopDev(server)
  rmSync(workDir, { recursive: true, force: true })
}, 30_000)

describe('npm run dev', () => {
  let opsToken: string
  let tenant: { tenantId: string, secretKey: string }

  it('prints its generated secrets and keeps them in a file only its owner can read', async () => {
    opsToken = printedOpsToken(server!)
    expect(opsToken).toMatch(/^ops_[\w-]{32}$/)
    expect(server!.output()).toContain(`Generated development secrets (kept in ${secretsFile()} across restarts;`)
    expect(statSync(secretsFile()).mode & 0o777).toBe(0o600)
    const kept = JSON.parse(readFileSync(secretsFile(), 'utf8')) as Record<string, string>
    expect(kept.OPS_TOKEN).toBe(opsToken)
    expect(Object.keys(kept).sort()).toEqual(['MIDTRANS_SERVER_KEY', 'MOCKPAY_WEBHOOK_SECRET', 'OPS_TOKEN', 'SESSION_PASSWORD', 'WEBHOOK_STANDARD_SECRET', 'WEBHOOK_STRIPE_SECRET'])
    const created = await request(url, '/api/ops/tenants', { method: 'POST', headers: { authorization: `Bearer ${opsToken}` }, body: { name: 'dev tenant' } })
    expect(created.status).toBe(201)
    tenant = { tenantId: created.json.tenant.id, secretKey: created.json.secretKey }
  })

  it('X-Fault: drop-after-commit closes the client\'s connection without a byte of response; the retry replays the committed order', async () => {
    const key = newIdempotencyKey()
    const order = validOrderBody()
    expect(await exchange(orderRequest(tenant.secretKey, key, order, 'X-Fault: drop-after-commit\r\n'))).toBe('')
    const retried = await request(url, '/api/orders', { method: 'POST', headers: { 'authorization': `Bearer ${tenant.secretKey}`, 'idempotency-key': key }, body: order })
    expect(retried.status).toBe(201)
    expect(retried.headers.get('idempotent-replayed')).toBe('true')
    expect(retried.json.idempotency).toEqual({ key, replayed: true })
  })

  it('headers over 16 KiB: 431 problem+json, like the built server', async () => {
    const raw = await exchange(`GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: ${'a'.repeat(20 * 1024)}\r\n\r\n`)
    const response = parseResponse(raw)
    expect(response.status).toBe(431)
    expect(response.headers['content-type']).toBe('application/problem+json')
    expect(response.headers['x-request-id']).toMatch(/^req_[0-9a-f-]{36}$/)
    expect(JSON.parse(response.body)).toEqual({
      type: '/problems/headers-too-large',
      title: 'Request headers too large',
      status: 431,
      detail: 'The request headers are too large. Keep Idempotency-Key within 255 characters and X-Request-Id within 128, and send fewer or smaller headers.',
    })
  })

  it('a control character in a header: 400 problem+json, like the built server', async () => {
    const raw = await exchange('GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Bad: a\u0001b\r\n\r\n')
    const response = parseResponse(raw)
    expect(response.status).toBe(400)
    expect(response.headers['content-type']).toBe('application/problem+json')
    expect(JSON.parse(response.body)).toEqual({
      type: '/problems/malformed-request',
      title: 'Malformed HTTP request',
      status: 400,
      detail: 'The request could not be parsed as HTTP (a header may contain a control character). Send header values as visible ASCII and retry.',
    })
  })

  it('npm run tenant:create refuses while the dev server holds the embedded database, and says how to ask the server instead', () => {
    const refused = runTenantCreate('second tenant')
    expect(refused.status).toBe(1)
    expect(refused.output).toContain(`The embedded database in ${pgliteDir()} is in use by process `)
    expect(refused.output).toContain('PGlite allows one process at a time. Stop that process first')
    expect(refused.output).toContain(`ask it with OPS_TOKEN=${opsToken} (printed at its start, kept in ${secretsFile()})`)
    expect(refused.output).toContain(`curl -X POST localhost:${port}/api/ops/tenants -H "Authorization: Bearer $OPS_TOKEN" -H 'Content-Type: application/json' -d '{"name":"second tenant"}'`)
    expect(refused.output).not.toContain('secretKey')
  })

  it('the built server refuses to start on the embedded database the dev server holds', async () => {
    const second = spawnManaged({ label: 'second-embedded', args: [serverEntry], env: { ...appEnv({ label: 'second-embedded' }), PGLITE_DIR: pgliteDir(), PORT: String(await freePort()) } })
    expect(await second.exited).toBe(1)
    expect(second.output()).toContain('Start-up failed: could not open or migrate the database.')
    expect(second.output()).toContain(`The embedded database in ${pgliteDir()} is in use by process `)
    expect(JSON.parse(readFileSync(join(pgliteDir(), PGLITE_LOCK_FILE), 'utf8')).pid).not.toBe(second.pid)
  })

  it('after a restart: the same secrets, and the tenant key issued before still works', async () => {
    await stopDev(server!)
    server = startDev()
    await untilReady(server)
    expect(printedOpsToken(server)).toBe(opsToken)
    const listed = await request(url, `/api/ops/tenants/${tenant.tenantId}/keys`, { headers: { authorization: `Bearer ${opsToken}` } })
    expect(listed.status).toBe(200)
    expect(listed.json.data).toHaveLength(1)
    const order = await request(url, '/api/orders', { method: 'POST', headers: { 'authorization': `Bearer ${tenant.secretKey}`, 'idempotency-key': newIdempotencyKey() }, body: validOrderBody() })
    expect(order.status).toBe(201)
  }, readyTimeoutMs + 30_000)
})
