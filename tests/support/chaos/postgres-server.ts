import { spawn, spawnSync } from 'node:child_process'
import { appendFile, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { freePort } from '../services'

/**
 * A Postgres cluster the chaos run owns: initdb into a temporary directory, its own port, and a
 * crash (`pg_ctl stop -m immediate`) and restart on the same port and data, so a run can take the
 * database away without touching the shared server on 5432. fsync stays on: the run checks that
 * what was acknowledged survives the crash.
 */

const binDir = process.env.POSTGRES_BIN_DIR ?? '/usr/lib/postgresql/15/bin'
/** initdb and postgres refuse to run as root: then they run as the `postgres` OS user. */
const runsAsRoot = process.getuid?.() === 0
const osUser = 'postgres'
const startTimeoutSeconds = 30

export interface TestPostgresServer {
  /** postgres://postgres@127.0.0.1:PORT/<database> */
  url: string
  port: number
  /** Crashes the server (`-m immediate`: no shutdown checkpoint, recovery on the next start). */
  crash: () => Promise<void>
  /** Starts it again on the same port and data directory; resolves once it accepts connections. */
  start: () => Promise<void>
  /** Stops it (if running) and deletes its directory. */
  destroy: () => Promise<void>
}

const liveClusters = new Set<string>()

// A test worker that dies must not leave a cluster running or its directory behind.
process.on('exit', () => {
  for (const dir of liveClusters) {
    spawnSync(...command('pg_ctl', ['stop', '-D', join(dir, 'data'), '-m', 'immediate']), { stdio: 'ignore' })
    rmSync(dir, { recursive: true, force: true })
  }
})

function command(binary: string, args: string[]): [string, string[]] {
  const path = join(binDir, binary)
  return runsAsRoot ? ['runuser', ['-u', osUser, '--', path, ...args]] : [path, args]
}

function run(binary: string, args: string[]): Promise<void> {
  const [file, argv] = command(binary, args)
  return runProcess(file, argv)
}

function runProcess(file: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
    child.once('error', reject)
    child.once('close', code => code === 0 ? resolve() : reject(new Error(`${file} ${args.join(' ')} exited with ${code}:\n${output}`)))
  })
}

export interface PostgresServerOptions {
  /** TLS on (ssl = on) with this certificate and key (PEM), e.g. signed by a CA the test made. */
  tls?: { cert: string, key: string }
}

export async function startPostgresServer(database: string, options: PostgresServerOptions = {}): Promise<TestPostgresServer> {
  const dir = await mkdtemp(join(tmpdir(), 'chaos-pg-'))
  liveClusters.add(dir)
  const dataDir = join(dir, 'data')
  const logFile = join(dir, 'postgres.log')
  let running = false
  try {
    if (runsAsRoot) await runProcess('chown', [`${osUser}:`, dir])
    const port = await freePort()
    await run('initdb', ['-D', dataDir, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-instructions'])
    await appendFile(join(dataDir, 'postgresql.conf'), [
      `port = ${port}`,
      `listen_addresses = '127.0.0.1'`,
      `unix_socket_directories = '${dir}'`,
      'max_connections = 200',
      'fsync = on',
      'shared_buffers = 32MB',
      ...(options.tls ? ['ssl = on', `ssl_cert_file = 'server.crt'`, `ssl_key_file = 'server.key'`] : []),
      '',
    ].join('\n'))
    if (options.tls) {
      // Postgres refuses a key readable by others; both belong to the server's OS user.
      await writeFile(join(dataDir, 'server.crt'), options.tls.cert)
      await writeFile(join(dataDir, 'server.key'), options.tls.key, { mode: 0o600 })
      if (runsAsRoot) await runProcess('chown', [`${osUser}:`, join(dataDir, 'server.crt'), join(dataDir, 'server.key')])
    }

    const server: TestPostgresServer = {
      url: `postgres://postgres@127.0.0.1:${port}/${database}`,
      port,
      async crash() {
        await run('pg_ctl', ['stop', '-D', dataDir, '-m', 'immediate', '-w'])
        running = false
      },
      async start() {
        await run('pg_ctl', ['start', '-D', dataDir, '-l', logFile, '-w', '-t', String(startTimeoutSeconds)])
        running = true
      },
      async destroy() {
        if (running) await server.crash()
        await rm(dir, { recursive: true, force: true })
        liveClusters.delete(dir)
      },
    }
    await server.start()
    const admin = postgres(`postgres://postgres@127.0.0.1:${port}/postgres`, { max: 1, onnotice: () => {} })
    try {
      await admin.unsafe(`create database "${database}"`)
    }
    finally {
      await admin.end()
    }
    return server
  }
  catch (error) {
    if (running) await run('pg_ctl', ['stop', '-D', dataDir, '-m', 'immediate', '-w']).catch(() => {})
    await rm(dir, { recursive: true, force: true })
    liveClusters.delete(dir)
    throw error
  }
}
