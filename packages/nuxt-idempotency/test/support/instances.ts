import { type ChildProcess, spawn } from 'node:child_process'
import net from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'

/** A built fixture's server (`.output/server/index.mjs`) started as its own process on a free loopback port. */
export interface Instance {
  url: string
  child: ChildProcess
  /** Everything it wrote to stdout and stderr so far. */
  output: () => string
  /** SIGTERM, SIGKILL after 5 s; resolves once it exited. */
  stop: () => Promise<void>
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })
}

export async function startInstance(entry: string, env: Record<string, string>, options: { cwd?: string } = {}): Promise<Instance> {
  const port = await freePort()
  const child = spawn(process.execPath, [entry], {
    cwd: options.cwd,
    env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1', NITRO_PORT: String(port), NITRO_HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
  const exited = new Promise<void>(resolve => child.once('exit', () => resolve()))
  const hasExited = () => child.exitCode !== null || child.signalCode !== null
  return {
    url: `http://127.0.0.1:${port}`,
    child,
    output: () => output,
    async stop() {
      if (hasExited()) return
      child.kill('SIGTERM')
      const force = setTimeout(() => child.kill('SIGKILL'), 5_000)
      await exited
      clearTimeout(force)
    },
  }
}

/** Polls GET `path` until it answers 200; throws with the server's output if it exits or the deadline passes. */
export async function waitUntilReady(instance: Instance, path: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (instance.child.exitCode !== null || instance.child.signalCode !== null) {
      throw new Error(`${instance.url} exited (${instance.child.exitCode ?? instance.child.signalCode}) before it was ready:\n${instance.output()}`)
    }
    try {
      const response = await fetch(new URL(path, instance.url), { signal: AbortSignal.timeout(2_000) })
      await response.arrayBuffer()
      if (response.status === 200) return
    }
    catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) throw new Error(`${instance.url} not ready after ${timeoutMs} ms:\n${instance.output()}`)
    await sleep(100)
  }
}
