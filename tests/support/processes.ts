import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

/** Child processes of the suites (app servers, standalone workers), never outliving the test run. */

export const projectRoot = fileURLToPath(new URL('../..', import.meta.url))

export interface ManagedProcess {
  pid: number
  /** Everything the process wrote to stdout and stderr so far. */
  output: () => string
  /** Sends a signal without waiting; SIGKILL by default, i.e. a crash. Use `stop()` to shut down gracefully. */
  kill: (signal?: NodeJS.Signals) => void
  /** SIGTERM, then SIGKILL after `forceAfterMs` (5 s); resolves once the process has exited. */
  stop: (forceAfterMs?: number) => Promise<void>
  /** The exit code, or null when a signal ended the process. */
  exited: Promise<number | null>
  hasExited: () => boolean
}

const gracefulStopMs = 5_000
const running = new Set<ManagedProcess>()

// A test worker that dies must not leave servers holding ports and database connections.
process.on('exit', () => {
  for (const child of running) child.kill('SIGKILL')
})

/** Started in the project root unless `cwd` says otherwise. */
export function spawnManaged(options: { label: string, args: string[], env: Record<string, string | undefined>, cwd?: string }): ManagedProcess {
  const child = spawn(process.execPath, options.args, { cwd: options.cwd ?? projectRoot, env: options.env, stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })

  let exitedYet = false
  const exited = new Promise<number | null>((resolve) => {
    // 'close' rather than 'exit': by then both pipes are drained, so output() is complete.
    child.once('close', (code) => {
      exitedYet = true
      resolve(code)
    })
    child.once('error', (error) => {
      output += `\n[spawn error] ${error.message}\n`
      exitedYet = true
      resolve(null)
    })
  })

  const managed: ManagedProcess = {
    pid: child.pid ?? -1,
    output: () => output,
    kill(signal = 'SIGKILL') {
      if (!exitedYet) child.kill(signal)
    },
    async stop(forceAfterMs = gracefulStopMs) {
      if (exitedYet) return
      child.kill('SIGTERM')
      const forceKill = setTimeout(() => child.kill('SIGKILL'), forceAfterMs)
      await exited
      clearTimeout(forceKill)
    },
    exited,
    hasExited: () => exitedYet,
  }
  running.add(managed)
  void exited.then(() => running.delete(managed))
  return managed
}

/** Stops every process this module started and is still running (afterAll safety net). */
export async function stopAll(): Promise<void> {
  await Promise.all([...running].map(child => child.stop()))
}
