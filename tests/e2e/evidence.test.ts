import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { fastJobsEnv, stopAll } from '../support/app'
import { request, type TestResponse } from '../support/http'
import { opsRequest } from '../support/ops'
import { expectProblem, newIdempotencyKey, type OrdersStack, postOrder, startOrdersStack, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { describeWithServices } from '../support/services'
import { deliver, newWebhookId, standardBody, standardDelivery } from '../support/webhooks'

// The evidence locker (docs/operations.md#evidence-and-audit): GET /api/ops/evidence against the
// built server on real Postgres and Redis with its in-app worker. Each story is produced through
// the API (a fault-injected drop, a retry, signed webhooks, a forged one) and then read back as one
// timeline; row reads on the app's database tell when the story is complete (request_log rows are
// written in batches after the answer).

/** A Standard Webhooks secret the app does not have: its deliveries are forgeries. */
const foreignStandardSecret = `whsec_${Buffer.alloc(32, 9).toString('base64')}`

interface Entry {
  at: string
  kind: string
  summary: string
  ids: Record<string, string>
  detail: Record<string, any>
  verified?: boolean
}

const serverRequestIdPattern = /^req_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
/** What an entry reached only through a client's X-Request-Id says after its own summary. */
const clientSupplied = (clientRequestId: string) => ` Found through X-Request-Id "${clientRequestId}": the client's id; anyone can send it.`

const ofKind = (timeline: Entry[], kind: string) => timeline.filter(entry => entry.kind === kind)

describeWithServices('GET /api/ops/evidence: one timeline per key, order, event or request', ['postgres', 'redis'], () => {
  let stack: OrdersStack

  beforeAll(async () => {
    stack = await startOrdersStack('evidence', fastJobsEnv)
  })

  afterAll(async () => {
    await stack?.close()
    await stopAll()
  })

  const sql = () => stack.sql
  const scope = () => `tenant:${stack.tenant.tenantId}`
  const ops = (path: string) => opsRequest(stack.app.url, path)

  async function evidence(query: Record<string, string>): Promise<{ query: Record<string, string>, timeline: Entry[], truncated: boolean }> {
    const response = await ops(`/api/ops/evidence?${new URLSearchParams(query)}`)
    expect(response.status, response.text).toBe(200)
    expect(response.headers.get('content-type')).toMatch(/^application\/json\b/)
    expect(Object.keys(response.json).sort()).toEqual(['query', 'timeline', 'truncated'])
    return response.json
  }

  /** Pays `orderId` with a signed payment.succeeded (IDR 150 000) and answers the delivery's response. */
  async function pay(orderId: string, webhookId = newWebhookId()): Promise<TestResponse> {
    const body = standardBody('payment.succeeded', { orderId, paymentId: `pay_${orderId}`, amount: 150_000, currency: 'IDR' })
    return deliver(stack.app.url, standardDelivery(webhookId, body))
  }

  /** Until every job of the order completed and the expected number of requests carrying `key` is logged. */
  async function settled(orderId: string, jobs: number, logged: Array<{ key: string, rows: number }>): Promise<void> {
    await pollUntil(`order ${orderId} has ${jobs} completed jobs and its requests are logged`, async () => {
      const [row] = await sql()<[{ jobs: number, done: number }]>`
        select count(*)::int as jobs, count(*) filter (where status = 'completed')::int as done
        from jobs where resource_id = ${`order:${orderId}`}`
      if (row.jobs !== jobs || row.done !== jobs) return false
      for (const { key, rows } of logged) {
        const [count] = await sql()<[{ n: number }]>`select count(*)::int as n from request_log where idempotency_key = ${key}`
        if (count.n !== rows) return false
      }
      return true
    }, { timeoutMs: 20_000, intervalMs: 100 })
  }

  function expectChronological(timeline: Entry[]): void {
    const times = timeline.map(entry => Date.parse(entry.at))
    expect(times.every(Number.isFinite)).toBe(true)
    expect(times).toEqual([...times].sort((a, b) => a - b))
    for (const entry of timeline) {
      expect(entry.at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
      expect(entry.summary.length).toBeGreaterThan(10)
    }
  }

  /** The server's id of the request the client sent with `clientRequestId`, from its request_log row. */
  async function serverIdOf(clientRequestId: string): Promise<string> {
    const rows = await sql()<Array<{ requestId: string }>>`select request_id as "requestId" from request_log where client_request_id = ${clientRequestId}`
    expect(rows).toHaveLength(1)
    expect(rows[0]!.requestId).toMatch(serverRequestIdPattern)
    return rows[0]!.requestId
  }

  /**
   * A paid order whose first POST was dropped after its commit and retried: the story of the key.
   * Each attempt sent its own X-Request-Id; the records hold the server's ids.
   */
  let story: { key: string, orderId: string, firstClientId: string, retryClientId: string, firstRequestId: string, retryRequestId: string, eventId: string } | undefined

  async function droppedThenRetriedAndPaid() {
    if (story) return story
    const key = newIdempotencyKey()
    const body = validOrderBody({ customer: { email: `evidence-${randomUUID()}@example.com` } })
    const firstClientId = `req_first_${randomUUID()}`
    const retryClientId = `req_retry_${randomUUID()}`
    const send = (requestId: string, headers: Record<string, string> = {}) =>
      postOrder(stack.app.url, { secretKey: stack.tenant.secretKey, key, body, headers: { 'x-request-id': requestId, ...headers } })

    // The server commits, then drops the connection: the client never hears the 201 and retries.
    await expect(send(firstClientId, { 'x-fault': 'drop-after-commit' })).rejects.toThrow(/got no response/)
    const retry = await send(retryClientId)
    expect(retry.status, retry.text).toBe(201)
    expect(retry.json.idempotency).toEqual({ key, replayed: true })
    expect(retry.headers.get('x-request-id')).toBe(retryClientId)
    const retryRequestId = retry.headers.get('x-server-request-id')!
    expect(retryRequestId).toMatch(serverRequestIdPattern)
    const orderId: string = retry.json.id
    // Both attempts logged before the payment starts, so the timeline's order is the story's order.
    await settled(orderId, 1, [{ key, rows: 2 }])
    const eventId = newWebhookId()
    expect((await pay(orderId, eventId)).status).toBe(200)
    // payment.create_intent, webhook.apply, order.send_confirmation, order.issue_invoice.
    await settled(orderId, 4, [{ key, rows: 2 }, { key: eventId, rows: 1 }])
    const firstRequestId = await serverIdOf(firstClientId)
    expect(await serverIdOf(retryClientId)).toBe(retryRequestId)
    story = { key, orderId, firstClientId, retryClientId, firstRequestId, retryRequestId, eventId }
    return story
  }

  it('by key: both requests in order, one execution, its jobs with their attempts, the payment and its effects', async () => {
    const { key, orderId, firstClientId, retryClientId, firstRequestId, retryRequestId, eventId } = await droppedThenRetriedAndPaid()
    const found = await evidence({ key, scope: scope() })
    expect(found.query).toEqual({ key, scope: scope() })
    expect(found.truncated).toBe(false)
    const { timeline } = found
    expectChronological(timeline)

    // The two HTTP attempts with this key: the first committed but its answer never left (499).
    const requests = ofKind(timeline, 'request').filter(entry => entry.ids.key === key)
    // The whole timeline in the message: if this ever fails, the order of events is the diagnosis.
    expect(requests.map(entry => ({ ids: entry.ids, outcome: entry.detail.outcome, status: entry.detail.status, method: entry.detail.method, path: entry.detail.path })), JSON.stringify(timeline, null, 1)).toEqual([
      { ids: { requestId: firstRequestId, key, scope: scope() }, outcome: 'miss', status: 499, method: 'POST', path: '/api/orders' },
      { ids: { requestId: retryRequestId, key, scope: scope() }, outcome: 'replay', status: 201, method: 'POST', path: '/api/orders' },
    ])
    expect(requests.every(entry => typeof entry.detail.instance === 'string' && Number.isInteger(entry.detail.durationMs))).toBe(true)
    // Each under the server's id, the client's own kept beside it; both proved their tenant by its key.
    expect(requests.map(entry => [entry.verified, entry.detail.clientRequestId, entry.detail.authenticatedBy])).toEqual([
      [true, firstClientId, 'tenant_key'],
      [true, retryClientId, 'tenant_key'],
    ])
    expect(requests.some(entry => /unverified/.test(entry.summary))).toBe(false)

    // One execution: the record claimed by the first request and stored once, after one attempt.
    const orderRecord = ofKind(timeline, 'idempotency_record').filter(entry => entry.ids.scope === scope())
    expect(orderRecord.map(entry => [entry.detail.transition, entry.detail.status, entry.detail.attempts, entry.detail.responseStatus])).toEqual([
      ['claimed', 'succeeded', 1, 201],
      ['succeeded', 'succeeded', 1, 201],
    ])
    expect(orderRecord.every(entry => entry.ids.requestId === firstRequestId && entry.ids.orderId === orderId && entry.ids.key === key)).toBe(true)
    expect(ofKind(timeline, 'order').map(entry => entry.ids)).toEqual([{ orderId, key, scope: scope(), requestId: firstRequestId }])

    // The jobs, each completed at its first attempt; the apply job is linked to the provider's event.
    const jobs = ofKind(timeline, 'job')
    expect(jobs.map(entry => entry.detail.kind).sort()).toEqual(['order.issue_invoice', 'order.send_confirmation', 'payment.create_intent', 'webhook.apply'])
    expect(jobs.every(entry => entry.detail.status === 'completed' && entry.detail.lockKey === `lock:order:${orderId}`)).toBe(true)
    const attempts = ofKind(timeline, 'job_attempt')
    expect(attempts.map(entry => entry.ids.jobId).sort()).toEqual(jobs.map(entry => entry.ids.jobId).sort())
    expect(attempts.every(entry => entry.detail.outcome === 'completed' && entry.detail.attempt === 1)).toBe(true)
    const apply = jobs.find(entry => entry.detail.kind === 'webhook.apply')!
    expect(apply.ids).toMatchObject({ orderId, eventId, key: eventId })

    // The payment: its delivery, its stored event, the status change and the effects, once each.
    expect(ofKind(timeline, 'request').filter(entry => entry.ids.key === eventId).map(entry => [entry.detail.outcome, entry.detail.status, entry.ids.scope, entry.verified, entry.detail.authenticatedBy]))
      .toEqual([['miss', 200, 'provider:standard', true, 'webhook_signature']])
    expect(ofKind(timeline, 'webhook_event').map(entry => entry.ids)).toEqual([
      { eventId, webhookEventId: apply.ids.webhookEventId, orderId, requestId: expect.any(String), key: eventId, scope: 'provider:standard' },
    ])
    expect(ofKind(timeline, 'order_status').map(entry => [entry.detail.fromStatus, entry.detail.toStatus, entry.detail.outcome, entry.ids.eventId]))
      .toEqual([['pending_payment', 'paid', 'applied', eventId]])
    expect(ofKind(timeline, 'side_effect').map(entry => entry.detail.effect).sort()).toEqual(['confirmation_email', 'invoice'])
    expect(ofKind(timeline, 'email').map(entry => entry.detail.subject)).toEqual([`Order ${orderId} confirmed`])
    expect(ofKind(timeline, 'invoice').map(entry => [entry.ids.orderId, entry.detail.amount, entry.detail.currency])).toEqual([[orderId, 150_000, 'IDR']])

    // The story reads in causal order: the first request arrived, claimed the key, wrote the order;
    // the retry arrived after it and replayed; then the payment.
    const position = (predicate: (entry: Entry) => boolean) => timeline.findIndex(predicate)
    const claimed = position(entry => entry.kind === 'idempotency_record' && entry.detail.transition === 'claimed' && entry.ids.key === key)
    const created = position(entry => entry.kind === 'order')
    const first = position(entry => entry.ids.requestId === firstRequestId && entry.kind === 'request')
    const replayed = position(entry => entry.ids.requestId === retryRequestId)
    const applied = position(entry => entry.kind === 'order_status')
    expect(claimed).toBeGreaterThanOrEqual(0)
    expect([first < claimed, claimed < created, created < replayed, replayed < applied]).toEqual([true, true, true, true])
    // The record and the order are one transaction's rows, stamped with its one time: "claimed" comes
    // first by rank, not by time.
    expect(timeline[claimed]!.at).toBe(timeline[created]!.at)
    // Our events, each written at its change's commit: the creation after the order's row, the
    // payment after its status change; no endpoint, no delivery.
    const ourEvents = ofKind(timeline, 'event')
    expect(ourEvents.map(entry => [entry.detail.type, entry.ids.orderId, entry.detail.objectId, entry.ids.tenantId])).toEqual([
      ['order.created', orderId, orderId, stack.tenant.tenantId],
      ['order.paid', orderId, orderId, stack.tenant.tenantId],
    ])
    expect([position(entry => entry.kind === 'event') > created, position(entry => entry.kind === 'event' && entry.detail.type === 'order.paid') > applied]).toEqual([true, true])
    expect(ourEvents[1]!.detail.data).toMatchObject({ id: orderId, object: 'order', status: 'paid' })
    expect(ofKind(timeline, 'webhook_delivery')).toEqual([])
    // Nothing else: every entry is one of the rows above.
    expect(timeline).toHaveLength(2 + 1 + 2 + 2 + 1 + 4 + 4 + 1 + 1 + 2 + 1 + 1 + 2)
  })

  it('a key replayed in a loop: the first replay of the minute as its request, the rest counted in one entry, their sum exact', async () => {
    const key = newIdempotencyKey()
    const body = validOrderBody()
    const created = await postOrder(stack.app.url, { secretKey: stack.tenant.secretKey, key, body })
    expect(created.status, created.text).toBe(201)
    const replays = 6
    for (let replay = 0; replay < replays; replay++) {
      const again = await postOrder(stack.app.url, { secretKey: stack.tenant.secretKey, key, body })
      expect(again.headers.get('idempotent-replayed')).toBe('true')
    }
    const counted = async () => {
      const [row] = await sql()<[{ logged: number, counted: number }]>`select
        (select count(*)::int from request_log where idempotency_key = ${key} and outcome = 'replay') as logged,
        (select coalesce(sum(replays), 0)::int from request_log_replays where idempotency_key = ${key} and scope = ${scope()}) as counted`
      return row
    }
    await pollUntil('every replay is logged or counted', async () => {
      const { logged, counted: more } = await counted()
      return logged + more === replays
    })
    const { logged } = await counted()
    // One row per minute the replays fell in (the loop may cross one minute's end), the rest counted.
    expect(logged).toBeGreaterThanOrEqual(1)
    expect(logged).toBeLessThanOrEqual(2)

    const { timeline } = await evidence({ key, scope: scope() })
    expectChronological(timeline)
    expect(ofKind(timeline, 'request').map(entry => entry.detail.outcome)).toEqual(['miss', ...Array.from({ length: logged }, () => 'replay')])
    const countedEntries = ofKind(timeline, 'replays')
    expect(countedEntries.reduce((sum, entry) => sum + entry.detail.replays, 0)).toBe(replays - logged)
    for (const entry of countedEntries) {
      expect(entry.ids).toEqual({ key, scope: scope(), tenantId: stack.tenant.tenantId })
      expect(entry.detail).toMatchObject({ method: 'POST', path: '/api/orders', status: 201, key, scope: scope() })
      expect(entry.summary).toMatch(/^POST \/api\/orders replayed (once more|\d+ more times) \(answered 201\) between /)
    }
    // By key alone (no scope) the same counts are found.
    expect(ofKind((await evidence({ key })).timeline, 'replays')).toEqual(countedEntries)
  })

  it('by key alone, by order id and by either server request id: the same timeline', async () => {
    const { key, orderId, firstRequestId, retryRequestId } = await droppedThenRetriedAndPaid()
    const byKey = await evidence({ key, scope: scope() })
    const byKeyAlone = await evidence({ key })
    const byOrder = await evidence({ orderId })
    const byFirstRequest = await evidence({ requestId: firstRequestId })
    const byRetry = await evidence({ requestId: retryRequestId })
    expect(byOrder.query).toEqual({ orderId })
    expect(byRetry.query).toEqual({ requestId: retryRequestId })
    for (const other of [byKeyAlone, byOrder, byFirstRequest, byRetry]) {
      expect(other.timeline).toEqual(byKey.timeline)
      expect(other.truncated).toBe(false)
    }
  })

  it('by a client\'s X-Request-Id: the same story, every entry marked as found through the client\'s id', async () => {
    const { key, firstClientId } = await droppedThenRetriedAndPaid()
    const byKey = await evidence({ key, scope: scope() })
    const byClientId = await evidence({ requestId: firstClientId })
    expect(byClientId.truncated).toBe(false)
    expect(byClientId.timeline).toEqual(byKey.timeline.map(entry => ({
      ...entry,
      summary: `${entry.summary}${clientSupplied(firstClientId)}`,
      detail: { ...entry.detail, matchedBy: 'client_request_id' },
    })))
  })

  it('a client cannot pass its request for another: one that sends another request\'s server id is listed apart and marked', async () => {
    const genuineKey = newIdempotencyKey()
    const genuine = await postOrder(stack.app.url, { secretKey: stack.tenant.secretKey, key: genuineKey, body: validOrderBody() })
    expect(genuine.status, genuine.text).toBe(201)
    const genuineId = genuine.headers.get('x-server-request-id')!
    expect(genuineId).toMatch(serverRequestIdPattern)
    expect(genuine.headers.get('x-request-id')).toBe(genuineId)
    // Another client claims the genuine request's id as its own X-Request-Id.
    const impostorKey = newIdempotencyKey()
    const impostor = await postOrder(stack.app.url, { secretKey: stack.tenant.secretKey, key: impostorKey, body: validOrderBody(), headers: { 'x-request-id': genuineId } })
    expect(impostor.status, impostor.text).toBe(201)
    expect(impostor.headers.get('x-request-id')).toBe(genuineId)
    const impostorId = impostor.headers.get('x-server-request-id')!
    expect(impostorId).toMatch(serverRequestIdPattern)
    expect(impostorId).not.toBe(genuineId)
    await settled(genuine.json.id, 1, [{ key: genuineKey, rows: 1 }])
    await settled(impostor.json.id, 1, [{ key: impostorKey, rows: 1 }])
    // The impostor's order holds its own server id, never the one it sent.
    const [stored] = await sql()<[{ requestId: string }]>`select request_id as "requestId" from orders where id = ${impostor.json.id}`
    expect(stored.requestId).toBe(impostorId)

    const { timeline } = await evidence({ requestId: genuineId })
    const marked = timeline.filter(entry => entry.detail.matchedBy === 'client_request_id')
    const unmarked = timeline.filter(entry => entry.detail.matchedBy === undefined)
    expect(unmarked.length + marked.length).toBe(timeline.length)
    // The genuine request's story is the one its server id names, unmarked.
    expect(unmarked).toEqual((await evidence({ orderId: genuine.json.id })).timeline)
    expect(unmarked.every(entry => !entry.summary.includes('anyone can send it'))).toBe(true)
    // The impostor's is listed too (it did send that id), each entry saying it came through the client's id.
    const impostorStory = (await evidence({ orderId: impostor.json.id })).timeline
    expect(marked).toEqual(impostorStory.map(entry => ({ ...entry, summary: `${entry.summary}${clientSupplied(genuineId)}`, detail: { ...entry.detail, matchedBy: 'client_request_id' } })))
    expect(ofKind(marked, 'request').map(entry => [entry.ids.requestId, entry.detail.clientRequestId])).toEqual([[impostorId, genuineId]])
  })

  it('marks requests that proved no identity as unverified: a forged webhook and a 401 order request, not a signed webhook or an authenticated order', async () => {
    const created = await postOrder(stack.app.url, { secretKey: stack.tenant.secretKey, key: newIdempotencyKey(), body: validOrderBody() })
    expect(created.status, created.text).toBe(201)
    const refused = await postOrder(stack.app.url, { secretKey: `sk_unknown_${randomUUID()}`, key: newIdempotencyKey(), body: validOrderBody() })
    expectProblem(refused, 'unauthorized')
    const eventId = newWebhookId()
    const body = standardBody('payment.succeeded', { orderId: created.json.id, paymentId: `pay_${created.json.id}`, amount: 150_000, currency: 'IDR' })
    const forged = await deliver(stack.app.url, standardDelivery(eventId, body, { secret: foreignStandardSecret }))
    expectProblem(forged, 'webhook-signature-invalid')
    const signed = await deliver(stack.app.url, standardDelivery(eventId, body))
    expect(signed.status, signed.text).toBe(200)

    const requestEntry = async (response: TestResponse): Promise<Entry> => {
      const requestId = response.headers.get('x-server-request-id')!
      expect(requestId).toMatch(serverRequestIdPattern)
      let found: Entry[] = []
      await pollUntil(`the request ${requestId} is logged`, async () => {
        found = ofKind((await evidence({ requestId })).timeline, 'request').filter(entry => entry.ids.requestId === requestId)
        return found.length > 0
      })
      expect(found).toHaveLength(1)
      return found[0]!
    }
    const unverified = /; unverified: no key, session, ops token or signature proved who sent it\.$/
    for (const response of [forged, refused]) {
      const entry = await requestEntry(response)
      expect([entry.verified, entry.detail.authenticatedBy, entry.detail.status]).toEqual([false, null, 401])
      expect(entry.summary).toMatch(unverified)
    }
    for (const [response, authenticatedBy, status] of [[signed, 'webhook_signature', 200], [created, 'tenant_key', 201]] as const) {
      const entry = await requestEntry(response)
      expect([entry.verified, entry.detail.authenticatedBy, entry.detail.status]).toEqual([true, authenticatedBy, status])
      expect(entry.summary).not.toMatch(/unverified/)
    }
  })

  it('lists operator actions by request id and by key id, with the requests that made them', async () => {
    // Ops requests whose server ids the actions carry (the rows are written here, as the key routes
    // write them: in the request, just after it arrived).
    const issuing = await ops('/api/ops/jobs?limit=1')
    expect(issuing.status, issuing.text).toBe(200)
    const issuingRequest = issuing.headers.get('x-server-request-id')!
    const revoking = await ops('/api/ops/jobs?limit=2')
    const revokingRequest = revoking.headers.get('x-server-request-id')!
    expect([issuingRequest, revokingRequest].every(id => serverRequestIdPattern.test(id))).toBe(true)
    await pollUntil('both ops requests are logged', async () => {
      const [row] = await sql()<[{ n: number }]>`select count(*)::int as n from request_log where request_id in (${issuingRequest}, ${revokingRequest})`
      return row.n === 2
    })
    const tenantId = stack.tenant.tenantId
    const keyId = `key_${randomUUID()}`
    const otherKeyId = `key_${randomUUID()}`
    const act = (action: string, subject: string, requestId: string, keyPrefix: string, afterMs: number) => sql()`
      insert into operator_actions (action, tenant_id, subject_id, request_id, detail, created_at)
      select ${action}, ${tenantId}, ${subject}, ${requestId}, ${sql().json({ keyPrefix })}, created_at + make_interval(secs => ${afterMs / 1000})
      from request_log where request_id = ${requestId}`
    await act('api_key.created', keyId, issuingRequest, 'sk_abc', 1)
    await act('api_key.revoked', keyId, revokingRequest, 'sk_abc', 1)
    await act('api_key.created', otherKeyId, revokingRequest, 'sk_other', 2)

    const shape = (timeline: Entry[]) => timeline.map(entry => entry.kind === 'operator_action'
      ? { kind: entry.kind, ids: entry.ids, summary: entry.summary, detail: { action: entry.detail.action, subjectId: entry.detail.subjectId, detail: entry.detail.detail } }
      : { kind: entry.kind, ids: entry.ids, verified: entry.verified, authenticatedBy: entry.detail.authenticatedBy, path: entry.detail.path })
    const opsRequest = (requestId: string) => ({ kind: 'request', ids: { requestId }, verified: true, authenticatedBy: 'ops_token', path: '/api/ops/jobs' })
    const action = (name: string, subject: string, requestId: string, keyPrefix: string) => ({
      kind: 'operator_action',
      ids: { requestId, tenantId, keyId: subject },
      summary: `Operator action ${name} on ${subject} (${keyPrefix}) of tenant ${tenantId} by request ${requestId}.`,
      detail: { action: name, subjectId: subject, detail: { keyPrefix } },
    })

    const byKey = await evidence({ keyId })
    expect(byKey.query).toEqual({ keyId })
    expect(byKey.truncated).toBe(false)
    expectChronological(byKey.timeline)
    expect(shape(byKey.timeline)).toEqual([
      opsRequest(issuingRequest),
      action('api_key.created', keyId, issuingRequest, 'sk_abc'),
      opsRequest(revokingRequest),
      action('api_key.revoked', keyId, revokingRequest, 'sk_abc'),
    ])

    const byRequest = await evidence({ requestId: revokingRequest })
    expectChronological(byRequest.timeline)
    expect(shape(byRequest.timeline)).toEqual([
      opsRequest(revokingRequest),
      action('api_key.revoked', keyId, revokingRequest, 'sk_abc'),
      action('api_key.created', otherKeyId, revokingRequest, 'sk_other'),
    ])
    expect((await evidence({ keyId: `key_${randomUUID()}` })).timeline).toEqual([])
    expectProblem(await ops(`/api/ops/evidence?keyId=${keyId}&requestId=${revokingRequest}`), 'validation-failed')
  })

  it('by key id through the key routes: the key issued and revoked, each with the ops request that did it', async () => {
    const tenantId = stack.tenant.tenantId
    const issued = await opsRequest(stack.app.url, `/api/ops/tenants/${tenantId}/keys`, { method: 'POST', body: {} })
    expect(issued.status, issued.text).toBe(201)
    const keyId: string = issued.json.keyId
    const revoked = await opsRequest(stack.app.url, `/api/ops/tenants/${tenantId}/keys/${keyId}`, { method: 'DELETE' })
    expect(revoked.status, revoked.text).toBe(204)
    const issuingRequest = issued.headers.get('x-server-request-id')!
    const revokingRequest = revoked.headers.get('x-server-request-id')!
    await pollUntil('both key requests are logged', async () => {
      const [row] = await sql()<[{ n: number }]>`select count(*)::int as n from request_log where request_id in (${issuingRequest}, ${revokingRequest})`
      return row.n === 2
    })

    const { timeline } = await evidence({ keyId })
    expectChronological(timeline)
    expect(timeline.map(entry => [entry.kind, entry.ids.requestId, entry.kind === 'request' ? entry.detail.status : entry.detail.action, entry.verified])).toEqual([
      ['request', issuingRequest, 201, true],
      ['operator_action', issuingRequest, 'api_key.created', undefined],
      ['request', revokingRequest, 204, true],
      ['operator_action', revokingRequest, 'api_key.revoked', undefined],
    ])
    expect(ofKind(timeline, 'operator_action').every(entry => entry.ids.keyId === keyId && entry.ids.tenantId === tenantId)).toBe(true)
    expect(JSON.stringify(timeline)).not.toContain(issued.json.secretKey)
  })

  it('by event id: every delivery of the webhook-id, a forged one included, its record, apply job and status change', async () => {
    const created = await postOrder(stack.app.url, { secretKey: stack.tenant.secretKey, key: newIdempotencyKey(), body: validOrderBody() })
    expect(created.status, created.text).toBe(201)
    const orderId: string = created.json.id
    const eventId = newWebhookId()
    const body = standardBody('payment.succeeded', { orderId, paymentId: `pay_${orderId}`, amount: 150_000, currency: 'IDR' })

    // A forgery claiming the event id first (wrong secret): rejected, nothing stored, only logged.
    const forged = await deliver(stack.app.url, standardDelivery(eventId, body, { secret: foreignStandardSecret }))
    expectProblem(forged, 'webhook-signature-invalid')
    await pollUntil('the forged delivery is logged', async () => {
      const [row] = await sql()<[{ n: number }]>`select count(*)::int as n from request_log where idempotency_key = ${eventId}`
      return row.n === 1
    })
    expect((await deliver(stack.app.url, standardDelivery(eventId, body))).status).toBe(200)
    const redelivered = await deliver(stack.app.url, standardDelivery(eventId, body))
    expect(redelivered.json.idempotency).toEqual({ key: eventId, replayed: true })
    await settled(orderId, 4, [{ key: eventId, rows: 3 }])

    const { timeline, truncated, query } = await evidence({ eventId })
    expect(query).toEqual({ eventId })
    expect(truncated).toBe(false)
    expectChronological(timeline)
    expect(ofKind(timeline, 'request').map(entry => [entry.detail.outcome, entry.detail.status, entry.ids.scope, entry.ids.key, entry.verified]))
      .toEqual([
        ['signature_invalid', 401, 'provider:standard', eventId, false],
        ['miss', 200, 'provider:standard', eventId, true],
        ['replay', 200, 'provider:standard', eventId, true],
      ])
    const [stored, ...others] = ofKind(timeline, 'webhook_event')
    expect(others).toEqual([])
    // The provider's event id is not one of ours: the order's own events are not listed.
    expect(ofKind(timeline, 'event')).toEqual([])
    expect(stored!.ids).toMatchObject({ eventId, orderId, scope: 'provider:standard' })
    expect(stored!.detail).toMatchObject({ provider: 'standard', type: 'payment.succeeded', status: 'applied', amount: 150_000 })
    expect(stored!.detail.rawBody).toBeUndefined()
    const accepted = ofKind(timeline, 'request')[1]!
    expect(stored!.ids.requestId).toBe(accepted.ids.requestId)
    expect(ofKind(timeline, 'idempotency_record').map(entry => [entry.detail.transition, entry.ids.scope, entry.ids.webhookEventId]))
      .toEqual([['claimed', 'provider:standard', stored!.ids.webhookEventId], ['succeeded', 'provider:standard', stored!.ids.webhookEventId]])
    expect(ofKind(timeline, 'job').map(entry => [entry.detail.kind, entry.detail.status, entry.ids.webhookEventId])).toEqual([['webhook.apply', 'completed', stored!.ids.webhookEventId]])
    expect(ofKind(timeline, 'job_attempt').map(entry => entry.detail.outcome)).toEqual(['completed'])
    expect(ofKind(timeline, 'order_status').map(entry => [entry.detail.fromStatus, entry.detail.toStatus, entry.ids.webhookEventId]))
      .toEqual([['pending_payment', 'paid', stored!.ids.webhookEventId]])
    // The event's evidence stops at its own effect on the order: the order's story is its own query.
    expect(timeline).toHaveLength(3 + 1 + 2 + 1 + 1 + 1)
  })

  it('answers an empty timeline for what it has never seen, and refuses queries that name no single subject', async () => {
    expect(await evidence({ key: `unknown-${randomUUID()}` })).toEqual({ query: expect.any(Object), timeline: [], truncated: false })
    expect((await evidence({ orderId: 'ord_nothing' })).timeline).toEqual([])

    expectProblem(await request(stack.app.url, '/api/ops/evidence?key=k'), 'unauthorized')
    for (const query of ['', '?key=a&orderId=b', '?eventId=a&requestId=b']) {
      const refused = await ops(`/api/ops/evidence${query}`)
      expectProblem(refused, 'validation-failed')
      expect(refused.json.detail).toMatch(/exactly one of key, orderId, eventId, requestId or keyId/)
    }
    const scopeAlone = await ops('/api/ops/evidence?scope=provider:standard')
    expectProblem(scopeAlone, 'validation-failed')
    const scopeWithOrder = await ops('/api/ops/evidence?orderId=ord_x&scope=provider:standard')
    expectProblem(scopeWithOrder, 'validation-failed')
    expect(scopeWithOrder.json.errors).toEqual([{ path: 'scope', message: expect.stringMatching(/with key/) }])
    expectProblem(await ops('/api/ops/evidence?key=a&colour=red'), 'validation-failed')
    expectProblem(await ops(`/api/ops/evidence?key=${'k'.repeat(256)}`), 'validation-failed')
  })

  it('lists idempotency records newest first with their filters, and the dev mailbox', async () => {
    const { key, orderId, firstRequestId } = await droppedThenRetriedAndPaid()
    const listed = await ops(`/api/ops/idempotency?tenant=${stack.tenant.tenantId}&key=${key}`)
    expect(listed.status, listed.text).toBe(200)
    expect(listed.json).toEqual({
      object: 'list',
      data: [{
        id: expect.any(String),
        scope: scope(),
        key,
        route: 'POST /api/orders',
        status: 'succeeded',
        attempts: 1,
        requestId: firstRequestId,
        responseStatus: 201,
        resourceType: 'order',
        resourceId: orderId,
        error: null,
        createdAt: expect.any(String),
        updatedAt: expect.any(String),
        expiresAt: expect.any(String),
        leaseExpiresAt: null,
      }],
    })

    const ofTenant = (await ops(`/api/ops/idempotency?tenant=${stack.tenant.tenantId}&status=succeeded&limit=500`)).json.data as Array<{ scope: string, createdAt: string, status: string }>
    const [count] = await sql()<[{ n: number }]>`select count(*)::int as n from idempotency_records where scope = ${scope()} and status = 'succeeded'`
    expect(ofTenant).toHaveLength(count.n)
    expect(ofTenant.every(record => record.scope === scope() && record.status === 'succeeded')).toBe(true)
    const created = ofTenant.map(record => Date.parse(record.createdAt))
    expect(created).toEqual([...created].sort((a, b) => b - a))
    expect((await ops('/api/ops/idempotency?limit=1')).json.data).toHaveLength(1)
    expect((await ops('/api/ops/idempotency?status=failed')).json).toEqual({ object: 'list', data: [] })
    expect((await ops('/api/ops/idempotency?scope=provider:standard&limit=500')).json.data.every((record: { scope: string }) => record.scope === 'provider:standard')).toBe(true)
    for (const query of ['limit=0', 'limit=501', 'status=done', 'tenant=']) expectProblem(await ops(`/api/ops/idempotency?${query}`), 'validation-failed')
    expectProblem(await request(stack.app.url, '/api/ops/idempotency'), 'unauthorized')

    const mail = await ops(`/api/ops/mailbox?orderId=${orderId}`)
    expect(mail.status, mail.text).toBe(200)
    expect(mail.json).toEqual({
      object: 'list',
      data: [{ id: expect.stringMatching(/^msg_/), tenantId: stack.tenant.tenantId, orderId, to: expect.stringMatching(/^evidence-.*@example\.com$/), subject: `Order ${orderId} confirmed`, body: expect.stringContaining(orderId), messageId: null, createdAt: expect.any(String) }],
    })
    const everything = (await ops('/api/ops/mailbox?limit=500')).json.data as Array<{ createdAt: string }>
    const [mails] = await sql()<[{ n: number }]>`select count(*)::int as n from mailbox`
    expect(everything).toHaveLength(mails.n)
    const sent = everything.map(message => Date.parse(message.createdAt))
    expect(sent).toEqual([...sent].sort((a, b) => b - a))
    expectProblem(await ops('/api/ops/mailbox?limit=0'), 'validation-failed')
    expectProblem(await request(stack.app.url, '/api/ops/mailbox'), 'unauthorized')
  })
})
