import net from 'node:net'

/**
 * postgres.js writes a pipeline's messages in pieces: it flushes its buffer to the socket whenever
 * it passes 1 KiB, and the rest of the tick's messages in a setImmediate. Each piece is a socket
 * write, a syscall (0.1–0.2 ms each on the benchmark's VM, a quarter of the app's CPU in a paid
 * order), and Postgres may answer the first piece before the next arrives. Corked from its first
 * write until the check phase after postgres.js' own flush, the socket sends what one tick wrote
 * in one writev.
 */
export function coalescingWrites(socket: net.Socket): net.Socket {
  const write = socket.write.bind(socket) as (...args: unknown[]) => boolean
  let corked = false
  const uncork = () => {
    corked = false
    socket.uncork()
  }
  ;(socket as { write: unknown }).write = (...args: unknown[]) => {
    if (!corked) {
      corked = true
      socket.cork()
      // Immediates queued by the check phase run in the next one: after postgres.js' flush of this tick.
      setImmediate(() => setImmediate(uncork))
    }
    return write(...args)
  }
  return socket
}

/** What postgres.js parsed of the URL, as it passes it to its `socket` option. */
interface ParsedTarget {
  host: string[]
  port: number[]
  path?: string | false
}

/**
 * postgres.js' `socket` option for `url`: a socket connecting to its host, its writes coalesced.
 * Only for one TCP host without TLS (several hosts, a Unix socket or TLS keep postgres.js' own
 * socket). postgres.js writes its startup message at once (Node holds writes until the socket has
 * connected) and times the connect out itself (connect_timeout).
 */
export function coalescingSocketFactory(url: string, ssl: unknown): ((target: ParsedTarget) => net.Socket) | undefined {
  const authority = /^[a-z]+:\/\/(?:[^@/]*@)?([^/?#]*)/i.exec(url)?.[1] ?? ''
  if (ssl !== false || authority.includes(',') || /[?&]host=/.test(url)) return undefined
  return target => coalescingWrites(net.connect(target.port[0]!, target.host[0]!))
}
