import { afterAll, beforeAll, expect, it } from 'vitest'
import { fastJobsEnv, stopAll } from '../support/app'
import { createTenant, request, type TestResponse } from '../support/http'
import { opsRequest } from '../support/ops'
import { expectProblem, newIdempotencyKey, type OrdersStack, postOrder, startOrdersStack, type TenantCredentials, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { describeWithServices } from '../support/services'
import { deliver, newWebhookId, standardBody, standardDelivery } from '../support/webhooks'

// The console's events routes (docs/operations.md#events-and-endpoints) against the built server
// on Postgres: an order placed and paid as a tenant writes its two events (the triggers of
// drizzle/0017), listed newest first with their data; endpoints, delivery jobs and attempts are
// inserted as rows (what the delivery kind writes), and the list, one event's detail, the
// endpoints' health, a resend and the evidence timeline are read back with exact values.

const iso = (value: Date | string) => new Date(value).toISOString()
const minutesAgo = (minutes: number) => new Date(Date.now() - minutes * 60_000)

interface EndpointRow { id: string, url: string, events: string[], status: 'enabled' | 'disabled', disabledReason: string | null, failingSince: Date | null, lastSuccessAt: Date | null, lastFailureAt: Date | null }
interface AttemptRow { id: number, eventId: string, endpointId: string, jobId: string | null, attempt: number, statusCode: number | null, delivered: boolean, error: string | null, latencyMs: number, responseExcerpt: string | null, createdAt: Date }

describeWithServices('ops events routes: GET /api/ops/events, /events/{id}, POST /events/{id}/resend, GET /api/ops/webhook-endpoints', ['postgres', 'redis'], () => {
  let stack: OrdersStack
  let other: TenantCredentials
  let orderId: string
  /** The order's events as the database holds them: order.created, then order.paid. */
  let created: { id: string, sequence: number, createdAt: string }
  let paid: { id: string, sequence: number, createdAt: string }
  let createdData: Record<string, unknown>
  let paidOrder: Record<string, unknown>

  const tenantGet = (path: string): Promise<TestResponse> => request(stack.app.url, path, { headers: { authorization: `Bearer ${stack.tenant.secretKey}` } })
  const ops = (path: string, options: { method?: string, body?: unknown } = {}) => opsRequest(stack.app.url, path, options)

  beforeAll(async () => {
    stack = await startOrdersStack('ops_events', fastJobsEnv)
    other = await createTenant(stack.app.url, 'ops events, another shop')
    const body = validOrderBody()
    const placed = await postOrder(stack.app.url, { secretKey: stack.tenant.secretKey, key: newIdempotencyKey(), body })
    expect(placed.status, placed.text).toBe(201)
    orderId = placed.json.id
    // The payment is asked for first, so nothing changes the order after the payment's event.
    await pollUntil(`order ${orderId} has its payment`, async () => (await tenantGet(`/api/orders/${orderId}`)).json?.paymentIntentId !== null, { timeoutMs: 20_000 })
    const paidBody = standardBody('payment.succeeded', { orderId, paymentId: `pay_${orderId}`, amount: body.amount, currency: body.currency })
    expect((await deliver(stack.app.url, standardDelivery(newWebhookId(), paidBody))).status).toBe(200)
    await pollUntil(`order ${orderId} is paid`, async () => (await tenantGet(`/api/orders/${orderId}`)).json?.status === 'paid', { timeoutMs: 20_000 })
    paidOrder = (await tenantGet(`/api/orders/${orderId}`)).json

    const rows = await stack.sql<Array<{ id: string, type: string, sequence: string, createdAt: Date }>>`
      select id, type, sequence, created_at as "createdAt" from events where order_id = ${orderId} order by sequence`
    expect(rows.map(row => row.type)).toEqual(['order.created', 'order.paid'])
    const [first, second] = rows.map(row => ({ id: row.id, sequence: Number(row.sequence), createdAt: iso(row.createdAt) }))
    created = first!
    paid = second!
    createdData = {
      id: orderId, object: 'order', status: 'pending_payment', cartId: body.cartId, currency: body.currency, amount: body.amount, paymentMethod: body.paymentMethod,
      items: body.items, customer: body.customer, createdAt: placed.json.createdAt, paymentIntentId: null, payment: null, cancelReason: null,
      amountRefunded: 0, refunds: [], reservations: [],
    }

    // Three endpoints of the tenant, one of another; the deliveries' jobs and attempts as the delivery kind writes them.
    const endpointsCreatedAt = minutesAgo(60)
    const endpoint = (row: EndpointRow, tenantId = stack.tenant.tenantId) => stack.sql`insert into webhook_endpoints
      (id, tenant_id, url, events, status, disabled_reason, secret, failing_since, last_success_at, last_failure_at, created_at)
      values (${row.id}, ${tenantId}, ${row.url}, ${row.events}, ${row.status}, ${row.disabledReason}, 'whsec_dGVzdA==', ${row.failingSince}, ${row.lastSuccessAt}, ${row.lastFailureAt}, ${endpointsCreatedAt})`
    await endpoint({ id: 'we_1_erp', url: 'https://erp.example/hooks', events: ['order.paid'], status: 'enabled', disabledReason: null, failingSince: minutesAgo(30), lastSuccessAt: null, lastFailureAt: minutesAgo(5) })
    await endpoint({ id: 'we_2_shop', url: 'https://shop.example/hooks', events: ['*'], status: 'enabled', disabledReason: null, failingSince: null, lastSuccessAt: minutesAgo(4), lastFailureAt: minutesAgo(6) })
    await endpoint({ id: 'we_3_gone', url: 'https://gone.example/hooks', events: ['*'], status: 'disabled', disabledReason: 'gone', failingSince: null, lastSuccessAt: null, lastFailureAt: minutesAgo(50) })
    await endpoint({ id: 'we_9_other', url: 'https://other.example/hooks', events: ['*'], status: 'enabled', disabledReason: null, failingSince: null, lastSuccessAt: null, lastFailureAt: null }, other.tenantId)
    const job = (id: string, endpointId: string, status: string) => stack.sql`insert into jobs (id, kind, dedupe_key, payload, status, max_attempts, resource_id, created_at)
      values (${id}, 'webhook.deliver', ${`${paid.id}:${endpointId}`}, ${stack.sql.json({ eventId: paid.id, endpointId })}, ${status}, 1000, ${`webhook_endpoint:${endpointId}`}, ${minutesAgo(10)})`
    await job('job_deliver_erp', 'we_1_erp', 'dead_letter')
    await job('job_deliver_shop', 'we_2_shop', 'completed')
    const attempt = (eventId: string, endpointId: string, jobId: string | null, n: number, statusCode: number | null, error: string | null, latencyMs: number, excerpt: string | null, at: Date) =>
      stack.sql`insert into webhook_attempts (event_id, endpoint_id, tenant_id, order_id, job_id, attempt, status_code, delivered, error, latency_ms, response_excerpt, created_at)
        values (${eventId}, ${endpointId}, ${stack.tenant.tenantId}, ${orderId}, ${jobId}, ${n}, ${statusCode}, ${statusCode !== null && statusCode < 300}, ${error}, ${latencyMs}, ${excerpt}, ${at})`
    await attempt(created.id, 'we_2_shop', null, 1, 200, null, 40, 'ok', minutesAgo(48 * 60))
    await attempt(paid.id, 'we_1_erp', 'job_deliver_erp', 1, null, 'timeout after 10000 ms', 10_000, null, minutesAgo(9))
    await attempt(paid.id, 'we_2_shop', 'job_deliver_shop', 1, 500, null, 120, 'oops', minutesAgo(8))
    await attempt(paid.id, 'we_2_shop', 'job_deliver_shop', 2, 200, null, 80, 'thanks', minutesAgo(7))
    await attempt(paid.id, 'we_1_erp', 'job_deliver_erp', 2, 503, null, 300, 'busy', minutesAgo(5))
  })

  afterAll(async () => {
    await stack?.close()
    await stopAll()
  })

  async function attemptsOf(eventId: string): Promise<AttemptRow[]> {
    return stack.sql<AttemptRow[]>`select id::int as id, event_id as "eventId", endpoint_id as "endpointId", job_id as "jobId", attempt, status_code as "statusCode",
      delivered, error, latency_ms as "latencyMs", response_excerpt as "responseExcerpt", created_at as "createdAt" from webhook_attempts where event_id = ${eventId} order by id`
  }
  const lastAt = (rows: AttemptRow[], endpointId: string) => iso(rows.filter(row => row.endpointId === endpointId).at(-1)!.createdAt)

  it('401 without the ops token, for every route', async () => {
    for (const [method, path] of [['GET', '/api/ops/events'], ['GET', `/api/ops/events/${paid.id}`], ['POST', `/api/ops/events/${paid.id}/resend`], ['GET', '/api/ops/webhook-endpoints']]) {
      const refused = await request(stack.app.url, path!, { method, headers: { authorization: `Bearer ${stack.tenant.secretKey}` } })
      expect(refused.status, path).toBe(401)
    }
  })

  it('lists exactly the order\'s order.created and order.paid, newest first, with their data and deliveries', async () => {
    const paidAttempts = await attemptsOf(paid.id)
    const createdAttempts = await attemptsOf(created.id)
    const common = { tenantId: stack.tenant.tenantId, objectId: orderId, orderId }
    const expected = [
      {
        id: paid.id, sequence: paid.sequence, type: 'order.paid', ...common, data: paidOrder, createdAt: paid.createdAt,
        deliveries: [
          { endpointId: 'we_1_erp', url: 'https://erp.example/hooks', jobStatus: 'dead_letter', jobCount: 1, attemptCount: 2, lastStatusCode: 503, delivered: false, lastAttemptAt: lastAt(paidAttempts, 'we_1_erp') },
          { endpointId: 'we_2_shop', url: 'https://shop.example/hooks', jobStatus: 'completed', jobCount: 1, attemptCount: 2, lastStatusCode: 200, delivered: true, lastAttemptAt: lastAt(paidAttempts, 'we_2_shop') },
        ],
      },
      {
        id: created.id, sequence: created.sequence, type: 'order.created', ...common, data: createdData, createdAt: created.createdAt,
        // Its job is gone (past retention): the attempt is still there.
        deliveries: [{ endpointId: 'we_2_shop', url: 'https://shop.example/hooks', jobStatus: null, jobCount: 0, attemptCount: 1, lastStatusCode: 200, delivered: true, lastAttemptAt: lastAt(createdAttempts, 'we_2_shop') }],
      },
    ]
    expect(paid.sequence).toBeGreaterThan(created.sequence)

    const byTenant = await ops(`/api/ops/events?tenant=${stack.tenant.tenantId}`)
    expect(byTenant.status, byTenant.text).toBe(200)
    expect(byTenant.json).toStrictEqual({ object: 'list', data: expected })
    expect((await ops(`/api/ops/events?orderId=${orderId}`)).json).toStrictEqual({ object: 'list', data: expected })
    expect((await ops(`/api/ops/events?orderId=${orderId}&type=order.created`)).json).toStrictEqual({ object: 'list', data: [expected[1]] })
    expect((await ops(`/api/ops/events?tenant=${stack.tenant.tenantId}&limit=1`)).json).toStrictEqual({ object: 'list', data: [expected[0]] })
    expect((await ops(`/api/ops/events?tenant=${other.tenantId}`)).json).toStrictEqual({ object: 'list', data: [] })

    expectProblem(await ops('/api/ops/events?type=order.shipped'), 'validation-failed')
    expectProblem(await ops('/api/ops/events?limit=0'), 'validation-failed')
  })

  it('one event: its data and, per endpoint, its job and every attempt with status, latency and excerpt', async () => {
    const rows = await attemptsOf(paid.id)
    const attemptsTo = (endpointId: string) => rows.filter(row => row.endpointId === endpointId)
      .map(({ eventId: _event, endpointId: _endpoint, createdAt, ...row }) => ({ ...row, createdAt: iso(createdAt) }))
    const [jobs] = await stack.sql<[{ erp: Date, shop: Date }]>`select
      (select created_at from jobs where id = 'job_deliver_erp') as erp, (select created_at from jobs where id = 'job_deliver_shop') as shop`

    const detail = await ops(`/api/ops/events/${paid.id}`)
    expect(detail.status, detail.text).toBe(200)
    expect(detail.json).toStrictEqual({
      id: paid.id, tenantId: stack.tenant.tenantId, sequence: paid.sequence, type: 'order.paid', objectId: orderId, orderId, data: paidOrder, createdAt: paid.createdAt,
      deliveries: [
        {
          endpointId: 'we_1_erp', url: 'https://erp.example/hooks', jobStatus: 'dead_letter', jobCount: 1, attemptCount: 2, lastStatusCode: 503, delivered: false, lastAttemptAt: lastAt(rows, 'we_1_erp'),
          jobs: [{ id: 'job_deliver_erp', status: 'dead_letter', dedupeKey: `${paid.id}:we_1_erp`, resend: false, createdAt: iso(jobs.erp) }],
          attempts: attemptsTo('we_1_erp'),
        },
        {
          endpointId: 'we_2_shop', url: 'https://shop.example/hooks', jobStatus: 'completed', jobCount: 1, attemptCount: 2, lastStatusCode: 200, delivered: true, lastAttemptAt: lastAt(rows, 'we_2_shop'),
          jobs: [{ id: 'job_deliver_shop', status: 'completed', dedupeKey: `${paid.id}:we_2_shop`, resend: false, createdAt: iso(jobs.shop) }],
          attempts: attemptsTo('we_2_shop'),
        },
      ],
    })
    expect(detail.json.deliveries[0].attempts.map((row: AttemptRow) => [row.attempt, row.statusCode, row.latencyMs, row.error, row.responseExcerpt]))
      .toEqual([[1, null, 10_000, 'timeout after 10000 ms', null], [2, 503, 300, null, 'busy']])

    const missing = await ops('/api/ops/events/evt_missing')
    expectProblem(missing, 'not-found')
    expect(missing.json.detail).toBe('No event "evt_missing". List events with GET /api/ops/events.')
  })

  it('the endpoints with their health over the last 24 hours, newest first, never the secret', async () => {
    const [stored] = await stack.sql<[{ createdAt: Date }]>`select created_at as "createdAt" from webhook_endpoints where id = 'we_1_erp'`
    const timesOf = async (id: string) => {
      const [row] = await stack.sql<[{ failingSince: Date | null, lastSuccessAt: Date | null, lastFailureAt: Date | null }]>`
        select failing_since as "failingSince", last_success_at as "lastSuccessAt", last_failure_at as "lastFailureAt" from webhook_endpoints where id = ${id}`
      return { failingSince: row.failingSince && iso(row.failingSince), lastSuccessAt: row.lastSuccessAt && iso(row.lastSuccessAt), lastFailureAt: row.lastFailureAt && iso(row.lastFailureAt) }
    }
    const mine = { tenantId: stack.tenant.tenantId, description: null, createdAt: iso(stored.createdAt) }
    const answer = await ops(`/api/ops/webhook-endpoints?tenant=${stack.tenant.tenantId}`)
    expect(answer.status, answer.text).toBe(200)
    // Created in one instant: the id breaks the tie, newest (highest) first.
    expect(answer.json).toStrictEqual({
      object: 'list',
      data: [
        { id: 'we_3_gone', url: 'https://gone.example/hooks', events: ['*'], status: 'disabled', disabledReason: 'gone', ...await timesOf('we_3_gone'), ...mine, last24h: { attempts: 0, delivered: 0, successRate: null, p50LatencyMs: null } },
        // The attempt of two days ago is outside the window.
        { id: 'we_2_shop', url: 'https://shop.example/hooks', events: ['*'], status: 'enabled', disabledReason: null, ...await timesOf('we_2_shop'), ...mine, last24h: { attempts: 2, delivered: 1, successRate: 0.5, p50LatencyMs: 80 } },
        { id: 'we_1_erp', url: 'https://erp.example/hooks', events: ['order.paid'], status: 'enabled', disabledReason: null, ...await timesOf('we_1_erp'), ...mine, last24h: { attempts: 2, delivered: 0, successRate: 0, p50LatencyMs: 300 } },
      ],
    })
    expect(answer.text).not.toContain('whsec_')
    const all = await ops('/api/ops/webhook-endpoints')
    expect(all.json.data.map((row: { id: string }) => row.id)).toEqual(['we_9_other', 'we_3_gone', 'we_2_shop', 'we_1_erp'])
    expectProblem(await ops('/api/ops/webhook-endpoints?status=enabled'), 'validation-failed')
  })

  it('resend: one new job per subscribed enabled endpoint, same payload and event id, a fresh dedupe key; kept as an operator action', async () => {
    const deliveryJobs = () => stack.sql<Array<{ id: string, dedupeKey: string, payload: unknown, resourceId: string, requestId: string | null }>>`
      select id, dedupe_key as "dedupeKey", payload, resource_id as "resourceId", request_id as "requestId" from jobs
      where kind = 'webhook.deliver' and payload->>'eventId' = ${paid.id} order by created_at, id`
    const before = await deliveryJobs()
    expect(before.map(job => job.id).sort()).toEqual(['job_deliver_erp', 'job_deliver_shop'])

    // No body: we_1_erp (order.paid) and we_2_shop (*); we_3_gone is disabled, we_9_other another tenant's.
    const resent = await ops(`/api/ops/events/${paid.id}/resend`, { method: 'POST' })
    expect(resent.status, resent.text).toBe(202)
    expect(resent.json).toStrictEqual({
      eventId: paid.id,
      jobs: [{ endpointId: 'we_1_erp', jobId: expect.stringMatching(/^job_/) }, { endpointId: 'we_2_shop', jobId: expect.stringMatching(/^job_/) }],
    })
    const added = (await deliveryJobs()).filter(job => !before.some(old => old.id === job.id))
    expect(added.map(job => job.id).sort()).toEqual(resent.json.jobs.map((job: { jobId: string }) => job.jobId).sort())
    for (const { endpointId, jobId } of resent.json.jobs as Array<{ endpointId: string, jobId: string }>) {
      const job = added.find(row => row.id === jobId)!
      expect(job.payload).toStrictEqual({ eventId: paid.id, endpointId })
      expect(job.dedupeKey).toMatch(new RegExp(`^${paid.id}:${endpointId}:resend:rs_[\\w-]+$`))
      expect([job.resourceId, job.requestId]).toEqual([`webhook_endpoint:${endpointId}`, expect.stringMatching(/^req_/)])
    }
    const [action] = await stack.sql<[{ action: string, tenantId: string, subjectId: string, detail: Record<string, unknown> }]>`
      select action, tenant_id as "tenantId", subject_id as "subjectId", detail from operator_actions where subject_id = ${paid.id}`
    expect(action).toStrictEqual({
      action: 'event.resent', tenantId: stack.tenant.tenantId, subjectId: paid.id,
      detail: { type: 'order.paid', endpointIds: ['we_1_erp', 'we_2_shop'], jobIds: resent.json.jobs.map((job: { jobId: string }) => job.jobId) },
    })
    // The list counts the resend's job beside the first.
    const listed = await ops(`/api/ops/events?orderId=${orderId}&type=order.paid`)
    expect(listed.json.data[0].deliveries.map((row: { endpointId: string, jobCount: number }) => [row.endpointId, row.jobCount])).toEqual([['we_1_erp', 2], ['we_2_shop', 2]])
    const detail = await ops(`/api/ops/events/${paid.id}`)
    expect(detail.json.deliveries.map((row: { jobs: Array<{ resend: boolean }> }) => row.jobs.map(job => job.resend))).toEqual([[false, true], [false, true]])

    // One endpoint named: exactly one more job, to it.
    const one = await ops(`/api/ops/events/${paid.id}/resend`, { method: 'POST', body: { endpointId: 'we_2_shop' } })
    expect(one.status, one.text).toBe(202)
    expect(one.json.jobs.map((job: { endpointId: string }) => job.endpointId)).toEqual(['we_2_shop'])
    expect(await deliveryJobs()).toHaveLength(5)
  })

  it('resend refusals: a disabled or unsubscribed endpoint is 409, another tenant\'s or an unknown one 404, an unknown event 404; nothing enqueued', async () => {
    const count = async () => (await stack.sql<[{ n: number }]>`select count(*)::int as n from jobs where kind = 'webhook.deliver'`)[0].n
    const before = await count()
    const gone = await ops(`/api/ops/events/${paid.id}/resend`, { method: 'POST', body: { endpointId: 'we_3_gone' } })
    expectProblem(gone, 'event-not-resendable')
    expect(gone.json.detail).toBe('Endpoint we_3_gone is disabled (gone): nothing was sent. The tenant enables it or subscribes it, then resend.')
    const unsubscribed = await ops(`/api/ops/events/${created.id}/resend`, { method: 'POST', body: { endpointId: 'we_1_erp' } })
    expectProblem(unsubscribed, 'event-not-resendable')
    expect(unsubscribed.json.detail).toBe('Endpoint we_1_erp is not subscribed to order.created: nothing was sent. The tenant enables it or subscribes it, then resend.')
    const otherTenants = await ops(`/api/ops/events/${paid.id}/resend`, { method: 'POST', body: { endpointId: 'we_9_other' } })
    expectProblem(otherTenants, 'not-found')
    expect(otherTenants.json.detail).toBe(`Tenant ${stack.tenant.tenantId} has no webhook endpoint "we_9_other". List its endpoints with GET /api/ops/webhook-endpoints?tenant=${stack.tenant.tenantId}.`)
    expectProblem(await ops('/api/ops/events/evt_missing/resend', { method: 'POST' }), 'not-found')
    expectProblem(await ops(`/api/ops/events/${paid.id}/resend`, { method: 'POST', body: { endpoint: 'we_2_shop' } }), 'validation-failed')
    expect(await count()).toBe(before)
  })

  it('the order\'s evidence lists its events and their delivery attempts; the event\'s id finds them too', async () => {
    const evidence = async (query: string) => {
      const response = await ops(`/api/ops/evidence?${query}`)
      expect(response.status, response.text).toBe(200)
      return response.json.timeline as Array<{ kind: string, summary: string, ids: Record<string, string> }>
    }
    const byOrder = await evidence(`orderId=${orderId}`)
    expect(byOrder.filter(entry => entry.kind === 'event').map(({ summary, ids }) => ({ summary, ids }))).toEqual([
      { summary: `Event order.created ${created.id} (sequence ${created.sequence}) written for ${orderId} in the change's own transaction; every delivery of it carries webhook-id ${created.id}.`, ids: { eventId: created.id, orderId, tenantId: stack.tenant.tenantId } },
      { summary: `Event order.paid ${paid.id} (sequence ${paid.sequence}) written for ${orderId} in the change's own transaction; every delivery of it carries webhook-id ${paid.id}.`, ids: { eventId: paid.id, orderId, tenantId: stack.tenant.tenantId } },
    ])
    // The first delivery jobs' attempts (and the older event's, whose job is gone); not the resends'.
    const recorded = (entry: { kind: string, ids: Record<string, string> }) => entry.kind === 'webhook_delivery' && ['job_deliver_erp', 'job_deliver_shop', undefined].includes(entry.ids.jobId)
    const deliveries = [
      `Attempt 1 to deliver event ${created.id} to endpoint we_2_shop (https://shop.example/hooks): delivered, answered 200 after 40 ms.`,
      `Attempt 1 to deliver event ${paid.id} to endpoint we_1_erp (https://erp.example/hooks): not delivered, no answer (timeout after 10000 ms) after 10000 ms.`,
      `Attempt 1 to deliver event ${paid.id} to endpoint we_2_shop (https://shop.example/hooks): not delivered, answered 500 after 120 ms.`,
      `Attempt 2 to deliver event ${paid.id} to endpoint we_2_shop (https://shop.example/hooks): delivered, answered 200 after 80 ms.`,
      `Attempt 2 to deliver event ${paid.id} to endpoint we_1_erp (https://erp.example/hooks): not delivered, answered 503 after 300 ms.`,
    ]
    expect(byOrder.filter(recorded).map(entry => entry.summary)).toEqual(deliveries)
    // The resends: the operator's action and the jobs it enqueued, beside the first delivery jobs.
    expect(byOrder.filter(entry => entry.kind === 'operator_action').map(entry => [entry.ids.eventId, entry.summary.startsWith(`Operator action event.resent on ${paid.id}`)])).toEqual([[paid.id, true], [paid.id, true]])
    expect(byOrder.filter(entry => entry.kind === 'job' && entry.ids.endpointId).length).toBe(5)

    const byEvent = await evidence(`eventId=${paid.id}`)
    expect(byEvent.filter(entry => entry.kind === 'event').map(entry => entry.ids.eventId)).toEqual([paid.id])
    expect(byEvent.filter(recorded).map(entry => entry.summary)).toEqual(deliveries.slice(1))
    expect(byEvent.some(entry => entry.kind === 'order')).toBe(false)
  })
})
