import { randomUUID } from 'node:crypto'
import http from 'node:http'
import postgres from 'postgres'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type AppProcess, fastJobsEnv, startApp, stopAll, testSecrets } from '../support/app'
import { createTenant, request } from '../support/http'
import { untilRequestInFlight } from '../support/in-flight'
import { opsRequest } from '../support/ops'
import { expectProblem, newIdempotencyKey, postOrder, type TenantCredentials, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { createTestDatabase, describeWithServices, redisUrl } from '../support/services'
import { deliver, newWebhookId, standardBody, standardDelivery } from '../support/webhooks'
import { logLines } from '../support/worker'

// docs/operations.md#logs: the built server's stdout at LOG_LEVEL=info is one JSON object per line:
// a "request" line per API request with the idempotency layer's verdict, a "job attempt finished"
// line per job attempt with its lock, and never a credential, whatever the requests carried.

const fastJobs = { ...fastJobsEnv, LOG_LEVEL: 'info' }

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736'
const serverRequestIdPattern = /^req_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const traceparent = `00-${TRACE_ID}-00f067aa0ba902b7-01`
/** Read by the server only through the Authorization header, which it must never log. */
const unknownSecretKey = `sk_unknown_${randomUUID()}`

type LogLine = Record<string, unknown>

describeWithServices('structured logs', ['postgres', 'redis'], () => {
  let app: AppProcess
  let sql: postgres.Sql
  let tenant: TenantCredentials
  let dropDatabase: (() => Promise<void>) | undefined

  beforeAll(async () => {
    const database = await createTestDatabase('logs')
    dropDatabase = database.drop
    app = await startApp({ databaseUrl: database.url, redisUrl, label: 'logs', env: fastJobs })
    sql = postgres(database.url, { max: 2, onnotice: () => {} })
    tenant = await createTenant(app.url, 'logs tenant')
  })

  afterAll(async () => {
    await stopAll()
    await sql?.end()
    await dropDatabase?.()
  })

  const post = (key: string | undefined, body: unknown, headers: Record<string, string> = {}) =>
    postOrder(app.url, { secretKey: tenant.secretKey, key, body, headers, timeoutMs: 20_000 })

  /** The request's line, once the request log wrote it (after the response went out). */
  async function requestLine(requestId: string): Promise<LogLine> {
    let line: LogLine | undefined
    await pollUntil(`the log line of ${requestId}`, async () => {
      line = logLines(app, 'request').find(entry => entry.requestId === requestId)
      return line !== undefined
    })
    return line!
  }

  async function fingerprintOf(key: string): Promise<string> {
    const [record] = await sql<Array<{ fingerprint: string }>>`select fingerprint from idempotency_records where key = ${key}`
    return record!.fingerprint
  }

  /** Every field the request line of an order request carries, with the values common to all of them. */
  const orderLine = (fields: LogLine) => ({
    level: 'info',
    time: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    msg: 'request',
    method: 'POST',
    path: '/api/orders',
    route: '/api/orders',
    tenantId: tenant.tenantId,
    durationMs: expect.any(Number),
    ...fields,
  })

  describe('a request line per idempotent request', () => {
    it('first execution and replay: request ids, tenant, route, key, fingerprint prefix, outcome, status, duration, trace id', async () => {
      const key = newIdempotencyKey()
      const body = validOrderBody()
      const first = await post(key, body, { 'x-request-id': `req-logs-${key}`, traceparent })
      expect(first.status, first.text).toBe(201)
      const replay = await post(key, body, { 'x-request-id': `req-logs-replay-${key}`, traceparent })
      expect(replay.status, replay.text).toBe(201)

      const fingerprintPrefix = (await fingerprintOf(key)).slice(0, 12)
      const common = { scope: `tenant:${tenant.tenantId}`, idempotencyKey: key, operation: 'POST /api/orders', fingerprintPrefix, status: 201, traceId: TRACE_ID, authenticatedBy: 'tenant_key' }
      // Logged under the server's id, the client's beside it.
      const [firstId, replayId] = [first, replay].map(response => response.headers.get('x-server-request-id')!)
      expect([firstId, replayId]).toEqual([expect.stringMatching(serverRequestIdPattern), expect.stringMatching(serverRequestIdPattern)])
      expect(await requestLine(firstId!)).toMatchObject(orderLine({ ...common, requestId: firstId, clientRequestId: `req-logs-${key}`, outcome: 'miss' }))
      expect(await requestLine(replayId!)).toMatchObject(orderLine({ ...common, requestId: replayId, clientRequestId: `req-logs-replay-${key}`, outcome: 'replay' }))
    })

    it('conflict and in-flight duplicate: their outcomes and statuses, each under its own fingerprint', async () => {
      const key = newIdempotencyKey()
      const body = validOrderBody()
      const first = post(key, body, { 'x-fault': 'delay-before-commit=3000' })
      await untilRequestInFlight(sql, { app, scope: `tenant:${tenant.tenantId}`, key })
      const inFlight = await post(key, body)
      expectProblem(inFlight, 'request-in-progress')
      expect((await first).status).toBe(201)
      const conflict = await post(key, validOrderBody())
      expectProblem(conflict, 'idempotency-key-reused')

      const fingerprint = await fingerprintOf(key)
      expect(await requestLine(inFlight.headers.get('x-request-id')!)).toMatchObject(orderLine({ idempotencyKey: key, fingerprintPrefix: fingerprint.slice(0, 12), outcome: 'in_progress', status: 409 }))
      const conflictLine = await requestLine(conflict.headers.get('x-request-id')!)
      expect(conflictLine).toMatchObject(orderLine({ idempotencyKey: key, fingerprintPrefix: expect.stringMatching(/^[0-9a-f]{12}$/), outcome: 'conflict', status: 422 }))
      expect(conflictLine.fingerprintPrefix).not.toBe(fingerprint.slice(0, 12))
      // No traceparent sent: no trace id.
      expect(conflictLine).not.toHaveProperty('traceId')
    })

    it('missing and malformed keys: missing_key and invalid, 400; a malformed traceparent is ignored', async () => {
      const missing = await post(undefined, validOrderBody(), { traceparent: `00-${'0'.repeat(32)}-00f067aa0ba902b7-01` })
      expectProblem(missing, 'idempotency-key-missing')
      const malformed = await post('has space', validOrderBody(), { traceparent: traceparent.toUpperCase() })
      expectProblem(malformed, 'idempotency-key-invalid')

      const missingLine = await requestLine(missing.headers.get('x-request-id')!)
      expect(missingLine).toMatchObject(orderLine({ idempotencyKey: null, outcome: 'missing_key', status: 400 }))
      const malformedLine = await requestLine(malformed.headers.get('x-request-id')!)
      expect(malformedLine).toMatchObject(orderLine({ idempotencyKey: null, outcome: 'invalid', status: 400 }))
      for (const line of [missingLine, malformedLine]) expect(line).not.toHaveProperty('traceId')
    })

    it('webhooks: the delivery, its replay and a forgery under the event id, with the route pattern', async () => {
      const order = await post(newIdempotencyKey(), validOrderBody())
      expect(order.status).toBe(201)
      const webhookId = newWebhookId()
      const payload = standardBody('payment.succeeded', { orderId: order.json.id, paymentId: `pay_${randomUUID()}`, amount: order.json.amount, currency: order.json.currency })
      const accepted = await deliver(app.url, standardDelivery(webhookId, payload))
      const duplicate = await deliver(app.url, standardDelivery(webhookId, payload))
      const forgedId = newWebhookId()
      const forged = await deliver(app.url, standardDelivery(forgedId, payload, { secret: `whsec_${Buffer.alloc(32, 7).toString('base64')}` }))
      expect([accepted.status, duplicate.status, forged.status]).toEqual([200, 200, 401])

      const webhookLine = (fields: LogLine) => ({ msg: 'request', method: 'POST', path: '/api/webhooks/standard', route: '/api/webhooks/:provider', scope: 'provider:standard', tenantId: null, ...fields })
      const [record] = await sql<Array<{ fingerprint: string }>>`select fingerprint from idempotency_records where scope = 'provider:standard' and key = ${webhookId}`
      const delivered = { idempotencyKey: webhookId, operation: 'POST /api/webhooks/standard', fingerprintPrefix: record!.fingerprint.slice(0, 12), status: 200 }
      expect(await requestLine(accepted.headers.get('x-request-id')!)).toMatchObject(webhookLine({ ...delivered, outcome: 'miss' }))
      expect(await requestLine(duplicate.headers.get('x-request-id')!)).toMatchObject(webhookLine({ ...delivered, outcome: 'replay' }))
      const forgedLine = await requestLine(forged.headers.get('x-request-id')!)
      expect(forgedLine).toMatchObject(webhookLine({ idempotencyKey: forgedId, outcome: 'signature_invalid', status: 401 }))
      expect(forgedLine).not.toHaveProperty('fingerprintPrefix')
    })
  })

  describe('the request_log row', () => {
    it('holds the server\'s request id, the client\'s X-Request-Id apart, and how the request authenticated', async () => {
      type Row = { requestId: string, clientRequestId: string | null, authenticatedBy: string | null, status: number }
      const rowOf = async (requestId: string): Promise<Row> => {
        let rows: Row[] = []
        await pollUntil(`the request_log row of ${requestId}`, async () => {
          rows = await sql<Row[]>`select request_id as "requestId", client_request_id as "clientRequestId", authenticated_by as "authenticatedBy", status from request_log where request_id = ${requestId}`
          return rows.length > 0
        })
        expect(rows).toHaveLength(1)
        return rows[0]!
      }
      const clientId = `client-${randomUUID()}`
      const created = await post(newIdempotencyKey(), validOrderBody(), { 'x-request-id': clientId })
      const refused = await postOrder(app.url, { secretKey: unknownSecretKey, key: newIdempotencyKey(), body: validOrderBody(), headers: { 'x-request-id': clientId } })
      const oversized = await post(newIdempotencyKey(), validOrderBody(), { 'x-request-id': 'r'.repeat(129) })
      const opsCall = await opsRequest(app.url, '/api/ops/jobs?limit=1')
      expect([created.status, refused.status, oversized.status, opsCall.status]).toEqual([201, 401, 201, 200])
      // X-Request-Id echoes a valid client id (docs/api.md#errors-and-headers); X-Server-Request-Id
      // is always the server's own.
      expect([created, refused].map(response => response.headers.get('x-request-id'))).toEqual([clientId, clientId])
      const [createdId, refusedId, oversizedId, opsId] = [created, refused, oversized, opsCall].map(response => response.headers.get('x-server-request-id')!)
      for (const id of [createdId, refusedId, oversizedId, opsId]) expect(id).toMatch(serverRequestIdPattern)
      expect(new Set([createdId, refusedId, oversizedId, opsId]).size).toBe(4)
      expect(oversized.headers.get('x-request-id')).toBe(oversizedId)
      expect(opsCall.headers.get('x-request-id')).toBe(opsId)

      expect(await rowOf(createdId!)).toEqual({ requestId: createdId, clientRequestId: clientId, authenticatedBy: 'tenant_key', status: 201 })
      expect(await rowOf(refusedId!)).toEqual({ requestId: refusedId, clientRequestId: clientId, authenticatedBy: null, status: 401 })
      expect(await rowOf(oversizedId!)).toEqual({ requestId: oversizedId, clientRequestId: null, authenticatedBy: 'tenant_key', status: 201 })
      expect(await rowOf(opsId!)).toEqual({ requestId: opsId, clientRequestId: null, authenticatedBy: 'ops_token', status: 200 })
      // The order and its record carry the server's id, never the client's.
      const [order] = await sql<Array<{ requestId: string }>>`select request_id as "requestId" from orders where id = ${created.json.id}`
      expect(order!.requestId).toBe(createdId)
      const [record] = await sql<Array<{ requestId: string }>>`select request_id as "requestId" from idempotency_records where resource_id = ${created.json.id}`
      expect(record!.requestId).toBe(createdId)
    })

    it('keeps a path exactly, whatever it holds: commas, braces, quotes, backslashes (rows travel as array literals)', async () => {
      const path = '/api/orders/ord_a,b{c}"d\\e\'f,NULL'
      const { port } = new URL(app.url)
      // Sent raw (fetch would percent-encode the quotes and braces, and turn the backslash into a slash).
      const status = await new Promise<number>((resolve, reject) => {
        http.get({ host: '127.0.0.1', port, path, headers: { authorization: `Bearer ${tenant.secretKey}` } }, (response) => {
          response.resume()
          resolve(response.statusCode!)
        }).once('error', reject)
      })
      expect(status).toBe(404)
      let rows: Array<Record<string, unknown>> = []
      await pollUntil('the row of the odd path', async () => {
        rows = await sql`select method, path, tenant_id, status, outcome from request_log where path = ${path}`
        return rows.length > 0
      })
      expect(rows).toEqual([{ method: 'GET', path, tenant_id: tenant.tenantId, status: 404, outcome: null }])
    })

    it('names the method as sent (HEAD, routed as GET) and keeps an encoded ? in the path as %3F, the query cut off', async () => {
      const response = await fetch(`${app.url}/api/orders/ord_a%3fb?expand=x`, { method: 'HEAD', headers: { authorization: `Bearer ${tenant.secretKey}` } })
      expect(response.status).toBe(404)
      const requestId = response.headers.get('x-server-request-id')!
      let rows: Array<Record<string, unknown>> = []
      await pollUntil('the row of the HEAD request', async () => {
        rows = await sql`select method, path, status from request_log where request_id = ${requestId}`
        return rows.length > 0
      })
      expect(rows).toEqual([{ method: 'HEAD', path: '/api/orders/ord_a%3Fb', status: 404 }])
    })
  })

  describe('a line per job attempt', () => {
    it('the order\'s job: job id, kind, attempt, resource, lock key, lock acquired and released, transition, duration', async () => {
      const created = await post(newIdempotencyKey(), validOrderBody())
      expect(created.status).toBe(201)
      const orderId: string = created.json.id
      let line: LogLine | undefined
      await pollUntil(`the job attempt of order ${orderId} is logged`, async () => {
        line = logLines(app, 'job attempt finished').find(entry => entry.resourceId === `order:${orderId}`)
        return line !== undefined
      }, { timeoutMs: 20_000, intervalMs: 100 })

      const [job] = await sql<Array<{ id: string }>>`select id from jobs where resource_id = ${`order:${orderId}`}`
      expect(line).toEqual({
        level: 'info',
        time: expect.any(String),
        pid: app.pid,
        hostname: expect.any(String),
        msg: 'job attempt finished',
        jobId: job!.id,
        kind: 'payment.create_intent',
        attempt: 1,
        fence: expect.any(Number),
        worker: expect.any(String),
        resourceId: `order:${orderId}`,
        queueWaitMs: expect.any(Number),
        lockKey: `lock:order:${orderId}`,
        lockResult: 'acquired',
        lockRelease: 'released',
        transition: 'completed',
        durationMs: expect.any(Number),
      })
    })
  })

  describe('the whole output', () => {
    it('is JSON lines (besides the server\'s listening banner) and never shows a credential or a bearer token', async () => {
      // Credentials on every path that reads them: the ops API, a rejected key, the metrics scrape.
      expectProblem(await request(app.url, '/api/orders', { method: 'POST', headers: { 'authorization': `Bearer ${unknownSecretKey}`, 'idempotency-key': newIdempotencyKey() }, body: validOrderBody() }), 'unauthorized')
      expectProblem(await request(app.url, '/api/ops/jobs', { headers: { authorization: `Bearer ${tenant.secretKey}` } }), 'unauthorized')
      const scrape = await opsRequest(app.url, '/api/metrics')
      expect(scrape.status).toBe(200)
      const listed = await opsRequest(app.url, '/api/ops/jobs')
      expect(listed.status).toBe(200)
      await requestLine(listed.headers.get('x-request-id')!)

      // Stopped, so the output is complete, shutdown lines included.
      await app.stop()
      expect(await app.exited).toBe(0)
      const output = app.output()
      const lines = output.split('\n').filter(line => line !== '')
      const notJson = lines.filter((line) => {
        try {
          return typeof JSON.parse(line) !== 'object'
        }
        catch {
          return true
        }
      })
      expect(notJson).toEqual([expect.stringMatching(/^Listening on http:\/\/127\.0\.0\.1:\d+$/)])
      const parsed = lines.filter(line => line.startsWith('{')).map(line => JSON.parse(line) as LogLine)
      for (const line of parsed) {
        expect(line).toMatchObject({ level: expect.stringMatching(/^(info|warn|error)$/), time: expect.any(String), msg: expect.any(String), pid: app.pid })
      }
      expect(parsed.filter(line => line.msg === 'request').length).toBeGreaterThanOrEqual(4)
      expect(parsed.filter(line => line.msg === 'worker stopped')).toHaveLength(1)

      for (const secret of [
        testSecrets.opsToken,
        tenant.secretKey,
        unknownSecretKey,
        testSecrets.webhookStandardSecret,
        testSecrets.webhookStandardKey.toString('base64'),
        testSecrets.webhookStripeSecret,
        testSecrets.midtransServerKey,
        testSecrets.sessionPassword,
      ]) {
        expect(output).not.toContain(secret)
      }
      expect(output).not.toMatch(/bearer/i)
      expect(output).not.toMatch(/authorization/i)
    })
  })
})
