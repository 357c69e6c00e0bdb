import net from 'node:net'
import postgres from 'postgres'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { type AppProcess, startApp, stopAll } from '../support/app'
import { createTenant, request } from '../support/http'
import { opsRequest } from '../support/ops'
import { countRows, newIdempotencyKey, postOrder, type TenantCredentials, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { createTestDatabase, describeWithServices, redisUrl } from '../support/services'
import { logLines } from '../support/worker'

// What a client sends can never stop the request log: control characters, overlong and invalid
// UTF-8 in a path, an X-Request-Id or an Idempotency-Key are answered, and reach the request_log
// row and the JSON log line percent-encoded (NUL → %00, U+0085 → %C2%85, a byte that is not UTF-8
// → %XX); after GET /api/%00 the next requests' rows keep landing. Bytes Node's HTTP parser refuses
// (a raw control character in the request line or a header) never reach the app: the parser's
// 400 answers them.

type LogLine = Record<string, unknown>

interface RawResponse {
  status: number
  /** Header names lower-cased; values as latin1, as they came. */
  headers: Record<string, string>
  json: any
}

/** One request written byte for byte on a socket: what fetch and node:http refuse to send. */
function sendRaw(port: number, requestLine: Buffer | string, headers: Array<Buffer | string>, body = ''): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port })
    const chunks: Buffer[] = []
    socket.setTimeout(10_000, () => socket.destroy(new Error('raw request timed out')))
    socket.on('data', (chunk: Buffer) => chunks.push(chunk))
    socket.once('error', reject)
    socket.once('close', () => {
      const raw = Buffer.concat(chunks).toString('latin1')
      const [head = '', ...rest] = raw.split('\r\n\r\n')
      const [statusLine = '', ...headerLines] = head.split('\r\n')
      const status = /^HTTP\/1\.1 (\d{3})/.exec(statusLine)
      if (!status) return reject(new Error(`no HTTP response: ${JSON.stringify(raw)}`))
      const parsed = Object.fromEntries(headerLines.map(line => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]))
      const text = Buffer.from(rest.join('\r\n\r\n'), 'latin1').toString('utf8')
      resolve({ status: Number(status[1]), headers: parsed, json: /json/.test(parsed['content-type'] ?? '') && text ? JSON.parse(text) : undefined })
    })
    const bodyBytes = Buffer.from(body, 'utf8')
    const head = [requestLine, 'Host: 127.0.0.1', ...headers, ...(body ? [`Content-Length: ${bodyBytes.length}`] : []), 'Connection: close']
    const crlf = Buffer.from('\r\n')
    socket.write(Buffer.concat([...head.flatMap(line => [typeof line === 'string' ? Buffer.from(line, 'latin1') : line, crlf]), crlf, bodyBytes]))
  })
}

/** A header line with raw bytes in its value: `name: <prefix><bytes>`. */
const headerWithBytes = (name: string, prefix: string, bytes: number[]) => Buffer.concat([Buffer.from(`${name}: ${prefix}`, 'latin1'), Buffer.from(bytes)])

/** Hostile bytes, as the percent-encoding the rule writes them in (also how they are named here). */
const hostileBytes: Record<string, number[]> = {
  '%00': [0x00],
  '%01': [0x01],
  '%7F': [0x7F],
  '%C2%85': [0xC2, 0x85],
  '%C0%AF': [0xC0, 0xAF],
  '%E0%80%AF': [0xE0, 0x80, 0xAF],
  '%FF': [0xFF],
}
/** Those Node's parser refuses in a header value (controls); the others are obs-text to it, and reach the app. */
const refusedByTheParser = ['%00', '%01', '%7F']

interface Row {
  requestId: string
  clientRequestId: string | null
  method: string
  path: string
  idempotencyKey: string | null
  outcome: string | null
  authenticatedBy: string | null
  status: number
}

