import { spawn } from 'node:child_process'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { serverEntry } from './build-once'
import { freePort, uniqueRedisPrefix } from './services'

/**
 * The built server (`.output`, produced by the e2e global setup) as a real child process, so the
 * suites exercise what ships: env parsing, start-up, graceful shutdown, crashes.
 */

const projectRoot = fileURLToPath(new URL('../..', import.meta.url))

/** Fixed key bytes of the Standard Webhooks secret (`whsec_` + base64), so tests can sign payloads. */
const webhookStandardKey = Buffer.from(Array.from({ length: 32 }, (_, i) => i + 1))

export const testSecrets = {
  opsToken: 'ops_test_token_0123456789abcdef',
  webhookStandardKey,
  webhookStandardSecret: `whsec_${webhookStandardKey.toString('base64')}`,
  webhookStripeSecret: 'stripe_test_secret_0123456789',
  midtransServerKey: 'midtrans_test_server_key_0123',
} as const

export interface StartAppOptions {
  /** Omitted: the app runs embedded on PGlite. */
  databaseUrl?: string
  /** Omitted or null: no Redis. */
  redisUrl?: string | null
  /** Applied last, so it overrides every default above (e.g. a shared REDIS_KEY_PREFIX). */
  env?: Record<string, string>
  /** Names the instance in its Redis prefix and in error messages. */
  label?: string
  /** What counts as started: `/api/ready` answering 200 (default), or only `/api/health` (listening). */
  until?: 'ready' | 'listening'
}

export interface AppProcess {
  /** http://127.0.0.1:PORT */
  url: string
  port: number
  pid: number
  /** Everything the process wrote to stdout and stderr so far. */
  output: () => string
  /** Sends a signal without waiting; SIGKILL by default, i.e. a crash. Use `stop()` to shut down gracefully. */
  kill: (signal?: NodeJS.Signals) => void
  /** SIGTERM, then SIGKILL after 5 s; resolves once the process has exited. */
  stop: () => Promise<void>
  /** The exit code, or null when a signal ended the process. */
  exited: Promise<number | null>
}

const readyTimeoutMs = 60_000
const readyPollMs = 100
const gracefulStopMs = 5_000

const runningApps = new Set<AppProcess>()

// A test worker that dies must not leave servers holding ports and database connections.
process.on('exit', () => {
  for (const app of runningApps) app.kill('SIGKILL')
})

export async function startApp(options: StartAppOptions = {}): Promise<AppProcess> {
  const label = options.label ?? 'app'
  const port = await freePort()
  const env: Record<string, string | undefined> = { ...process.env }
  // The test process's own service URLs must not leak into an instance that was given none.
  delete env.DATABASE_URL
  delete env.REDIS_URL
  Object.assign(env, {
    PORT: String(port),
    HOST: '127.0.0.1',
    NODE_ENV: 'production',
    REDIS_KEY_PREFIX: uniqueRedisPrefix(label),
    OPS_TOKEN: testSecrets.opsToken,
    WEBHOOK_STANDARD_SECRET: testSecrets.webhookStandardSecret,
    WEBHOOK_STRIPE_SECRET: testSecrets.webhookStripeSecret,
    MIDTRANS_SERVER_KEY: testSecrets.midtransServerKey,
    FAULTS_ENABLED: 'true',
    LOG_LEVEL: 'warn',
    WORKER_ENABLED: 'false',
  })
  if (options.databaseUrl) env.DATABASE_URL = options.databaseUrl
  if (options.redisUrl) env.REDIS_URL = options.redisUrl
  Object.assign(env, options.env)

  const child = spawn(process.execPath, [serverEntry], {
    cwd: projectRoot,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })

  let hasExited = false
  const exited = new Promise<number | null>((resolve) => {
    // 'close' rather than 'exit': by then both pipes are drained, so output() is complete.
    child.once('close', (code) => { hasExited = true; resolve(code) })
    child.once('error', (error) => { output += `\n[spawn error] ${error.message}\n`; hasExited = true; resolve(null) })
  })

  const app: AppProcess = {
    url: `http://127.0.0.1:${port}`,
    port,
    pid: child.pid ?? -1,
    output: () => output,
    kill(signal = 'SIGKILL') {
      if (!hasExited) child.kill(signal)
    },
    async stop() {
      if (hasExited) return
      child.kill('SIGTERM')
      const forceKill = setTimeout(() => child.kill('SIGKILL'), gracefulStopMs)
      await exited
      clearTimeout(forceKill)
    },
    exited,
  }
  runningApps.add(app)
  void exited.then(() => runningApps.delete(app))

  const deadline = Date.now() + readyTimeoutMs
  while (Date.now() < deadline) {
    if (hasExited) {
      throw new Error(`${label} exited with code ${await exited} before it was ready. Output:\n${output}`)
    }
    if (await answers200(`${app.url}${options.until === 'listening' ? '/api/health' : '/api/ready'}`)) return app
    await sleep(readyPollMs)
  }
  await app.stop()
  throw new Error(`${label} was not ready within ${readyTimeoutMs / 1000} s. Output:\n${output}`)
}

async function answers200(url: string): Promise<boolean> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(2_000) })
    await response.body?.cancel()
    return response.status === 200
  }
  catch {
    // Not listening yet, or too slow to answer: poll again.
    return false
  }
}

/** Stops every app this module started and is still running (afterAll safety net). */
export async function stopAll(): Promise<void> {
  await Promise.all([...runningApps].map(app => app.stop()))
}
