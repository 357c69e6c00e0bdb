// A PgBouncer the tests and benchmarks own: Debian's `pgbouncer` in transaction mode with its usual
// settings, on its own port, in front of a Postgres server. It can be killed (as a crash would) and
// started again on the same port. Plain JavaScript so that bench/*.mjs can start one too.
import { execFileSync, spawn } from 'node:child_process'
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { acceptsConnections, freePort } from './ports.mjs'

export const pgbouncerBinary = process.env.PGBOUNCER_BIN ?? '/usr/sbin/pgbouncer'
/**
 * PgBouncer refuses to run as root: then it runs as the `postgres` OS user (spawned with its uid, so
 * that a kill reaches PgBouncer itself).
 */
const runAs = process.getuid?.() === 0
  ? { uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })), gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' })) }
  : {}
const acceptTimeoutMs = 10_000

const running = new Set()
process.on('exit', () => {
  for (const child of running) child.kill('SIGKILL')
})

/**
 * Starts PgBouncer in front of `serverUrl` (a postgres:// URL; its host, port and user are used,
 * every database name is passed through). `poolMode` is `transaction` unless told otherwise;
 * `defaultPoolSize` server connections per database and user (20, PgBouncer's default).
 * @param {{ serverUrl: string, poolMode?: 'transaction' | 'session', defaultPoolSize?: number }} options
 */
export async function startPgbouncer(options) {
  const server = new URL(options.serverUrl)
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'ic-pgbouncer-'))
  const user = decodeURIComponent(server.username || 'postgres')
  writeFileSync(join(dir, 'users.txt'), `"${user}" ""\n`)
  // The usual production settings: transaction pooling, extra_float_digits ignored (drivers send
  // it), nothing else relaxed.
  writeFileSync(join(dir, 'pgbouncer.ini'), [
    '[databases]',
    `* = host=${server.hostname} port=${server.port || 5432}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'auth_type = trust',
    `auth_file = ${join(dir, 'users.txt')}`,
    `pool_mode = ${options.poolMode ?? 'transaction'}`,
    'max_client_conn = 2000',
    `default_pool_size = ${options.defaultPoolSize ?? 20}`,
    'ignore_startup_parameters = extra_float_digits',
    '',
  ].join('\n'))
  chmodSync(dir, 0o755)
  let child
  let output = ''

  const pooler = {
    port,
    /** The same database as `databaseUrl`, through the pooler. */
    urlFor(databaseUrl) {
      const url = new URL(databaseUrl)
      url.hostname = '127.0.0.1'
      url.port = String(port)
      return url.toString()
    },
    output: () => output,
    async start() {
      if (child) return
      const args = [join(dir, 'pgbouncer.ini')]
      child = spawn(pgbouncerBinary, args, { ...runAs, stdio: ['ignore', 'pipe', 'pipe'] })
      running.add(child)
      const exited = new Promise(resolve => child.once('close', resolve))
      child.exited = exited
      for (const stream of [child.stdout, child.stderr]) stream.setEncoding('utf8').on('data', (chunk) => { output = (output + chunk).slice(-20_000) })
      const deadline = Date.now() + acceptTimeoutMs
      while (!(await acceptsConnections(port))) {
        if (child.exitCode !== null || Date.now() > deadline) throw new Error(`pgbouncer did not start on port ${port}:\n${output}`)
        await sleep(50)
      }
    },
    /** SIGKILL: every client and server connection is cut at once. */
    async kill() {
      if (!child) return
      const stopping = child
      child = undefined
      running.delete(stopping)
      stopping.kill('SIGKILL')
      await stopping.exited
      while (await acceptsConnections(port)) await sleep(50)
    },
    async destroy() {
      await pooler.kill()
      rmSync(dir, { recursive: true, force: true })
    },
  }
  await pooler.start()
  return pooler
}
