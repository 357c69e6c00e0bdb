import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest'
import { newId } from '../../server/db/ids'
import { type AppProcess, fastJobsEnv, startApp, stopAll, testSecrets } from '../support/app'
import { desktopViewport, withChromium, mobileViewport } from '../support/browser'
import { createTenant, request } from '../support/http'
import { jobRow, type JobsFixture, openJobsFixture, seedOrderWithId } from '../support/jobs'
import { newIdempotencyKey, postOrder, type TenantCredentials, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { createTestDatabase, describeWithServices, redisUrl } from '../support/services'
import { deliver, newWebhookId, standardBody, standardDelivery } from '../support/webhooks'

// The operations console (/ops, docs/operations.md#the-operations-console) in real Chromium against
// the built server on Postgres and Redis: the token gate, redriving a real dead letter (checked in
// the database, not only on screen), the evidence of a dropped-then-retried order read as a
// timeline and followed by its order id, at 1400 px: tables inside their panels, outcomes on one
// line, ISO 8601 times, and a dead letter dismissed with a reason; an order's refunds and the
// Refund form (one key per intended refund); what the console shows before its script runs. And the
// store this deployment does not open (the demo checkout is off with DATABASE_URL set): a plain
// page for shoppers.

const opsHeaders = { authorization: `Bearer ${testSecrets.opsToken}` }
/** Git-ignored: screenshots of the console's key states, for people. */
const screenshotDir = fileURLToPath(new URL('../../test-results/ops/', import.meta.url))

interface TimelineEntry { at: string, kind: string, summary: string, ids: Record<string, string | undefined> }
interface EvidenceAnswer { timeline: TimelineEntry[], truncated: boolean }

/** The page's globals these tests read (the tests compile without the DOM types; the callbacks run in the page). */
interface PageGlobals {
  sessionStorage: { getItem: (key: string) => string | null, setItem: (key: string, value: string) => void }
  document: {
    activeElement: { getAttribute: (name: string) => string | null } | null
    createRange: () => { selectNodeContents: (node: unknown) => void, getClientRects: () => ArrayLike<{ top: number }> }
    documentElement: { scrollWidth: number }
    querySelectorAll: (selector: string) => ArrayLike<{ tagName: string, className: string, getBoundingClientRect: () => Box }>
  }
}
interface Box { left: number, right: number, top: number, bottom: number }
interface PageElement { getBoundingClientRect: () => Box, clientWidth: number, scrollWidth: number }

/** The width the console was reported cut off at: its tables must fit there. */
const wideViewport = { width: 1400, height: 900 }
/** How the console writes every time: ISO 8601, UTC, milliseconds. */
const isoShown = (iso: string) => new Date(iso).toISOString().replace('T', ' ')

describeWithServices('ops console in Chromium: token gate, redrive, evidence timeline, layout at 1400 px and dismissal', ['postgres', 'redis'], () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>> | undefined
  let fixture: JobsFixture | undefined
  let app: AppProcess
  let browser: Browser | undefined
  withChromium((launched) => {
    browser = launched
  })
  let tenant: TenantCredentials
  /** The current test's context: closed after each test, so sessionStorage starts empty. */
  let context: BrowserContext | undefined
  let pageErrors: string[] = []

  beforeAll(async () => {
    database = await createTestDatabase('ops_browser')
    app = await startApp({
      databaseUrl: database.url,
      redisUrl,
      label: 'ops-browser',
      // Short job timings, so a job for a missing order dead-letters within the test; mockpay's
      // webhooks (a payment, a refund) within a second.
      env: { ...fastJobsEnv, MOCKPAY_MAX_DELAY_MS: '200' },
    })
    fixture = await openJobsFixture(database.url)
    tenant = await createTenant(app.url, 'ops console')
  })

  afterEach(async () => {
    await context?.close()
    context = undefined
  })

  afterAll(async () => {
    await app?.stop()
    await fixture?.close()
    await database?.drop()
  })

  const sql = () => fixture!.sql

  async function openOps(path = '/ops', viewport = desktopViewport, javaScriptEnabled = true): Promise<Page> {
    context = await browser!.newContext({ baseURL: app.url, viewport, javaScriptEnabled })
    const page = await context.newPage()
    pageErrors = []
    page.on('pageerror', error => pageErrors.push(error.message))
    await page.goto(path)
    return page
  }

  async function signIn(page: Page): Promise<void> {
    await page.getByLabel('Operator token').fill(testSecrets.opsToken)
    await page.getByTestId('token-submit').click()
    await page.getByTestId('console').waitFor()
  }

  async function screenshot(page: Page, name: string, fullPage = false): Promise<void> {
    await mkdir(screenshotDir, { recursive: true })
    await page.screenshot({ path: join(screenshotDir, `${name}.png`), fullPage, animations: 'disabled' })
  }

  /** One panel alone: the console's page is as long as its longest timeline. */
  async function screenshotPanel(page: Page, panel: string, name: string): Promise<void> {
    await mkdir(screenshotDir, { recursive: true })
    await page.getByTestId(`${panel}-panel`).screenshot({ path: join(screenshotDir, `${name}.png`), animations: 'disabled' })
  }

  async function evidence(query: Record<string, string>): Promise<EvidenceAnswer> {
    const response = await request(app.url, `/api/ops/evidence?${new URLSearchParams(query)}`, { headers: opsHeaders })
    expect(response.status, response.text).toBe(200)
    return response.json
  }

  /** The timeline as the page shows it: each entry's kind and timestamp (the `datetime` it renders). */
  async function shownTimeline(page: Page): Promise<Array<{ kind: string | null, at: string | null }>> {
    const entries = page.getByTestId('evidence-entry')
    return Promise.all((await entries.all()).map(async entry => ({
      kind: await entry.getAttribute('data-kind'),
      at: await entry.locator('time').getAttribute('datetime'),
    })))
  }

  /** idempotency_outcomes_total per outcome, summed over its other labels, as the server reports it now. */
  async function outcomeCounts(): Promise<Record<string, number>> {
    const response = await request(app.url, '/api/metrics', { headers: opsHeaders })
    expect(response.status, response.text).toBe(200)
    const counts: Record<string, number> = {}
    for (const [, labels, value] of response.text.matchAll(/^idempotency_outcomes_total\{([^}]*)\} (\S+)$/gm)) {
      const outcome = /outcome="([^"]*)"/.exec(labels!)![1]!
      counts[outcome] = (counts[outcome] ?? 0) + Number(value)
    }
    return counts
  }

  /** The live panel's bars: outcome → the number shown beside its bar. */
  async function shownOutcomeBars(page: Page): Promise<Record<string, number>> {
    const bars = await page.getByTestId('outcome-bars').locator('li').all()
    const shown: Record<string, number> = {}
    for (const bar of bars) shown[(await bar.getAttribute('data-outcome'))!] = Number(await bar.getByTestId('bar-value').textContent())
    return shown
  }

  it('token gate: no token → the form; a wrong token → a visible 401; the right one → the console; a refused stored token → the form again', async () => {
    const page = await openOps()
    await page.getByTestId('token-form').waitFor()
    expect(await page.getByTestId('console').count()).toBe(0)
    // The form takes the focus: the operator types at once.
    expect(await page.evaluate(() => (globalThis as unknown as PageGlobals).document.activeElement?.getAttribute('id'))).toBe('ops-token')
    await screenshot(page, 'token-gate')

    await page.getByLabel('Operator token').fill('not-the-token')
    const [refused] = await Promise.all([
      page.waitForResponse(response => new URL(response.url()).pathname === '/api/ops/jobs'),
      page.getByTestId('token-submit').click(),
    ])
    expect(refused.status()).toBe(401)
    expect(refused.request().headers().authorization).toBe('Bearer not-the-token')
    const error = page.getByTestId('token-error')
    await error.waitFor()
    expect(await error.textContent()).toContain('401 Unauthorized')
    expect(await error.getAttribute('role')).toBe('alert')
    expect(await page.getByLabel('Operator token').getAttribute('aria-invalid')).toBe('true')
    expect(await page.getByTestId('console').count()).toBe(0)
    expect(await page.evaluate(() => (globalThis as unknown as PageGlobals).sessionStorage.getItem('ops:token'))).toBeNull()
    await screenshot(page, 'token-refused')

    // Every console call carries the token as a bearer header.
    const bearers: Array<string | undefined> = []
    page.on('request', (sent) => {
      if (new URL(sent.url()).pathname.startsWith('/api/ops/')) bearers.push(sent.headers().authorization)
    })
    await signIn(page)
    expect(await page.evaluate(() => (globalThis as unknown as PageGlobals).sessionStorage.getItem('ops:token'))).toBe(testSecrets.opsToken)
    await page.getByTestId('jobs-empty').waitFor()
    expect(bearers.length).toBeGreaterThanOrEqual(2)
    expect(new Set(bearers)).toEqual(new Set([`Bearer ${testSecrets.opsToken}`]))
    await screenshot(page, 'console', true)

    // A reload keeps the tab's token.
    await page.reload()
    await page.getByTestId('console').waitFor()

    // A token the server no longer accepts (rotated): the first 401 brings the form back, saying why.
    await page.evaluate(() => (globalThis as unknown as PageGlobals).sessionStorage.setItem('ops:token', 'rotated-away'))
    await page.reload()
    await page.getByTestId('token-form').waitFor()
    expect(await page.getByTestId('token-error').textContent()).toMatch(/refused the operator token \(401 Unauthorized\)/)
    expect(await page.evaluate(() => (globalThis as unknown as PageGlobals).sessionStorage.getItem('ops:token'))).toBeNull()
    expect(pageErrors).toEqual([])
  })

  /** A payment event for an order that does not exist: its webhook.apply job retries, then dead-letters. */
  async function deadLetterJob(): Promise<{ jobId: string, orderId: string }> {
    const orderId = newId('ord')
    const delivered = await deliver(app.url, standardDelivery(newWebhookId(), standardBody('payment.succeeded', { orderId, paymentId: `pay_${orderId}`, amount: 150_000, currency: 'IDR' })))
    expect(delivered.status, delivered.text).toBe(200)
    const [job] = await sql()<Array<{ id: string }>>`select id from jobs where kind = 'webhook.apply' and resource_id = ${`order:${orderId}`}`
    const jobId = job!.id
    await pollUntil(`job ${jobId} is dead_letter`, async () => (await jobRow(sql(), jobId))?.status === 'dead_letter', { timeoutMs: 30_000, intervalMs: 100 })
    return { jobId, orderId }
  }

  it('a dead letter is listed; Redrive queues it again with fresh attempts and the row follows it to completed', async () => {
    const { jobId, orderId } = await deadLetterJob()
    const dead = (await jobRow(sql(), jobId))!
    expect(dead).toMatchObject({ status: 'dead_letter', attempt: 8, maxAttempts: 8 })
    expect(dead.errors).toHaveLength(8)

    const page = await openOps()
    await signIn(page)
    // Dead letters are what the jobs panel lists first.
    expect(await page.getByTestId('jobs-status').inputValue()).toBe('dead_letter')
    const row = page.locator(`[data-testid="job-row"][data-job-id="${jobId}"]`)
    await row.waitFor()
    expect(await page.getByTestId('job-row').count()).toBe(1)
    expect(await row.getAttribute('data-status')).toBe('dead_letter')
    expect((await row.getByTestId('job-attempts').textContent())?.trim()).toBe('8 / 8')
    expect(await row.textContent()).toContain(`order ${orderId} not found`)
    await screenshot(page, 'dead-letter')

    // The order arrives late (seeded straight into the database): the redriven job can now apply.
    await seedOrderWithId(fixture!.db, orderId, 'late@example.com', 'req_ops_browser')
    const [redriven] = await Promise.all([
      page.waitForResponse(response => response.request().method() === 'POST' && new URL(response.url()).pathname === `/api/ops/jobs/${jobId}/retry`),
      row.getByRole('button', { name: `Redrive job ${jobId}` }).click(),
    ])
    expect(redriven.status()).toBe(200)
    const answer = await redriven.json() as { id: string, status: string, attempt: number, errors: unknown[] }
    expect(answer).toMatchObject({ id: jobId, status: 'queued', attempt: 0 })
    expect(answer.errors).toHaveLength(8)
    // Announced (role=status), and followed: the same line then says what the worker made of it.
    await page.getByTestId('jobs-announcement').filter({ hasText: `Job ${jobId} redriven: queued, with 8 fresh attempts.` }).waitFor()

    // The worker takes it at once: one attempt of the fresh set, the old history kept.
    await pollUntil(`job ${jobId} is completed`, async () => (await jobRow(sql(), jobId))?.status === 'completed', { timeoutMs: 20_000, intervalMs: 100 })
    const done = (await jobRow(sql(), jobId))!
    expect(done).toMatchObject({ status: 'completed', attempt: 1, maxAttempts: 8 })
    expect(done.errors).toHaveLength(8)
    const [order] = await sql()<Array<{ status: string }>>`select status from orders where id = ${orderId}`
    expect(order).toEqual({ status: 'paid' })

    // The row followed it without a reload, and no Redrive is offered any more.
    await page.locator(`[data-testid="job-row"][data-job-id="${jobId}"][data-status="completed"]`).waitFor({ timeout: 20_000 })
    expect((await row.getByTestId('job-attempts').textContent())?.trim()).toBe('1 / 8')
    expect((await page.getByTestId('jobs-announcement').textContent())?.trim()).toBe(`Job ${jobId} redriven: queued, with 8 fresh attempts. Now completed.`)
    expect(await row.getByTestId('redrive').count()).toBe(0)
    await screenshot(page, 'redriven')

    // Asked for dead letters again, the list is empty.
    await page.getByTestId('jobs-refresh').click()
    await page.getByTestId('jobs-empty').waitFor()

    // Paid at last, the order's confirmation reaches the dev mailbox, once.
    await pollUntil(`the confirmation of ${orderId} is in the mailbox`, async () =>
      (await sql()`select 1 from mailbox where order_id = ${orderId}`).length > 0, { timeoutMs: 20_000, intervalMs: 100 })
    await page.getByTestId('mailbox-refresh').click()
    const mail = page.getByTestId('mail').filter({ hasText: `Order ${orderId} confirmed` })
    await mail.waitFor()
    expect(await mail.count()).toBe(1)
    expect(await mail.textContent()).toContain('to late@example.com')
    expect(pageErrors).toEqual([])
  })

  it('evidence by key: the dropped first request and its retry, in order; the order id chip searches by order', async () => {
    // The classic incident: the order committed, the client never heard (dropped), it retried.
    const key = newIdempotencyKey()
    const body = validOrderBody()
    await expect(postOrder(app.url, { secretKey: tenant.secretKey, key, body, headers: { 'x-fault': 'drop-after-commit' } })).rejects.toThrow(/got no response/)
    const retry = await postOrder(app.url, { secretKey: tenant.secretKey, key, body })
    expect(retry.status, retry.text).toBe(201)
    expect(retry.headers.get('idempotent-replayed')).toBe('true')
    const orderId: string = retry.json.id
    const scope = `tenant:${tenant.tenantId}`

    // The order's own job (payment.create_intent) adds to the timeline: let it finish first.
    await pollUntil(`the jobs of order ${orderId} completed`, async () => {
      const jobs = await sql()<Array<{ status: string }>>`select status from jobs where resource_id = ${`order:${orderId}`}`
      return jobs.length > 0 && jobs.every(job => job.status === 'completed')
    }, { timeoutMs: 20_000, intervalMs: 100 })
    // The request log is written in batches: wait until the API's timeline holds both requests.
    let byKey: EvidenceAnswer = { timeline: [], truncated: false }
    await pollUntil(`the evidence of key ${key} holds two requests`, async () => {
      byKey = await evidence({ key, scope })
      return byKey.timeline.filter(entry => entry.kind === 'request').length === 2
    }, { timeoutMs: 10_000, intervalMs: 100 })

    const page = await openOps()
    await signIn(page)
    await page.getByLabel('Search by').selectOption('key')
    await page.getByLabel('Value').fill(key)
    await page.getByTestId('evidence-search').click()
    await page.getByTestId('evidence-timeline').waitFor()

    const shown = await shownTimeline(page)
    expect(shown).toEqual(byKey.timeline.map(entry => ({ kind: entry.kind, at: entry.at })))
    const requests = shown.filter(entry => entry.kind === 'request')
    expect(requests).toHaveLength(2)
    // Chronological, oldest first: every entry at or after the one above it.
    const times = shown.map(entry => Date.parse(entry.at!))
    expect(times).toEqual([...times].sort((a, b) => a - b))
    expect(Date.parse(requests[0]!.at!)).toBeLessThanOrEqual(Date.parse(requests[1]!.at!))
    expect(await page.getByTestId('evidence-status').textContent()).toContain(`${shown.length} entries for idempotency key ${key}.`)
    await screenshot(page, 'evidence-by-key', true)

    // Follow the order id: a new search, by order, announced and focused, its link in the URL.
    const orderChip = page.locator(`[data-testid="chip-orderId"][data-value="${orderId}"]`).first()
    await orderChip.click()
    await page.getByTestId('evidence-heading').getByText(`Timeline of order id ${orderId}`).waitFor()
    const byOrder = await evidence({ orderId })
    const shownByOrder = await shownTimeline(page)
    expect(shownByOrder).toEqual(byOrder.timeline.map(entry => ({ kind: entry.kind, at: entry.at })))
    expect(shownByOrder.some(entry => entry.kind === 'order')).toBe(true)
    expect(await page.getByLabel('Search by').inputValue()).toBe('orderId')
    expect(await page.getByLabel('Value').inputValue()).toBe(orderId)
    expect(await page.evaluate(() => (globalThis as unknown as PageGlobals).document.activeElement?.getAttribute('data-testid'))).toBe('evidence-heading')
    expect(new URL(page.url()).searchParams.get('orderId')).toBe(orderId)
    await screenshot(page, 'evidence-by-order', true)
    await page.setViewportSize(mobileViewport)
    await screenshot(page, 'evidence-by-order-mobile', true)
    // On a phone the timeline wraps its long ids and keys: the page does not scroll sideways.
    const sideways = await page.evaluate((width) => {
      const document = (globalThis as unknown as PageGlobals).document
      const wider = Array.from(document.querySelectorAll('body *')).filter(element => element.getBoundingClientRect().right > width + 0.5)
      return { scrollWidth: document.documentElement.scrollWidth, wider: wider.slice(0, 5).map(element => `${element.tagName.toLowerCase()}.${element.className}`) }
    }, mobileViewport.width)
    expect(sideways.scrollWidth, sideways.wider.join(', ')).toBeLessThanOrEqual(mobileViewport.width)

    // The live panel's bars read the same counters as /api/metrics (summed over routes), refreshed every few seconds.
    const expected = await outcomeCounts()
    expect(expected.miss).toBeGreaterThanOrEqual(1)
    expect(expected.replay).toBeGreaterThanOrEqual(1)
    await pollUntil('the live panel shows the current outcome counts', async () => {
      const bars = await shownOutcomeBars(page)
      return bars.miss === expected.miss && bars.replay === expected.replay && bars.conflict === (expected.conflict ?? 0)
    }, { timeoutMs: 10_000, intervalMs: 200 })

    // The records panel lists the key; its key opens the same evidence as the search did.
    await page.setViewportSize(desktopViewport)
    await page.getByTestId('record-row').first().waitFor()
    await page.getByLabel('Key', { exact: true }).fill(key)
    const [filtered] = await Promise.all([
      page.waitForResponse(response => new URL(response.url()).pathname === '/api/ops/idempotency' && new URL(response.url()).searchParams.get('key') === key),
      page.getByTestId('records-refresh').click(),
    ])
    expect(filtered.status()).toBe(200)
    const record = page.locator(`[data-testid="record-row"][data-key="${key}"]`)
    await record.waitFor()
    expect(await page.getByTestId('record-row').count()).toBe(1)
    expect(await record.getAttribute('data-status')).toBe('succeeded')
    await record.getByTestId('chip-key').click()
    await page.getByTestId('evidence-heading').getByText(`Timeline of idempotency key ${key} in ${scope}`).waitFor()
    expect(await shownTimeline(page)).toEqual(byKey.timeline.map(entry => ({ kind: entry.kind, at: entry.at })))
    expect(pageErrors).toEqual([])
  })

  it('at 1400 px: the records table inside its panel, signature_invalid on one line, ISO 8601 times; a dead letter dismissed with a reason', async () => {
    const { jobId, orderId } = await deadLetterJob()
    // A forged delivery: the live panel's webhook bars then include signature_invalid.
    const forged = await deliver(app.url, standardDelivery(newWebhookId(), standardBody('payment.succeeded', { orderId, paymentId: `pay_${orderId}`, amount: 150_000, currency: 'IDR' }), { secret: `whsec_${Buffer.alloc(32, 7).toString('base64')}` }))
    expect(forged.status, forged.text).toBe(401)
    // An order: its record has every column filled (a long key, an order resource, an expiry).
    const placed = await postOrder(app.url, { secretKey: tenant.secretKey, key: newIdempotencyKey(), body: validOrderBody() })
    expect(placed.status, placed.text).toBe(201)

    const page = await openOps('/ops', wideViewport)
    await signIn(page)
    const records = page.getByTestId('records-panel')
    await records.getByTestId('record-row').first().waitFor()

    // Every cell of the last column ends inside the panel (or the table scrolls inside it).
    const fit = await records.evaluate((panel) => {
      const element = panel as unknown as PageElement & { querySelector: (selector: string) => PageElement, querySelectorAll: (selector: string) => ArrayLike<PageElement> }
      const wrap = element.querySelector('.table-wrap')
      return {
        panelRight: element.getBoundingClientRect().right,
        wrapRight: wrap.getBoundingClientRect().right,
        lastCellRights: Array.from(element.querySelectorAll('tr > :last-child')).map(cell => cell.getBoundingClientRect().right),
        scrolls: wrap.scrollWidth > wrap.clientWidth,
      }
    })
    expect(fit.lastCellRights.length).toBeGreaterThanOrEqual(2)
    expect(fit.wrapRight).toBeLessThanOrEqual(fit.panelRight)
    if (!fit.scrolls) for (const right of fit.lastCellRights) expect(right).toBeLessThanOrEqual(fit.wrapRight)
    // At this width it fits without scrolling.
    expect(fit.scrolls).toBe(false)

    // signature_invalid, and the other outcome labels and status badges, each on one line.
    const webhookBars = page.getByTestId('webhook-bars')
    await webhookBars.locator('[data-result="signature_invalid"]').waitFor({ timeout: 10_000 })
    const lineCounts = await page.locator('.bar-label, .badge').evaluateAll(elements => elements.map((element) => {
      const range = (globalThis as unknown as PageGlobals).document.createRange()
      range.selectNodeContents(element)
      const tops = new Set(Array.from(range.getClientRects()).map(rect => Math.round(rect.top)))
      return { text: (element as unknown as { textContent: string }).textContent.trim(), lines: tops.size }
    }))
    expect(lineCounts.map(label => label.text)).toEqual(expect.arrayContaining(['signature_invalid', 'accepted', 'dead letter', 'succeeded']))
    expect(lineCounts.filter(label => label.lines !== 1)).toEqual([])

    // Every time in the listings is ISO 8601 (UTC, ms) — the instant its datetime names.
    const times = await page.locator('[data-testid="jobs-panel"] time, [data-testid="records-panel"] time, [data-testid="mailbox-panel"] time').evaluateAll(elements =>
      elements.map(element => ({ datetime: element.getAttribute('datetime'), text: (element.textContent ?? '').trim() })))
    expect(times.length).toBeGreaterThanOrEqual(3)
    for (const time of times) expect(time.text).toBe(isoShown(time.datetime!))
    await screenshot(page, 'console-1400', true)

    // Dismiss: the form asks for a reason and sends nothing without one.
    const dismissPosts: string[] = []
    page.on('request', (sent) => {
      if (sent.method() === 'POST' && new URL(sent.url()).pathname.endsWith('/dismiss')) dismissPosts.push(sent.postData() ?? '')
    })
    const row = page.locator(`[data-testid="job-row"][data-job-id="${jobId}"]`)
    await row.getByRole('button', { name: `Dismiss job ${jobId}` }).click()
    const form = row.getByTestId('dismiss-form')
    await form.waitFor()
    expect(await page.evaluate(() => (globalThis as unknown as PageGlobals).document.activeElement?.getAttribute('data-testid'))).toBe('dismiss-reason')
    await form.getByTestId('dismiss-reason').fill('   ')
    await form.getByTestId('dismiss-submit').click()
    expect((await form.getByTestId('dismiss-error').textContent())?.trim()).toBe('Enter why this job is dismissed instead of redriven (1–500 characters); it is kept in the audit.')
    expect(await form.getByTestId('dismiss-reason').getAttribute('aria-invalid')).toBe('true')
    expect(dismissPosts).toEqual([])
    await screenshot(page, 'dismiss-form')

    const reason = 'Order never existed at the provider; refunded by hand (ticket OPS-17).'
    await form.getByTestId('dismiss-reason').fill(`  ${reason}  `)
    const [dismissed] = await Promise.all([
      page.waitForResponse(response => response.request().method() === 'POST' && new URL(response.url()).pathname === `/api/ops/jobs/${jobId}/dismiss`),
      form.getByTestId('dismiss-submit').click(),
    ])
    expect(dismissed.status()).toBe(200)
    expect(dismissPosts).toEqual([JSON.stringify({ reason })])
    expect(dismissed.request().headers().authorization).toBe(`Bearer ${testSecrets.opsToken}`)
    const answer = await dismissed.json() as { id: string, status: string, dismissedReason: string, dismissedAt: string }
    expect(answer).toMatchObject({ id: jobId, status: 'dismissed', dismissedReason: reason })

    // The row says so: status dismissed, the reason, who and when; no Redrive or Dismiss any more.
    await page.locator(`[data-testid="job-row"][data-job-id="${jobId}"][data-status="dismissed"]`).waitFor()
    expect((await row.getByTestId('job-status').textContent())?.trim()).toBe('dismissed')
    expect((await row.getByTestId('job-dismissed-reason').textContent())?.trim()).toBe(reason)
    expect((await row.getByTestId('job-dismissal').textContent())?.replace(/\s+/g, ' ').trim()).toBe(`Dismissed by an operator (ops token) at ${isoShown(answer.dismissedAt)}: ${reason}`)
    expect(await row.getByTestId('redrive').count()).toBe(0)
    expect(await row.getByTestId('dismiss').count()).toBe(0)
    expect((await page.getByTestId('jobs-announcement').textContent())?.trim()).toBe(`Job ${jobId} dismissed: it will not run again.`)
    await screenshot(page, 'dismissed')

    // In the database: dismissed with the reason, once, and audited.
    const [stored] = await sql()<Array<{ status: string, reason: string | null }>>`select status, dismissed_reason as reason from jobs where id = ${jobId}`
    expect(stored).toEqual({ status: 'dismissed', reason })
    const actions = await sql()<Array<{ action: string, detail: { reason?: string } }>>`select action, detail from operator_actions where subject_id = ${jobId}`
    expect(actions).toHaveLength(1)
    expect(actions[0]).toMatchObject({ action: 'job.dismissed', detail: { reason } })

    // Listed under its own status.
    await page.getByTestId('jobs-status').selectOption('dismissed')
    await page.locator(`[data-testid="job-row"][data-job-id="${jobId}"][data-status="dismissed"]`).waitFor()
    expect(await page.getByTestId('job-row').count()).toBe(1)
    expect(pageErrors).toEqual([])
  })

  it('before its script runs (JavaScript off): the console\'s heading and a note that it is loading and needs JavaScript, never a blank page', async () => {
    const page = await openOps('/ops', desktopViewport, false)
    const shell = page.getByTestId('console-opening')
    await shell.waitFor()
    expect((await page.locator('h1').textContent())?.trim()).toBe('Operations console')
    expect((await shell.locator('p').first().textContent())?.trim()).toBe('Loading the console… It runs in your browser: if this note stays, turn JavaScript on for this site and reload.')
    await screenshot(page, 'console-before-script')
  })

  it('the demo store is off here: / shows shoppers a plain closed page, no setting names', async () => {
    const page = await openOps('/')
    const closed = page.locator('[data-testid="store-unavailable"][data-reason="closed"]')
    await closed.waitFor()
    expect((await closed.locator('h1').textContent())?.trim()).toBe('The store is closed')
    const text = (await page.locator('body').textContent()) ?? ''
    expect(text).toContain('We are not taking orders here right now. Please come back later.')
    expect(text).not.toMatch(/CHECKOUT_DEMO_ENABLED|secret key/)
    expect(await page.getByTestId('pay').count()).toBe(0)
    await screenshot(page, 'store-closed')
    expect(pageErrors).toEqual([])
  })

  it('an order\'s refunds: opened from its chip in the evidence; Refund sends one key per intended refund, shows a 409\'s and a 400\'s detail, and the refund settles', async () => {
    const tenantAuth = { authorization: `Bearer ${tenant.secretKey}` }
    const placed = await postOrder(app.url, { secretKey: tenant.secretKey, key: newIdempotencyKey(), body: validOrderBody() })
    expect(placed.status, placed.text).toBe(201)
    const orderId: string = placed.json.id
    const amount: number = placed.json.amount
    // Paid through mockpay once the worker created its payment intent.
    let intentId: string | undefined
    await pollUntil(`order ${orderId} has a payment intent`, async () => {
      intentId = (await request(app.url, `/api/orders/${orderId}`, { headers: tenantAuth })).json?.paymentIntentId ?? undefined
      return !!intentId
    }, { timeoutMs: 20_000, intervalMs: 100 })
    const confirmed = await request(app.url, `/api/mockpay/intents/${intentId}/confirm`, { method: 'POST', body: { outcome: 'succeed' } })
    expect(confirmed.status, confirmed.text).toBe(200)
    await pollUntil(`order ${orderId} is paid`, async () => (await request(app.url, `/api/orders/${orderId}`, { headers: tenantAuth })).json?.status === 'paid', { timeoutMs: 20_000, intervalMs: 100 })

    const page = await openOps('/ops', wideViewport)
    await signIn(page)
    await page.getByLabel('Search by').selectOption('orderId')
    await page.getByLabel('Value').fill(orderId)
    await page.getByTestId('evidence-search').click()
    await page.getByTestId('evidence-timeline').waitFor()
    await page.locator(`[data-testid="chip-open-order"][data-value="${orderId}"]`).first().click()
    const heading = page.getByTestId('order-heading')
    await heading.getByText(`Order ${orderId}`).waitFor()
    expect(await page.evaluate(() => (globalThis as unknown as PageGlobals).document.activeElement?.getAttribute('data-testid'))).toBe('order-heading')
    expect((await page.getByTestId('order-status').textContent())?.trim()).toBe('paid')
    expect((await page.getByTestId('refunds-empty').textContent())?.trim()).toBe('No refunds yet.')
    // The amount starts at all that remains.
    expect(await page.getByTestId('refund-amount').inputValue()).toBe(String(amount))

    const posts: Array<{ key: string | undefined, body: unknown, authorization: string | undefined }> = []
    const refundPath = `/api/ops/orders/${orderId}/refunds`
    page.on('request', (sent) => {
      if (sent.method() === 'POST' && new URL(sent.url()).pathname === refundPath) posts.push({ key: sent.headers()['idempotency-key'], body: sent.postDataJSON(), authorization: sent.headers().authorization })
    })
    const refundAnswer = (action: () => Promise<void>) => Promise.all([
      page.waitForResponse(response => response.request().method() === 'POST' && new URL(response.url()).pathname === refundPath),
      action(),
    ]).then(([response]) => response)

    // A part of it, with a reason.
    await page.getByTestId('refund-amount').fill('50000')
    await page.getByTestId('refund-reason').selectOption('requested_by_customer')
    const created = await refundAnswer(() => page.getByTestId('refund-submit').click())
    expect(created.status()).toBe(201)
    const refund = await created.json() as { id: string, amount: number, status: string }
    expect(refund).toMatchObject({ object: 'refund', orderId, amount: 50_000, source: 'api', reason: 'requested_by_customer', idempotency: { key: posts[0]!.key, replayed: false } })
    expect(posts).toEqual([{ key: expect.stringMatching(/^[0-9a-f-]{36}$/), body: { amount: 50_000, reason: 'requested_by_customer' }, authorization: `Bearer ${testSecrets.opsToken}` }])
    await page.getByTestId('refund-outcome').getByText(`Refund ${refund.id} of 50,000 IDR`).waitFor()
    // The provider settles it (mockpay's refund webhook); the panel follows it without a reload.
    await page.locator(`[data-testid="refund-row"][data-refund-id="${refund.id}"][data-status="succeeded"]`).waitFor({ timeout: 20_000 })
    await page.locator('[data-testid="order-status"]', { hasText: 'partially refunded' }).waitFor()
    expect((await page.getByTestId('order-remaining').textContent())?.trim()).toBe(`${(amount - 50_000).toLocaleString('en-US')} IDR`)
    expect(await page.getByTestId('refund-amount').inputValue()).toBe(String(amount - 50_000))
    const cells = await page.locator(`[data-testid="refund-row"][data-refund-id="${refund.id}"] td`).allTextContents()
    expect(cells.map(cell => cell.trim()).slice(0, 5)).toEqual([refund.id, '50,000 IDR', 'succeeded', 'api', 'requested by customer'])
    await screenshotPanel(page, 'order', 'order-refunds')

    // Meanwhile the shop refunds through its own key: what this page offers is more than remains now.
    const elsewhere = await request(app.url, `/api/orders/${orderId}/refunds`, {
      method: 'POST',
      headers: { ...tenantAuth, 'idempotency-key': newIdempotencyKey() },
      body: { amount: 60_000 },
    })
    expect(elsewhere.status, elsewhere.text).toBe(201)
    const refused = await refundAnswer(() => page.getByTestId('refund-submit').click())
    expect(refused.status()).toBe(409)
    const problem = await refused.json() as { type: string, detail: string, remaining: number }
    expect(problem).toMatchObject({ type: '/problems/refund-exceeds-remaining', remaining: amount - 110_000 })
    expect((await page.getByTestId('refund-error').textContent())?.trim()).toBe(`Not refunded: ${problem.detail} (HTTP 409)`)
    // A stored, final answer: that intent ended, the next refund has a key of its own.
    expect(posts[1]!.key).not.toBe(posts[0]!.key)
    await page.getByTestId('order-remaining').getByText(`${(amount - 110_000).toLocaleString('en-US')} IDR`).waitFor()
    await screenshotPanel(page, 'order', 'refund-refused')

    // 0 is refused (400), nothing stored: the corrected refund goes under the same key.
    await page.getByTestId('refund-amount').fill('0')
    const invalid = await refundAnswer(() => page.getByTestId('refund-submit').click())
    expect(invalid.status()).toBe(400)
    const invalidProblem = await invalid.json() as { type: string, detail: string }
    expect(invalidProblem.type).toBe('/problems/validation-failed')
    expect((await page.getByTestId('refund-error').textContent())?.trim()).toBe(`Not refunded: ${invalidProblem.detail} (HTTP 400)`)
    expect((await page.getByTestId('refund-submit').textContent())?.trim()).toBe('Send the refund again')
    await page.getByTestId('refund-amount').fill(String(amount - 110_000))
    const rest = await refundAnswer(() => page.getByTestId('refund-submit').click())
    expect(rest.status()).toBe(201)
    expect(posts.map(post => post.key)).toEqual([posts[0]!.key, posts[1]!.key, posts[2]!.key, posts[2]!.key])
    expect(posts[2]!.key).not.toBe(posts[1]!.key)
    await page.locator('[data-testid="order-status"]', { hasText: /^refunded$/ }).waitFor({ timeout: 20_000 })
    expect(await page.getByTestId('refund-form').count()).toBe(0)

    // In the database: three refunds, all this order's money and no more; the operator's two kept in operator_actions.
    const refunds = await sql()<Array<{ amount: number }>>`select amount::integer as amount from refunds where order_id = ${orderId} order by created_at`
    expect(refunds.map(row => row.amount)).toEqual([50_000, 60_000, amount - 110_000])
    const actions = await sql()<Array<{ action: string }>>`select action from operator_actions where action = 'refund.created' and detail->>'orderId' = ${orderId}`
    expect(actions).toHaveLength(2)
    expect(pageErrors).toEqual([])
  })

  it('inventory: a tenant\'s SKU listed with its counts; opened, its ledger rows and the order holding units, which opens in the order panel', async () => {
    const tenantAuth = { authorization: `Bearer ${tenant.secretKey}` }
    const set = await request(app.url, '/api/inventory/LAMP-1', { method: 'PUT', headers: tenantAuth, body: { onHand: 5 } })
    expect(set.status, set.text).toBe(200)
    const placed = await postOrder(app.url, { secretKey: tenant.secretKey, key: newIdempotencyKey(), body: validOrderBody({ amount: 80_000, items: [{ sku: 'LAMP-1', quantity: 2, unitPrice: 40_000 }] }) })
    expect(placed.status, placed.text).toBe(201)
    const orderId: string = placed.json.id

    const page = await openOps('/ops', wideViewport)
    await signIn(page)
    const panel = page.getByTestId('inventory-panel')
    await panel.getByLabel('Tenant id').fill(tenant.tenantId)
    await page.getByTestId('inventory-refresh').click()
    const row = panel.locator(`[data-testid="inventory-row"][data-sku="LAMP-1"][data-tenant-id="${tenant.tenantId}"]`)
    await row.waitFor()
    expect(await panel.getByTestId('inventory-row').count()).toBe(1)
    expect((await row.locator('th, td').allTextContents()).slice(0, 5).map(cell => cell.trim())).toEqual(['LAMP-1', tenant.tenantId, '5', '2', '3'])

    await row.getByTestId('inventory-open').click()
    await panel.getByTestId('inventory-counts').waitFor()
    expect(await Promise.all(['onHand', 'reserved', 'available'].map(async count => (await panel.getByTestId(`count-${count}`).textContent())?.trim()))).toEqual(['5', '2', '3'])
    expect(await panel.getByTestId('inventory-ledger-check').getAttribute('data-agrees')).toBe('true')
    const movements = await panel.getByTestId('movement').evaluateAll(rows => rows.map(movement =>
      Array.from((movement as unknown as { querySelectorAll: (selector: string) => Array<{ textContent: string | null }> }).querySelectorAll('td'), cell => cell.textContent?.trim() ?? '').slice(1)))
    expect(movements).toEqual([['reserve', '0', '+2', `order ${orderId}`, '—'], ['set', '+5', '0', expect.stringMatching(/^count cnt_/), '—']])
    expect(await panel.getByTestId('holder').getAttribute('data-order-id')).toBe(orderId)
    await screenshotPanel(page, 'inventory', 'inventory-sku')

    await panel.getByTestId('holder-open-order').click()
    await page.getByTestId('order-heading').getByText(`Order ${orderId}`).waitFor()
    expect((await page.getByTestId('order-status').textContent())?.trim()).toBe('pending payment')
    expect(pageErrors).toEqual([])
  })
})

afterAll(async () => {
  await stopAll()
})
