import { setTimeout as sleep } from 'node:timers/promises'
import { appEnv } from './app'
import { type ManagedProcess, projectRoot, spawnManaged } from './processes'

/**
 * `npm run worker` as a real child process (jiti on the sources, as the script runs in a
 * deployment). Started means its log said "worker started".
 */

export interface StartWorkerOptions {
  databaseUrl: string
  /** Omitted or null: in-process locks. */
  redisUrl?: string | null
  /** Share it with the other processes of one test so they contend for the same resource locks. */
  redisKeyPrefix?: string
  /** Names the worker (WORKER_ID and error messages). */
  label?: string
  env?: Record<string, string>
}

export type WorkerProcess = ManagedProcess & { workerId: string }

const startTimeoutMs = 60_000
const jitiCli = `${projectRoot}node_modules/jiti/lib/jiti-cli.mjs`

export async function startWorker(options: StartWorkerOptions): Promise<WorkerProcess> {
  const label = options.label ?? 'worker'
  const workerId = `${label}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`
  const env = appEnv({ databaseUrl: options.databaseUrl, redisUrl: options.redisUrl, label, env: options.env })
  // The standalone worker verifies nothing: prove it by giving it no secret but mockpay's, which it signs deliveries with.
  for (const name of ['OPS_TOKEN', 'WEBHOOK_STANDARD_SECRET', 'WEBHOOK_STRIPE_SECRET', 'MIDTRANS_SERVER_KEY']) Reflect.deleteProperty(env, name)
  Object.assign(env, { LOG_LEVEL: 'info', WORKER_ID: workerId }, options.redisKeyPrefix ? { REDIS_KEY_PREFIX: options.redisKeyPrefix } : {}, options.env)
  const child = spawnManaged({ label, args: [jitiCli, 'scripts/worker.ts'], env })
  const deadline = Date.now() + startTimeoutMs
  while (Date.now() < deadline) {
    if (child.output().includes('"msg":"worker started"')) return { ...child, workerId }
    if (child.hasExited()) throw new Error(`${label} exited with code ${await child.exited} before it started. Output:\n${child.output()}`)
    await sleep(50)
  }
  await child.stop()
  throw new Error(`${label} did not start within ${startTimeoutMs / 1000} s. Output:\n${child.output()}`)
}

/** The JSON log lines a process wrote whose `msg` is `msg` (e.g. "job attempt finished"). */
export function logLines(process: ManagedProcess, msg: string): Array<Record<string, unknown>> {
  return process.output().split('\n')
    .filter(line => line.startsWith('{') && line.includes(`"msg":"${msg}"`))
    .map(line => JSON.parse(line) as Record<string, unknown>)
}
