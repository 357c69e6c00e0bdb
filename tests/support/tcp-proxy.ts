import net from 'node:net'
import { freePort } from './services'

export interface TcpProxy {
  port: number
  /** Drops every open connection and refuses new ones: the service looks gone. */
  cut(): Promise<void>
  /** Accepts connections again on the same port. */
  restore(): Promise<void>
  close(): Promise<void>
}

/**
 * A loopback TCP proxy in front of a shared service (Postgres), so a test can make the service
 * unreachable for one app without stopping it for everyone else.
 */
export async function startTcpProxy(target: { host: string, port: number }): Promise<TcpProxy> {
  const port = await freePort()
  const sockets = new Set<net.Socket>()
  const track = (socket: net.Socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
    socket.on('error', () => socket.destroy())
  }
  const server = net.createServer((client) => {
    const upstream = net.connect(target)
    track(client)
    track(upstream)
    client.pipe(upstream).pipe(client)
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
    async close() {
      for (const socket of sockets) socket.destroy()
      if (server.listening) await stopListening()
    },
  }
}
