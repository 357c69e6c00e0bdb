import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest'
import { fastJobsEnv, stopAll, testSecrets } from '../support/app'
import { withChromium } from '../support/browser'
import { request } from '../support/http'
import { newIdempotencyKey, type OrdersStack, postOrder, startOrdersStack, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { describeWithServices } from '../support/services'
import { deliver, newWebhookId, standardBody, standardDelivery } from '../support/webhooks'

// The console's Events and Endpoints panels (docs/operations.md#events-and-endpoints) in real
// Chromium against the built server: an order placed and paid by its tenant lists its two events;
// opened, the paid one shows each endpoint's attempts (status, latency, excerpt) beside it, and
// Resend enqueues one job per subscribed endpoint (checked in the database); the endpoints panel
// shows each endpoint's health. Endpoints, jobs and attempts are inserted as the delivery kind writes them;
// the health is read before Resend, whose deliveries (to hosts that do not resolve) fail and change it.

/** Git-ignored: screenshots of the panels, for people (docs/screenshots/ops-events.png and ops-endpoints.png are copies). */
const screenshotDir = fileURLToPath(new URL('../../test-results/ops/', import.meta.url))
const wideViewport = { width: 1400, height: 900 }
const minutesAgo = (minutes: number) => new Date(Date.now() - minutes * 60_000)
const isoShown = (value: Date) => value.toISOString().replace('T', ' ')

describeWithServices('ops console in Chromium: the Events and Endpoints panels', ['postgres', 'redis'], () => {
  let stack: OrdersStack
  let browser: Browser | undefined
  withChromium((launched) => {
    browser = launched
  })
  let context: BrowserContext | undefined
  let pageErrors: string[] = []
  let orderId: string
  let paidEventId: string
  let createdEventId: string
  const failingSince = minutesAgo(30)

  beforeAll(async () => {
    stack = await startOrdersStack('ops_events_browser', fastJobsEnv)
    const tenantGet = (path: string) => request(stack.app.url, path, { headers: { authorization: `Bearer ${stack.tenant.secretKey}` } })
    const body = validOrderBody()
    const placed = await postOrder(stack.app.url, { secretKey: stack.tenant.secretKey, key: newIdempotencyKey(), body })
    expect(placed.status, placed.text).toBe(201)
    orderId = placed.json.id
    await pollUntil(`order ${orderId} has its payment`, async () => (await tenantGet(`/api/orders/${orderId}`)).json?.paymentIntentId !== null, { timeoutMs: 20_000 })
    const paid = standardBody('payment.succeeded', { orderId, paymentId: `pay_${orderId}`, amount: body.amount, currency: body.currency })
    expect((await deliver(stack.app.url, standardDelivery(newWebhookId(), paid))).status).toBe(200)
    await pollUntil(`order ${orderId} has its order.paid event`, async () =>
      (await stack.sql`select 1 from events where order_id = ${orderId} and type = 'order.paid'`).length === 1, { timeoutMs: 20_000 })
    const events = await stack.sql<Array<{ id: string, type: string }>>`select id, type from events where order_id = ${orderId} order by sequence`
    expect(events.map(event => event.type)).toEqual(['order.created', 'order.paid'])
    createdEventId = events[0]!.id
    paidEventId = events[1]!.id

    const tenantId = stack.tenant.tenantId
    await stack.sql`insert into webhook_endpoints (id, tenant_id, url, events, status, secret, failing_since, last_failure_at) values
      ('we_1_erp', ${tenantId}, 'https://erp.example/hooks', ${['order.paid']}, 'enabled', 'whsec_dGVzdA==', ${failingSince}, ${minutesAgo(5)})`
    await stack.sql`insert into webhook_endpoints (id, tenant_id, url, events, status, secret, last_success_at) values
      ('we_2_shop', ${tenantId}, 'https://shop.example/hooks', ${['*']}, 'enabled', 'whsec_dGVzdA==', ${minutesAgo(7)})`
    for (const [jobId, endpointId, status] of [['job_deliver_erp', 'we_1_erp', 'dead_letter'], ['job_deliver_shop', 'we_2_shop', 'completed']] as const) {
      await stack.sql`insert into jobs (id, kind, dedupe_key, payload, status, max_attempts, resource_id) values
        (${jobId}, 'webhook.deliver', ${`${paidEventId}:${endpointId}`}, ${stack.sql.json({ eventId: paidEventId, endpointId })}, ${status}, 1000, ${`webhook_endpoint:${endpointId}`})`
    }
    const attempts: Array<[string, string, number, number | null, string | null, number, string | null, Date]> = [
      ['we_1_erp', 'job_deliver_erp', 1, null, 'timeout after 10000 ms', 10_000, null, minutesAgo(9)],
      ['we_2_shop', 'job_deliver_shop', 1, 500, null, 120, 'oops', minutesAgo(8)],
      ['we_2_shop', 'job_deliver_shop', 2, 200, null, 80, 'thanks', minutesAgo(7)],
      ['we_1_erp', 'job_deliver_erp', 2, 503, null, 300, 'busy', minutesAgo(5)],
    ]
    for (const [endpointId, jobId, attempt, statusCode, error, latencyMs, excerpt, at] of attempts) {
      await stack.sql`insert into webhook_attempts (event_id, endpoint_id, tenant_id, order_id, job_id, attempt, status_code, delivered, error, latency_ms, response_excerpt, created_at)
        values (${paidEventId}, ${endpointId}, ${tenantId}, ${orderId}, ${jobId}, ${attempt}, ${statusCode}, ${statusCode === 200}, ${error}, ${latencyMs}, ${excerpt}, ${at})`
    }
  })

  afterEach(async () => {
    await context?.close()
    context = undefined
  })

  afterAll(async () => {
    await stack?.close()
    await stopAll()
  })

  async function openConsole(): Promise<Page> {
    context = await browser!.newContext({ baseURL: stack.app.url, viewport: wideViewport })
    const page = await context.newPage()
    pageErrors = []
    page.on('pageerror', error => pageErrors.push(error.message))
    await page.goto('/ops')
    await page.getByLabel('Operator token').fill(testSecrets.opsToken)
    await page.getByTestId('token-submit').click()
    await page.getByTestId('console').waitFor()
    return page
  }

  async function screenshotPanel(page: Page, panel: string, name: string): Promise<void> {
    await mkdir(screenshotDir, { recursive: true })
    await page.getByTestId(`${panel}-panel`).screenshot({ path: join(screenshotDir, `${name}.png`), animations: 'disabled' })
  }

  const texts = async (rows: ReturnType<Page['getByTestId']>, cells: string) =>
    Promise.all((await rows.all()).map(async row => (await row.locator(cells).allTextContents()).map(text => text.trim().replace(/\s+/g, ' '))))

  it('the endpoints panel: each endpoint\'s status, failing since, success rate and median latency of the last 24 hours, last success and failure', async () => {
    const page = await openConsole()
    const panel = page.getByTestId('endpoints-panel')
    await panel.getByLabel('Tenant id').fill(stack.tenant.tenantId)
    await page.getByTestId('endpoints-refresh').click()
    await panel.locator('[data-testid="endpoint-row"][data-endpoint-id="we_1_erp"]').waitFor()
    const [erpTimes] = await stack.sql<[{ lastFailureAt: Date }]>`select last_failure_at as "lastFailureAt" from webhook_endpoints where id = 'we_1_erp'`
    const [shopTimes] = await stack.sql<[{ lastSuccessAt: Date }]>`select last_success_at as "lastSuccessAt" from webhook_endpoints where id = 'we_2_shop'`
    const shown = async (id: string) => {
      const row = panel.locator(`[data-testid="endpoint-row"][data-endpoint-id="${id}"]`)
      const text = async (testId: string) => (await row.getByTestId(testId).count()) ? (await row.getByTestId(testId).textContent())?.trim() : undefined
      return Promise.all(['endpoint-status', 'endpoint-failing-since', 'endpoint-success-rate', 'endpoint-p50', 'endpoint-last-success', 'endpoint-last-failure'].map(text))
    }
    expect(await shown('we_2_shop')).toEqual(['enabled', undefined, '1 of 2 (50.0%)', '80 ms', isoShown(shopTimes.lastSuccessAt), '—'])
    expect(await shown('we_1_erp')).toEqual(['enabled', isoShown(failingSince), '0 of 2 (0.0%)', '300 ms', '—', isoShown(erpTimes.lastFailureAt)])
    // Newest first: we_2_shop was added last.
    expect(await panel.getByTestId('endpoint-row').evaluateAll(list => list.map(row => (row as unknown as { dataset: Record<string, string> }).dataset.endpointId))).toEqual(['we_2_shop', 'we_1_erp'])
    // At 1400 px the table fits its panel: nothing scrolls sideways.
    expect(await panel.locator('.table-wrap').evaluate(wrap => (wrap as unknown as { scrollWidth: number, clientWidth: number }).scrollWidth <= (wrap as unknown as { clientWidth: number }).clientWidth)).toBe(true)
    await screenshotPanel(page, 'endpoints', 'endpoints-health')
    expect(pageErrors).toEqual([])
  })

  it('the order\'s events with their delivery badges; opened, each endpoint\'s attempts beside it; Resend enqueues one job per subscribed endpoint', async () => {
    const page = await openConsole()
    const panel = page.getByTestId('events-panel')
    await panel.getByLabel('Order id').fill(orderId)
    await page.getByTestId('events-refresh').click()
    await panel.locator(`[data-testid="event-row"][data-event-id="${paidEventId}"]`).waitFor()
    const rows = panel.getByTestId('event-row')
    expect(await rows.evaluateAll(list => list.map(row => (row as unknown as { dataset: Record<string, string> }).dataset.type))).toEqual(['order.paid', 'order.created'])
    const paidRow = rows.first()
    expect(await paidRow.getByTestId('event-delivery').locator('.badge').allTextContents()).toEqual(['dead letter · 503', 'delivered'])
    expect((await rows.nth(1).getByTestId('event-no-deliveries').textContent())?.trim()).toBe('not sent: no endpoint was subscribed')
    expect(await paidRow.locator('td code').first().textContent()).toBe(stack.tenant.tenantId)

    await paidRow.getByTestId('event-open').click()
    const detail = page.getByTestId('event-detail')
    await detail.getByTestId('event-endpoint').first().waitFor()
    expect(await detail.getAttribute('data-event-id')).toBe(paidEventId)
    const erp = detail.locator('[data-testid="event-endpoint"][data-endpoint-id="we_1_erp"]')
    const shop = detail.locator('[data-testid="event-endpoint"][data-endpoint-id="we_2_shop"]')
    expect((await erp.getByTestId('event-endpoint-status').textContent())?.trim()).toBe('dead letter · 503')
    expect((await shop.getByTestId('event-endpoint-status').textContent())?.trim()).toBe('delivered')
    // Attempt, time (skipped), status, latency, answer.
    const shown = async (section: typeof erp) => (await texts(section.getByTestId('event-attempt'), 'td')).map(([attempt, , status, latency, answer]) => [attempt, status, latency, answer])
    expect(await shown(erp)).toEqual([['1', 'no answer', '10000 ms', 'timeout after 10000 ms'], ['2', '503', '300 ms', 'busy']])
    expect(await shown(shop)).toEqual([['1', '500', '120 ms', 'oops'], ['2', '200', '80 ms', 'thanks']])
    expect(await panel.locator('.table-wrap').evaluateAll(wraps => wraps.map(wrap => (wrap as unknown as { scrollWidth: number, clientWidth: number }).scrollWidth <= (wrap as unknown as { clientWidth: number }).clientWidth))).toEqual([true, true, true])
    await screenshotPanel(page, 'events', 'events-attempts')

    await detail.getByTestId('event-resend').click()
    await expect.poll(async () => (await page.getByTestId('events-announcement').textContent())?.trim(), { timeout: 10_000 })
      .toBe(`Event ${paidEventId} resent to 2 endpoints (we_1_erp, we_2_shop), under the same webhook-id.`)
    const resent = await stack.sql<Array<{ endpointId: string }>>`select payload->>'endpointId' as "endpointId" from jobs
      where kind = 'webhook.deliver' and payload->>'eventId' = ${paidEventId} and dedupe_key like '%:resend:%' order by payload->>'endpointId'`
    expect(resent.map(job => job.endpointId)).toEqual(['we_1_erp', 'we_2_shop'])
    expect(createdEventId).toMatch(/^evt_/)
    expect(pageErrors).toEqual([])
  })
})
