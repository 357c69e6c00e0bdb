import net from 'node:net'
import { freePort } from './services'

export interface TcpProxy {
  port: number
  /** Drops every open connection and refuses new ones: the service looks gone. */
  cut(): Promise<void>
  /** Accepts connections again on the same port. */
  restore(): Promise<void>
  /**
   * From now on, what the clients send is held back (in order) instead of reaching the server:
   * their queries wait as if the process had frozen, their connections stay open. Synchronous, so
   * a test can call it between two statements a client issues. Answers already on their way back
   * still arrive.
   */
  pause(): void
  /** Sends what was held back, in order, and forwards again. */
  resume(): void
  close(): Promise<void>
}

/**
 * A loopback TCP proxy in front of a shared service (Postgres), so a test can make the service
 * unreachable, or stall it, for one app without stopping it for everyone else.
 */
export async function startTcpProxy(target: { host: string, port: number }): Promise<TcpProxy> {
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
  const listen = () => new Promise<void>(resolve => server.listen(port, '127.0.0.1', resolve))
  const stopListening = () => new Promise<void>(resolve => server.close(() => resolve()))
  await listen()
  return {
    port,
    async cut() {
      const closed = stopListening()
      for (const socket of sockets) socket.destroy()
      await closed
    },
    restore: listen,
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
      if (server.listening) await stopListening()
    },
  }
}

/** A proxy in front of a test database's Postgres, and the database URL that goes through it. */
export async function proxyDatabase(databaseUrl: string): Promise<{ proxy: TcpProxy, url: string }> {
  const direct = new URL(databaseUrl)
  const proxy = await startTcpProxy({ host: direct.hostname, port: Number(direct.port || 5432) })
  const proxied = new URL(databaseUrl)
  proxied.port = String(proxy.port)
  return { proxy, url: proxied.toString() }
}