describeWithServices('hostile input: escaped in the request log and the log lines, which it never stops', ['postgres', 'redis'], () => {
  let app: AppProcess
  let sql: postgres.Sql
  let tenant: TenantCredentials
  let dropDatabase: (() => Promise<void>) | undefined

  beforeAll(async () => {
    const database = await createTestDatabase('hostile_input')
    dropDatabase = database.drop
    app = await startApp({ databaseUrl: database.url, redisUrl, label: 'hostile-input', env: { LOG_LEVEL: 'info' } })
    sql = postgres(database.url, { max: 2, onnotice: () => {} })
    tenant = await createTenant(app.url, 'hostile input tenant')
  })

  afterAll(async () => {
    await stopAll()
    await sql?.end()
    await dropDatabase?.()
  })

  const rowsOf = (requestIds: string[]) => sql<Row[]>`
    select request_id as "requestId", client_request_id as "clientRequestId", method, path, idempotency_key as "idempotencyKey",
           outcome, authenticated_by as "authenticatedBy", status
    from request_log where request_id = any(${requestIds}) order by id`

  async function rowOf(requestId: string): Promise<Row> {
    let rows: Row[] = []
    await pollUntil(`the request_log row of ${requestId}`, async () => {
      rows = await rowsOf([requestId])
      return rows.length > 0
    })
    expect(rows).toHaveLength(1)
    return rows[0]!
  }

  async function lineOf(requestId: string): Promise<LogLine> {
    let line: LogLine | undefined
    await pollUntil(`the log line of ${requestId}`, async () => {
      line = logLines(app, 'request').find(entry => entry.requestId === requestId)
      return line !== undefined
    })
    return line!
  }

  const serverId = (response: RawResponse) => {
    expect(response.headers['x-server-request-id']).toMatch(/^req_[0-9a-f-]{36}$/)
    return response.headers['x-server-request-id']!
  }

  const expectRawProblem = (response: RawResponse, status: number, slug: string) => {
    expect(response.status, JSON.stringify(response.json)).toBe(status)
    expect(response.headers['content-type']).toBe('application/problem+json')
    expect(response.json).toMatchObject({ type: `/problems/${slug}`, status })
  }

  it('paths with %00, %01, %7f, C1, overlong and invalid UTF-8: each answered 404 not-found, its row and its line holding the path percent-encoded', async () => {
    const cases: Array<[sent: string, stored: string]> = [
      ['/api/%00', '/api/%00'],
      ['/api/%01', '/api/%01'],
      // The router decodes %7f to DEL; the rule writes it back upper-case.
      ['/api/%7f', '/api/%7F'],
      ['/api/%C2%85', '/api/%C2%85'],
      ['/api/%C0%AF', '/api/%C0%AF'],
      ['/api/%E0%80%AF', '/api/%E0%80%AF'],
      ['/api/%FF', '/api/%FF'],
      // Not UTF-8 as a whole: kept as sent, its %25 not doubled; the query is never part of the path.
      ['/api/%25/%00/%FF?q=%00', '/api/%25/%00/%FF'],
      ['/api/%25/%00?q=%00', '/api/%25/%00'],
      ['/api/a%09b%0Ac%0Dd', '/api/a%09b%0Ac%0Dd'],
    ]
    for (const [sent, stored] of cases) {
      const response = await sendRaw(app.port, `GET ${sent} HTTP/1.1`, [])
      expectRawProblem(response, 404, 'not-found')
      const requestId = serverId(response)
      expect(await rowOf(requestId), sent).toEqual({ requestId, clientRequestId: null, method: 'GET', path: stored, idempotencyKey: null, outcome: null, authenticatedBy: null, status: 404 })
      expect(await lineOf(requestId), sent).toMatchObject({ level: 'info', msg: 'request', requestId, path: stored, status: 404 })
    }
  })

  it('raw bytes in the request line, or controls in a header, never reach the app: 400 malformed-request from the parser', async () => {
    for (const [name, bytes] of Object.entries(hostileBytes)) {
      const inPath = await sendRaw(app.port, Buffer.concat([Buffer.from('GET /api/raw-'), Buffer.from(bytes), Buffer.from(' HTTP/1.1')]), [])
      expectRawProblem(inPath, 400, 'malformed-request')
      if (!refusedByTheParser.includes(name)) continue
      for (const header of ['X-Request-Id', 'Idempotency-Key']) {
        const inHeader = await sendRaw(app.port, 'GET /api/orders HTTP/1.1', [headerWithBytes(header, 'raw-', bytes)])
        expectRawProblem(inHeader, 400, 'malformed-request')
      }
    }
    // The parser's answers wrote no row: none names the raw- paths.
    const rows = await sql`select path from request_log where path like '/api/raw-%'`
    expect(rows).toEqual([])
  })

  it('X-Request-Id: visible ASCII that spells an escape is the client\'s id, as sent; C1, overlong and invalid UTF-8 are refused (no client id in the row) and the line shows them escaped', async () => {
    for (const name of Object.keys(hostileBytes)) {
      const spelled = await request(app.url, '/api/hostile-probe', { headers: { 'x-request-id': `id-${name}` } })
      expect(spelled.status).toBe(404)
      expect(spelled.headers.get('x-request-id')).toBe(`id-${name}`)
      const spelledId = spelled.headers.get('x-server-request-id')!
      expect(await rowOf(spelledId)).toMatchObject({ clientRequestId: `id-${name}`, path: '/api/hostile-probe', status: 404 })
      expect(await lineOf(spelledId)).toMatchObject({ clientRequestId: `id-${name}` })
      expect(await lineOf(spelledId)).not.toHaveProperty('refusedClientRequestId')
    }
    for (const [name, bytes] of Object.entries(hostileBytes)) {
      if (refusedByTheParser.includes(name)) continue
      const response = await sendRaw(app.port, 'GET /api/hostile-probe HTTP/1.1', [headerWithBytes('X-Request-Id', 'id-', bytes)])
      expectRawProblem(response, 404, 'not-found')
      const requestId = serverId(response)
      // Not a valid id: the response carries the server's.
      expect(response.headers['x-request-id']).toBe(requestId)
      expect(await rowOf(requestId)).toEqual({ requestId, clientRequestId: null, method: 'GET', path: '/api/hostile-probe', idempotencyKey: null, outcome: null, authenticatedBy: null, status: 404 })
      expect(await lineOf(requestId)).toMatchObject({ requestId, clientRequestId: null, refusedClientRequestId: `id-${name}` })
    }
  })

  it('Idempotency-Key on POST /api/orders: C1, overlong and invalid UTF-8 answer 400 idempotency-key-invalid and store nothing; the row says invalid, the line shows the key escaped', async () => {
    const before = await countRows(sql)
    const body = JSON.stringify(validOrderBody())
    for (const [name, bytes] of Object.entries(hostileBytes)) {
      if (refusedByTheParser.includes(name)) continue
      const response = await sendRaw(app.port, 'POST /api/orders HTTP/1.1', [
        `Authorization: Bearer ${tenant.secretKey}`,
        'Content-Type: application/json',
        headerWithBytes('Idempotency-Key', 'key-', bytes),
      ], body)
      expectRawProblem(response, 400, 'idempotency-key-invalid')
      const requestId = serverId(response)
      expect(await rowOf(requestId)).toEqual({ requestId, clientRequestId: null, method: 'POST', path: '/api/orders', idempotencyKey: null, outcome: 'invalid', authenticatedBy: 'tenant_key', status: 400 })
      expect(await lineOf(requestId)).toMatchObject({ requestId, idempotencyKey: null, outcome: 'invalid', refusedIdempotencyKey: `key-${name}` })
    }
    expect(await countRows(sql)).toEqual(before)

    // Visible ASCII that spells an escape is a valid key (docs/operations.md#logs): stored as sent,
    // its `%` a `%`.
    const key = `%00-${newIdempotencyKey()}`
    const created = await postOrder(app.url, { secretKey: tenant.secretKey, key, body: validOrderBody() })
    expect(created.status, created.text).toBe(201)
    const requestId = created.headers.get('x-server-request-id')!
    expect(await rowOf(requestId)).toMatchObject({ idempotencyKey: key, outcome: 'miss', status: 201 })
    expect(await lineOf(requestId)).toMatchObject({ idempotencyKey: key, outcome: 'miss' })
    expect(await lineOf(requestId)).not.toHaveProperty('refusedIdempotencyKey')
  })

  it('after GET /api/%00 the request log keeps going: the rows of the next requests are in the table within 2 s', async () => {
    const poisonous = await sendRaw(app.port, 'GET /api/%00 HTTP/1.1', [])
    expect(poisonous.status).toBe(404)
    const next = [
      await request(app.url, '/api/after-nul'),
      await postOrder(app.url, { secretKey: tenant.secretKey, key: newIdempotencyKey(), body: validOrderBody() }),
      await request(app.url, '/api/ready'),
    ]
    expect(next.map(response => response.status)).toEqual([404, 201, 200])
    const requestIds = [serverId(poisonous), ...next.map(response => response.headers.get('x-server-request-id')!)]
    const deadline = performance.now() + 2_000
    let rows: Row[] = []
    while (performance.now() < deadline) {
      rows = await rowsOf(requestIds)
      if (rows.length === requestIds.length) break
      await new Promise(resolve => setTimeout(resolve, 25))
    }
    expect(rows.map(row => [row.requestId, row.path, row.status])).toEqual([
      [requestIds[0], '/api/%00', 404],
      [requestIds[1], '/api/after-nul', 404],
      [requestIds[2], '/api/orders', 201],
      [requestIds[3], '/api/ready', 200],
    ])
  })

  it('nothing was quarantined, and the output is JSON lines without a raw control character', async () => {
    const scrape = await opsRequest(app.url, '/api/metrics')
    expect(scrape.status).toBe(200)
    expect(scrape.text).toContain('# TYPE request_log_rows_quarantined_total counter')
    expect(scrape.text.split('\n').filter(line => line.startsWith('request_log_rows_quarantined_total'))).toEqual([])

    const lines = app.output().split('\n').filter(line => line !== '')
    const notJson = lines.filter((line) => {
      try {
        return typeof JSON.parse(line) !== 'object'
      }
      catch {
        return true
      }
    })
    expect(notJson).toEqual([expect.stringMatching(/^Listening on http:\/\/127\.0\.0\.1:\d+$/)])
    // eslint-disable-next-line no-control-regex
    expect(lines.filter(line => /[\u0000-\u001F\u007F-\u009F\uFFFD]/.test(line))).toEqual([])
    const paths = logLines(app, 'request').map(line => line.path)
    expect(paths).toEqual(expect.arrayContaining(['/api/%00', '/api/%01', '/api/%7F', '/api/%C2%85', '/api/%C0%AF', '/api/%E0%80%AF', '/api/%FF']))
  })
})
