import { type ChildProcess, spawn } from 'node:child_process'
import net from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { freePort } from './services'

/**
 * A Redis the test owns, on its own port, so a suite can take it away and bring it back ("Redis
 * lost, then back") without disturbing the shared server on 6379. Nothing is persisted: a restart
 * comes back empty, like a crashed cache.
 */

const redisServerBinary = '/usr/bin/redis-server'
const acceptTimeoutMs = 10_000
const acceptPollMs = 50

export interface TestRedisServer {
  /** redis://127.0.0.1:PORT */
  url: string
  port: number
  /** Kills the server (SIGKILL, as a crash would) and resolves once it has exited. */
  stop: () => Promise<void>
  /** Starts it again on the same port and resolves once it accepts connections. */
  start: () => Promise<void>
}

const runningServers = new Set<ChildProcess>()

process.on('exit', () => {
  for (const server of runningServers) server.kill('SIGKILL')
})

export async function startRedisServer(): Promise<TestRedisServer> {
  const port = await freePort()
  let current: { child: ChildProcess, exited: Promise<void> } | undefined

  const server: TestRedisServer = {
    url: `redis://127.0.0.1:${port}`,
    port,
    async stop() {
      if (!current) return
      const { child, exited } = current
      current = undefined
      child.kill('SIGKILL')
      await exited
    },
    async start() {
      if (current) return
      current = await launch(port)
    },
  }
  await server.start()
  return server
}

async function launch(port: number): Promise<{ child: ChildProcess, exited: Promise<void> }> {
  const child = spawn(redisServerBinary, [
    '--port', String(port),
    '--bind', '127.0.0.1',
    '--save', '',
    '--appendonly', 'no',
    '--daemonize', 'no',
  ], { stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
  let hasExited = false
  const exited = new Promise<void>((resolve) => {
    child.once('close', () => {
      hasExited = true
      runningServers.delete(child)
      resolve()
    })
    child.once('error', (error) => {
      output += `\n[spawn error] ${error.message}\n`
      hasExited = true
      resolve()
    })
  })
  runningServers.add(child)

  const deadline = Date.now() + acceptTimeoutMs
  while (Date.now() < deadline) {
    if (hasExited) throw new Error(`redis-server on port ${port} exited before accepting connections:\n${output}`)
    if (await answersPing(port)) return { child, exited }
    await sleep(acceptPollMs)
  }
  child.kill('SIGKILL')
  await exited
  throw new Error(`redis-server on port ${port} did not accept connections within ${acceptTimeoutMs / 1000} s:\n${output}`)
}

/** One inline PING over a raw socket: true once the server answers +PONG. */
function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port })
    let reply = ''
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(1_000, () => done(false))
    socket.once('connect', () => socket.write('PING\r\n'))
    socket.setEncoding('utf8').on('data', (chunk: string) => {
      reply += chunk
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'))
    })
    socket.once('error', () => done(false))
  })
}
