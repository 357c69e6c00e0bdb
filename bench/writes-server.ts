/**
 * A second floor: a bare node:http server that writes exactly what a new-key order writes, with the
 * app's own statement builders — the idempotency record, the order and its payment.create_intent job
 * as one statement (planOrder, finishedRecordInsert, the database handle's transact), and the
 * request_log row through the app's batching writer. No framework, no validation, no tenant key
 * check, no processing lock, no replay cache. What the order's rows cost on this machine, so that
 * the new-key ratio splits into what the data model costs and what the rest of the app adds.
 * Run by the bench through jiti, with the app's environment.
 */
import { createServer } from 'node:http'
import { randomUUID } from 'node:crypto'
import { fingerprint, type IdempotentRequest } from 'nuxt-idempotency/core'
import { finishedRecordInsert } from '../packages/nuxt-idempotency/src/runtime/core/store'
import { storedResponse } from '../packages/nuxt-idempotency/src/runtime/core/run'
import { initConfig } from '../server/config'
import { openAppDatabase } from '../server/db'
import { createRequestLogWriter, REQUEST_LOG_WRITER_OPTIONS } from '../server/observability/request-log'
import { planOrder } from '../server/orders/service'
import { createTenant } from '../server/tenants/service'

const ROUTE = 'POST /api/orders'

const config = initConfig({ secretsOptional: true })
const handle = await openAppDatabase(config)
const { tenant } = await createTenant(handle.db, 'bench writes', { requestId: null, detail: { via: 'bench' } })
const scope = `tenant:${tenant.id}`
const requestLog = createRequestLogWriter(REQUEST_LOG_WRITER_OPTIONS)
const instance = `bench:${process.pid}`

const server = createServer(async (req, res) => {
  if (req.method === 'GET' && req.url === '/api/ready') {
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ready"}')
    return
  }
  const startedAt = Date.now()
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk)
  try {
    const payload = JSON.parse(Buffer.concat(chunks).toString('utf8'))
    const key = String(req.headers['idempotency-key'])
    const requestId = `req_${randomUUID()}`
    const now = new Date()
    // The request as the orders route hands it to the idempotency layer, and the record it stores.
    const request: IdempotentRequest = {
      scope, route: ROUTE, key, fingerprint: fingerprint({ method: 'POST', route: ROUTE, scope, payload }), requestId,
      ttlSeconds: config.IDEMPOTENCY_TTL_SECONDS, waitMs: 0, annotateBody: true,
    }
    const plan = planOrder(handle.db, now, { tenantId: tenant.id, idempotencyKey: key, requestId }, payload)
    const response = storedResponse(plan.result, request)
    await handle.transact([finishedRecordInsert(handle.db, { ...request, response, now }), ...plan.statements])
    res.writeHead(201, { 'content-type': 'application/json', ...response.headers }).end(JSON.stringify(response.body))
    requestLog.enqueue(handle.db, {
      requestId, clientRequestId: null, authenticatedBy: 'tenant_key', method: 'POST', path: '/api/orders', tenantId: tenant.id, scope,
      idempotencyKey: key, outcome: 'miss', status: 201, durationMs: Date.now() - startedAt, instance, createdAt: new Date(startedAt),
    })
  }
  catch (error) {
    res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: String(error) }))
  }
})
server.listen(Number(process.env.PORT), process.env.HOST ?? '127.0.0.1')
process.on('SIGTERM', () => server.close(() => requestLog.flush(5_000).then(() => handle.close()).then(() => process.exit(0))))
