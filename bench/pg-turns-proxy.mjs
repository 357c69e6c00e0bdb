// A TCP proxy between the app and Postgres that counts round trips without parsing the protocol.
// On each connection a "turn" begins when the client (the app) sends data after the server last
// sent data, or sends its first data: pipelined queries written back to back make one turn, and a
// query split over several TCP segments is still one. The sum over all connections is the number
// of times the app waited for Postgres.
import net from 'node:net'

/** Listens on a free loopback port and forwards every connection to `target`; `turns()` is the running total. */
export function startTurnsProxy(target) {
  let turns = 0
  const open = new Set()
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host)
    let serverSpokeLast = true
    client.on('data', () => {
      if (serverSpokeLast) turns++
      serverSpokeLast = false
    })
    upstream.on('data', () => { serverSpokeLast = true })
    client.pipe(upstream)
    upstream.pipe(client)
    // Either side closing or failing ends both, as a direct connection would end.
    const end = () => {
      client.destroy()
      upstream.destroy()
      open.delete(end)
    }
    for (const socket of [client, upstream]) socket.on('error', end).on('close', end)
    open.add(end)
  })
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => resolve({
      port: server.address().port,
      turns: () => turns,
      close: () => new Promise((closed) => {
        server.close(() => closed())
        for (const end of open) end()
      }),
    }))
  })
}
