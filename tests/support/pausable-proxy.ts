import net from 'node:net'
import { freePort } from './services'

export interface PausableProxy {
  port: number
  /**
   * From now on, what the clients send is held back (in order) instead of reaching the server:
   * their queries wait as if the process had frozen. Synchronous, so a test can call it between
   * two statements a client issues. Answers already on their way back still arrive.
   */
  pause(): void
  /** Sends what was held back, in order, and forwards again. */
  resume(): void
  close(): Promise<void>
}

/**
 * A loopback TCP proxy in front of a shared service (Postgres) that can stall one app's traffic
 * without cutting its connections: an owner that stops reaching the database for a while, then
 * comes back and carries on where it stopped.
 */
export async function startPausableProxy(target: { host: string, port: number }): Promise<PausableProxy> {
  const port = await freePort()
  const sockets = new Set<net.Socket>()
  let held: Array<() => void> | undefined
  const track = (socket: net.Socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
    socket.on('error', () => socket.destroy())
  }
  const server = net.createServer((client) => {
    const upstream = net.connect(target)
    track(client)
    track(upstream)
    client.on('data', (chunk: Buffer) => {
      const send = () => { upstream.write(chunk) }
      if (held) held.push(send)
      else send()
    })
    upstream.pipe(client)
    client.once('close', () => upstream.destroy())
    upstream.once('close', () => client.destroy())
  })
  await new Promise<void>(resolve => server.listen(port, '127.0.0.1', resolve))
  return {
    port,
    pause() {
      held ??= []
    },
    resume() {
      const sends = held ?? []
      held = undefined
      for (const send of sends) send()
    },
    async close() {
      held = undefined
      for (const socket of sockets) socket.destroy()
      if (server.listening) await new Promise<void>(resolve => server.close(() => resolve()))
    },
  }
}
