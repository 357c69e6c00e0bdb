import { randomUUID } from 'node:crypto'
import type { Server } from 'node:http'
import type { Socket } from 'node:net'
import { problemBody } from '../problems'

const answered = new WeakSet<Server>()

/**
 * Requests Node's HTTP parser rejects (a control character in a header, headers over the limit)
 * never reach h3. Without this they get a bare 400 with no body; with it, a problem+json answer
 * and an X-Request-Id like every other response. Attached to the built server by the start-up plugin
 * and to `nuxt dev`'s own listener by the `listen` hook in nuxt.config.ts.
 */
export function answerUnparseableRequests(server: Server | undefined): void {
  if (!server || answered.has(server)) return
  answered.add(server)
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => {
    if (!error.code?.startsWith('HPE_') || !socket.writable) {
      socket.destroy()
      return
    }
    const body = JSON.stringify(error.code === 'HPE_HEADER_OVERFLOW'
      ? problemBody('headers-too-large', 'The request headers are too large. Keep Idempotency-Key within 255 characters and X-Request-Id within 128, and send fewer or smaller headers.')
      : problemBody('malformed-request', 'The request could not be parsed as HTTP (a header may contain a control character). Send header values as visible ASCII and retry.'))
    const { status, title } = JSON.parse(body) as { status: number, title: string }
    socket.end(`HTTP/1.1 ${status} ${title}\r\nContent-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n`
      + `X-Request-Id: req_${randomUUID()}\r\nConnection: close\r\n\r\n${body}`)
  })
}
