// A TCP proxy between the app and Postgres that counts round trips: the times the app waited for
// Postgres. It reads both sides of the protocol. Each Sync or simple Query the app sends is owed a
// ReadyForQuery; a round trip begins when the app sends while it is owed none and has nothing
// unsynced on its way, i.e. after every statement it sent was answered. Statements pipelined back
// to back make one round trip however many socket writes carry them (postgres.js flushes every
// 1 KiB), and a message split over several TCP segments is still one. With `byStatement`, it also
// names each unit of work by its statements, so a round trip can be traced to the code that sent it.
import net from 'node:net'

const SSL_REQUEST_CODE = 80877103
const GSS_REQUEST_CODE = 80877104

const cstring = (buffer, from) => {
  const end = buffer.indexOf(0, from)
  return [buffer.toString('utf8', from, end), end + 1]
}

/**
 * Reads the frontend messages of one connection as they arrive. `owed()` for each message that
 * is owed a ReadyForQuery (the startup packet, Sync, simple Query); `flushed()` for a Flush; `request()` for an SSL or GSS
 * request (answered by one byte); `statement(text)` for each statement executed: a simple Query,
 * or a Bind of a statement Parsed earlier (named or not). `unsynced()`: whether bytes are on their
 * way that no Sync covers yet (a partial message, or extended-protocol messages before their Sync).
 */
function frontendReader({ owed, flushed, request, statement }) {
  let pending = Buffer.alloc(0)
  let startup = true
  let sinceSync = 0
  const parsed = new Map()
  const read = (chunk) => {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk
    for (;;) {
      if (startup) {
        // The startup packet (and SSL or GSS requests before it) has no type byte.
        if (pending.length < 8) return
        const length = pending.readInt32BE(0)
        if (pending.length < length) return
        const code = pending.readInt32BE(4)
        pending = pending.subarray(length)
        if (code === SSL_REQUEST_CODE || code === GSS_REQUEST_CODE) request()
        else {
          startup = false
          owed()
        }
        continue
      }
      if (pending.length < 5) return
      const length = pending.readInt32BE(1) + 1
      if (pending.length < length) return
      const type = String.fromCharCode(pending[0])
      const body = pending.subarray(5, length)
      pending = pending.subarray(length)
      if (type === 'S' || type === 'Q') {
        sinceSync = 0
        owed()
      }
      // A Flush asks for what came before it without a ReadyForQuery (postgres.js describes an
      // unnamed statement's parameters that way, then waits): the next backend message answers it.
      else if (type === 'H') {
        sinceSync = 0
        flushed()
      }
      // Authentication answers (password, SASL) are owed the startup's ReadyForQuery.
      else if (type !== 'p') sinceSync++
      if (type === 'Q') statement(cstring(body, 0)[0])
      else if (type === 'P') {
        const [name, next] = cstring(body, 0)
        parsed.set(name, cstring(body, next)[0])
      }
      else if (type === 'B') {
        const [, next] = cstring(body, 0)
        statement(parsed.get(cstring(body, next)[0]) ?? '(unknown statement)')
      }
    }
  }
  return { read, unsynced: () => pending.length > 0 || sinceSync > 0 }
}

/** Reads the backend messages of one connection: `ready()` for each ReadyForQuery, `message()` for every message. */
function backendReader({ ready, message, answersRequest }) {
  let pending = Buffer.alloc(0)
  return (chunk) => {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk
    for (;;) {
      // An SSL or GSS request is answered by one byte, with no message frame.
      if (answersRequest()) {
        if (pending.length < 1) return
        pending = pending.subarray(1)
        continue
      }
      if (pending.length < 5) return
      const length = pending.readInt32BE(1) + 1
      if (pending.length < length) return
      const type = pending[0]
      pending = pending.subarray(length)
      message()
      if (type === 0x5A) ready()
    }
  }
}

/** Statements that open, close or set up a transaction: a unit is named by what it does besides. */
const framing = /^(begin|commit|rollback|select set_config|set local)\b/i

/**
 * Listens on a free loopback port and forwards every connection to `target`; `turns()` is the
 * running total of round trips. With `byStatement`, `tally()` answers where they went: each unit
 * of work (a statement sent on its own, or a transaction from BEGIN to COMMIT however many round
 * trips it took) is named by the text of its first statement but the framing ones, and the tally
 * holds the round trips of every unit of that name, most first.
 */
export function startTurnsProxy(target, { byStatement = false } = {}) {
  let turns = 0
  const tallied = new Map()
  const open = new Set()
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host)
    // ReadyForQuery messages the app is owed, and SSL/GSS requests not answered yet.
    let owed = 0
    let requests = 0
    let flushPending = false
    const waiting = () => owed === 0 && !flushPending && !frontend.unsynced()
    // The unit being sent on this connection: its turns so far, its name once known, and whether a transaction is open.
    let unit = { turns: 0, name: undefined, inTransaction: false }
    const closeUnit = () => {
      if (unit.inTransaction || unit.turns === 0) return
      const name = unit.name ?? '(framing only)'
      if (byStatement) tallied.set(name, (tallied.get(name) ?? 0) + unit.turns)
      unit = { turns: 0, name: undefined, inTransaction: false }
    }
    const onStatement = (text) => {
      const trimmed = text.trim()
      if (/^begin\b/i.test(trimmed)) unit.inTransaction = true
      else if (/^(commit|rollback)\b/i.test(trimmed)) unit.inTransaction = false
      if (unit.name === undefined && !framing.test(trimmed)) unit.name = trimmed
    }
    const frontend = frontendReader({
      owed: () => { owed++ },
      flushed: () => { flushPending = true },
      request: () => { requests++ },
      statement: onStatement,
    })
    const backend = backendReader({
      ready: () => {
        owed--
        // Everything sent was answered: the unit is complete unless its transaction is still open.
        if (waiting()) closeUnit()
      },
      message: () => { flushPending = false },
      answersRequest: () => requests > 0 && requests-- > 0,
    })
    client.on('data', (chunk) => {
      if (waiting()) {
        turns++
        unit.turns++
      }
      frontend.read(chunk)
    })
    upstream.on('data', backend)
    client.pipe(upstream)
    upstream.pipe(client)
    // Either side closing or failing ends both, as a direct connection would end.
    const end = () => {
      closeUnit()
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
      tally: () => [...tallied].sort((a, b) => b[1] - a[1]),
      close: () => new Promise((closed) => {
        server.close(() => closed())
        for (const end of open) end()
      }),
    }))
  })
}
