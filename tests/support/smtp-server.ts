import type { AddressInfo, Socket } from 'node:net'
import { SMTPServer, type SMTPServerSession } from 'smtp-server'

/**
 * A real SMTP server on loopback (the `smtp-server` package) that keeps what it receives, for the
 * app's SMTP_URL. It can be told to read a message in full and then drop the connection instead of
 * answering (the sender never learns that it was taken), or to refuse a recipient for good.
 */

export interface ReceivedMail {
  /** The envelope's recipients (RCPT TO). */
  recipients: string[]
  /** Headers by lower-case name (the first of each), unfolded. */
  headers: Record<string, string>
  /** The body, quoted-printable decoded when sent so. */
  text: string
}

export interface TestSmtpServer {
  /** `smtp://user:password@127.0.0.1:port`, the login this server accepts. */
  url: string
  /** Every message read to its end, in order, answered or not. */
  received: ReceivedMail[]
  /** The next `count` messages are read in full, then their connection is destroyed before the 250. */
  dropAnswers(count: number): void
  /** RCPT TO this address is answered 550 (no such user). */
  refuse(address: string): void
  stop(): Promise<void>
}

export const smtpLogin = { user: 'checkout', pass: 'smtp-test-password' }

export async function startSmtpServer(): Promise<TestSmtpServer> {
  const received: ReceivedMail[] = []
  const refused = new Set<string>()
  let drops = 0
  const server: SMTPServer = new SMTPServer({
    logger: false,
    // Plain SMTP on loopback: no certificate to make, and the login may travel in the clear.
    disabledCommands: ['STARTTLS'],
    allowInsecureAuth: true,
    onAuth(auth, _session, callback) {
      if (auth.username === smtpLogin.user && auth.password === smtpLogin.pass) callback(null, { user: auth.username })
      else callback(new Error('Invalid username or password'))
    },
    onRcptTo(address, _session, callback) {
      if (!refused.has(address.address)) return callback()
      callback(Object.assign(new Error(`5.1.1 <${address.address}>: no such user here`), { responseCode: 550 }))
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = []
      stream.on('data', (chunk: Buffer) => chunks.push(chunk))
      stream.on('end', () => {
        received.push(parseMail(Buffer.concat(chunks).toString('utf8'), session.envelope.rcptTo.map(rcpt => rcpt.address)))
        if (drops === 0) return callback()
        drops--
        socketOf(server, session)?.destroy()
      })
    },
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.server.address() as AddressInfo
  return {
    url: `smtp://${smtpLogin.user}:${smtpLogin.pass}@127.0.0.1:${port}`,
    received,
    dropAnswers: (count) => { drops = count },
    refuse: address => refused.add(address),
    stop: () => new Promise(resolve => server.close(resolve)),
  }
}

/** The session's socket: smtp-server offers no way to drop one connection, its connections hold it. */
function socketOf(server: SMTPServer, session: SMTPServerSession): Socket | undefined {
  const connections = server.connections as Set<{ session: SMTPServerSession, _socket: Socket }>
  return [...connections].find(connection => connection.session.id === session.id)?._socket
}

function parseMail(raw: string, recipients: string[]): ReceivedMail {
  const split = raw.indexOf('\r\n\r\n')
  const head = raw.slice(0, split).replace(/\r\n[ \t]+/g, ' ')
  const headers: Record<string, string> = {}
  for (const line of head.split('\r\n')) {
    const colon = line.indexOf(':')
    const name = line.slice(0, colon).toLowerCase()
    headers[name] ??= line.slice(colon + 1).trim()
  }
  const body = raw.slice(split + 4)
  const text = /quoted-printable/i.test(headers['content-transfer-encoding'] ?? '')
    ? Buffer.from(body.replace(/=\r\n/g, '').replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16))), 'latin1').toString('utf8')
    : body
  return { recipients, headers, text: text.replace(/\r\n/g, '\n').trimEnd() }
}
