import postgres from 'postgres'
import type { Browser, Page } from 'playwright-core'
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest'
import { type AppProcess, fastJobsEnv, startApp, stopAll, testSecrets } from '../support/app'
import { type CheckoutPage, desktopViewport, withChromium, mobileViewport, openCheckout, screenshot, screenshotAtWidths, storedCart, storedIntent } from '../support/browser'
import { request } from '../support/http'
import { newIdempotencyKey } from '../support/orders'
import { pollUntil } from '../support/poll'
import { createTestDatabase, describeWithServices, redisUrl } from '../support/services'

// The checkout page (docs/checkout-page.md) in real Chromium against the built server on Postgres
// and Redis: whatever the shopper or the network does — double clicks, a connection dropped after
// the commit, a reload while the order is in flight, an invalid email fixed afterwards — one intent
// keeps one Idempotency-Key and ends in exactly one order, checked in the database, not only on
// screen.

const DEMO_TENANT = 'ten_demo_store'
const DEMO_SCOPE = `tenant:${DEMO_TENANT}`
const EMAIL = 'shopper@example.com'
/** 2 × Organic cotton tee (149 000) + 1 × Enamel camp mug (89 000). */
const CART_TOTAL = 387_000
const REPLAYED_NOTE = 'Your first attempt already went through — no second order was created.'
/** The placed cart's rows in the order's items table: name, quantity × price, total (Intl puts a no-break space after IDR). */
const CART_ROWS = [
  ['Organic cotton tee', '2 × IDR\u00A0149,000', 'IDR\u00A0298,000'],
  ['Enamel camp mug', '1 × IDR\u00A089,000', 'IDR\u00A089,000'],
]
/** An empty cart's words; \s also matches the no-break space. */
const EMPTY_CART = /IDR\s0\b|Your cart is empty/

/**
 * Records the order summary's text after every DOM change from the first parsed byte on, so a
 * state shown for a moment is seen too. A string: it runs in the page (and again after a reload).
 */
const recordSummaryStates = `(() => {
  const states = window.summaryStates = []
  const record = () => {
    const text = (document.querySelector('aside')?.textContent ?? '').replace(/\\s+/g, ' ').trim()
    if (states[states.length - 1] !== text) states.push(text)
  }
  new MutationObserver(record).observe(document, { subtree: true, childList: true, characterData: true, attributes: true })
})()`

/** A phone's width: the page must not scroll sideways, and Pay must stay on screen. */
const phoneViewport = { width: 375, height: 812 }

/** The page's globals these tests read (the tests compile without the DOM types; the callbacks run in the page). */
interface PageGlobals {
  document: {
    documentElement: { scrollWidth: number }
    createRange: () => { selectNodeContents: (node: unknown) => void, getClientRects: () => ArrayLike<unknown> }
  }
  scrollTo: (x: number, y: number) => void
  getComputedStyle: (element: unknown) => { color: string, backgroundColor: string, opacity: string }
}

/** WCAG 2 contrast ratio of two opaque `rgb(r, g, b)` colours as getComputedStyle writes them. */
function contrastRatio(foreground: string, background: string): number {
  const luminance = (color: string) => {
    const [r, g, b] = (color.match(/\d+(\.\d+)?/g) ?? []).slice(0, 3).map(Number).map((channel) => {
      const value = channel / 255
      return value <= 0.03928 ? value / 12.92 : ((value + 0.055) / 1.055) ** 2.4
    })
    return 0.2126 * r! + 0.7152 * g! + 0.0722 * b!
  }
  const [light, dark] = [luminance(foreground), luminance(background)].sort((a, b) => b - a)
  return (light! + 0.05) / (dark! + 0.05)
}

interface OrderRow { id: string, idempotencyKey: string | null, status: string, amount: number }
interface RecordRow { key: string, status: string, responseStatus: number | null, resourceType: string | null, resourceId: string | null, attempts: number }

describeWithServices('checkout page in Chromium: one order per checkout intent', ['postgres', 'redis'], () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>> | undefined
  let app: AppProcess
  let sql: postgres.Sql | undefined
  let browser: Browser | undefined
  withChromium((launched) => {
    browser = launched
  })
  /** The current test's context: closed after each test, so the next starts with no cookie or storage. */
  let shop: CheckoutPage | undefined

  beforeAll(async () => {
    database = await createTestDatabase('checkout_browser')
    app = await startApp({
      databaseUrl: database.url,
      redisUrl,
      label: 'checkout-browser',
      // With DATABASE_URL set the demo store and mockpay are off by default; short job timings so
      // the payment intent, deliveries and emails happen within a test.
      env: {
        CHECKOUT_DEMO_ENABLED: 'true',
        MOCKPAY_ENABLED: 'true',
        ...fastJobsEnv,
        MOCKPAY_MAX_DELAY_MS: '200',
      },
    })
    sql = postgres(database.url, { max: 2, onnotice: () => {} })
  })

  afterEach(async () => {
    await shop?.context.close()
    shop = undefined
  })

  afterAll(async () => {
    await app?.stop()
    await sql?.end()
    await database?.drop()
  })

  const db = () => sql!

  async function open(): Promise<CheckoutPage> {
    shop = await openCheckout(browser!, app.url)
    return shop
  }

  /** Fills the cart (2 tees, 1 mug) and the email; returns the cart id the page will order. */
  async function fillCart(page: Page, email = EMAIL): Promise<string> {
    await page.getByTestId('add-TEE-ORGANIC').click()
    await page.getByTestId('add-TEE-ORGANIC').click()
    await page.getByTestId('add-MUG-ENAMEL').click()
    await page.getByLabel('Email for the receipt').fill(email)
    expect(await page.getByTestId('total').textContent()).toMatch(/387,000/)
    await page.getByTestId('pay').waitFor()
    expect(await page.getByTestId('pay').isEnabled()).toBe(true)
    const cart = await storedCart(page)
    expect(cart).toMatchObject({ quantities: { 'TEE-ORGANIC': 2, 'MUG-ENAMEL': 1 }, email })
    return cart.cartId
  }

  /** The order shown on the page once the result replaced the form. */
  async function shownOrderId(page: Page, timeoutMs = 20_000): Promise<string> {
    const shown = page.getByTestId('order-id')
    await shown.waitFor({ timeout: timeoutMs })
    const orderId = (await shown.textContent())?.trim() ?? ''
    expect(orderId).toMatch(/^ord_/)
    return orderId
  }

  function ordersOfCart(cartId: string) {
    return db()<OrderRow[]>`
      select id, idempotency_key as "idempotencyKey", status, amount::integer as amount from orders
      where tenant_id = ${DEMO_TENANT} and cart_id = ${cartId}`
  }

  function recordsOfKey(key: string) {
    return db()<RecordRow[]>`
      select key, status, response_status as "responseStatus", resource_type as "resourceType", resource_id as "resourceId", attempts
      from idempotency_records where scope = ${DEMO_SCOPE} and key = ${key}`
  }

  async function recordCount(): Promise<number> {
    const [row] = await db()<Array<{ n: number }>>`select count(*)::int as n from idempotency_records where scope = ${DEMO_SCOPE}`
    return row!.n
  }

  /** The request_log rows of a key once `expected` of them were written (they are flushed in 50 ms batches). */
  async function requestLogOf(key: string, expected: number) {
    let rows: Array<{ outcome: string | null, status: number }> = []
    await pollUntil(`${expected} request_log rows for key ${key}`, async () => {
      rows = await db()<Array<{ outcome: string | null, status: number }>>`
        select outcome, status from request_log where scope = ${DEMO_SCOPE} and idempotency_key = ${key} order by created_at, id`
      return rows.length >= expected
    }, { timeoutMs: 10_000, intervalMs: 50 })
    return rows
  }

  /** One order for the cart under `key`, one succeeded record for the key whose resource is that order. */
  async function expectOneOrder(cartId: string, key: string, orderId: string): Promise<void> {
    expect(await ordersOfCart(cartId)).toEqual([{ id: orderId, idempotencyKey: key, status: expect.any(String), amount: CART_TOTAL }])
    expect(await recordsOfKey(key)).toEqual([{ key, status: 'succeeded', responseStatus: 201, resourceType: 'order', resourceId: orderId, attempts: 1 }])
  }

  /** The rows of the shown order's items table: each item's name, quantity × price and total. */
  function itemRows(page: Page): Promise<string[][]> {
    return page.getByTestId('order-items').locator('tbody tr').evaluateAll(rows => rows.map(row =>
      Array.from((row as unknown as { querySelectorAll: (selector: string) => Array<{ textContent: string | null }> }).querySelectorAll('[data-testid^="item-"]'), cell => cell.textContent?.trim() ?? '')))
  }

  /** Holds the page's reads of the order (GET /api/orders/:id) until released: what it shows cannot move meanwhile. */
  async function holdOrderReads(page: Page, orderId: string): Promise<() => Promise<void>> {
    let release!: () => void
    const held = new Promise<void>((resolve) => {
      release = resolve
    })
    const matches = (url: URL) => url.pathname === `/api/orders/${orderId}`
    /** Reads let through after the release: unrouting before they are continued would hand them on twice. */
    const continued: Array<Promise<void>> = []
    const handler = (route: Parameters<Parameters<Page['route']>[1]>[0]) => {
      const passed = held.then(() => route.continue())
      continued.push(passed)
      return passed
    }
    await page.route(matches, handler)
    return async () => {
      release()
      await Promise.all(continued)
      await page.unroute(matches, handler)
    }
  }

  /** The order as the page's own session reads it through the API. */
  async function orderThroughApi(page: Page, orderId: string) {
    const response = await page.request.get(`/api/orders/${orderId}`)
    expect(response.status()).toBe(200)
    return response.json()
  }

  it('double-click on Pay: one POST, one order, one idempotency record; the page shows that order', async () => {
    const { page, orderPosts, pageFetches, pageErrors } = await open()
    const cartId = await fillCart(page)
    await screenshot(page, 'cart-filled')
    await page.setViewportSize(mobileViewport)
    await screenshot(page, 'cart-filled-mobile', { fullPage: true })
    await page.setViewportSize(desktopViewport)
    const recordsBefore = await recordCount()

    await page.getByTestId('pay').dblclick()
    const orderId = await shownOrderId(page)

    expect(pageFetches).toHaveLength(1)
    expect(orderPosts).toHaveLength(1)
    const key = orderPosts[0]!.idempotencyKey!
    expect(orderPosts[0]).toEqual({
      idempotencyKey: expect.stringMatching(/^[\x21-\x7E]{1,255}$/),
      fault: undefined,
      prefer: 'wait=5',
      body: { cartId, currency: 'IDR', amount: CART_TOTAL, paymentMethod: 'card', items: [{ sku: 'TEE-ORGANIC', quantity: 2, unitPrice: 149_000 }, { sku: 'MUG-ENAMEL', quantity: 1, unitPrice: 89_000 }], customer: { email: EMAIL } },
    })
    await expectOneOrder(cartId, key, orderId)
    expect(await recordCount()).toBe(recordsBefore + 1)
    expect(await page.getByTestId('result-heading').textContent()).toMatch(/Order placed/)
    expect(await page.getByTestId('replayed-note').count()).toBe(0)
    expect(await orderThroughApi(page, orderId)).toMatchObject({ id: orderId, cartId, amount: CART_TOTAL, status: 'pending_payment', customer: { email: EMAIL } })
    // The intent ended with the order: its key is gone and the next purchase is a new cart.
    expect(await storedIntent(page, cartId)).toBeUndefined()
    expect((await storedCart(page)).cartId).not.toBe(cartId)
    // One column (a phone): the order comes first, above the shop it closed.
    await page.setViewportSize(mobileViewport)
    const heading = await page.getByTestId('result-heading').boundingBox()
    const shop = await page.locator('#catalogue-heading').boundingBox()
    expect(heading!.y).toBeLessThan(shop!.y)
    await screenshot(page, 'order-placed-mobile', { fullPage: true })
    await page.setViewportSize(desktopViewport)
    expect(pageErrors).toEqual([])
  })

  it('a burst of five clicks in one task (before the button can disable): one POST, one order', async () => {
    const { page, orderPosts, pageFetches, pageErrors } = await open()
    const cartId = await fillCart(page)
    const recordsBefore = await recordCount()

    // Synchronous clicks land before Vue re-renders the button as disabled: the composable must hold.
    await page.getByTestId('pay').evaluate((button) => {
      for (let click = 0; click < 5; click++) (button as unknown as { click: () => void }).click()
    })
    const orderId = await shownOrderId(page)

    expect(pageFetches).toHaveLength(1)
    expect(orderPosts).toHaveLength(1)
    await expectOneOrder(cartId, orderPosts[0]!.idempotencyKey!, orderId)
    expect(await recordCount()).toBe(recordsBefore + 1)
    expect(pageErrors).toEqual([])
  })

  it('connection dropped after the commit: the same key is sent again, the page shows the replay; one order', async () => {
    const { page, orderPosts, pageFetches, pageErrors } = await open()
    const cartId = await fillCart(page)
    await page.getByTestId('fault-drop').check()

    await page.getByTestId('pay').click()
    const orderId = await shownOrderId(page)
    const note = page.getByTestId('replayed-note')
    await note.waitFor()
    expect((await note.textContent())?.trim()).toBe(REPLAYED_NOTE)
    await screenshot(page, 'replayed-result')

    const key = pageFetches[0]!.idempotencyKey!
    expect(pageFetches[0]!.fault).toBe('drop-after-commit')
    expect(orderPosts.map(post => post.idempotencyKey)).toEqual(orderPosts.map(() => key))
    // The server heard the key twice: the first request committed and was never answered (499),
    // the second was a replay. Who sent it again depends on the connection: Chromium itself resends
    // a request whose reused keep-alive connection closed without an answer (the page never sees
    // the drop); on a fresh connection the page's client retries (next test).
    expect(await requestLogOf(key, 2)).toEqual([{ outcome: 'miss', status: 499 }, { outcome: 'replay', status: 201 }])
    expect(pageFetches.length).toBeLessThanOrEqual(2)
    expect(pageFetches.slice(1)).toEqual(pageFetches.slice(1).map(() => ({ idempotencyKey: key, fault: null })))
    await expectOneOrder(cartId, key, orderId)
    expect(pageErrors).toEqual([])
  })

  it('the drop reaching the page: it shows the retry and sends the same key again; replayed, one order', async () => {
    const { page, pageFetches, pageErrors } = await open()
    const cartId = await fillCart(page)
    await page.getByTestId('fault-drop').check()

    // The first attempt is sent from the test process on its own connection, which Chromium cannot
    // resend, and its drop is handed to the page as a reset; the retry is held until the page shows it.
    let firstAttempt: 'dropped' | number | undefined
    let releaseRetry!: () => void
    const retryHeld = new Promise<void>((resolve) => {
      releaseRetry = resolve
    })
    await page.route(url => url.pathname === '/api/orders', async (route) => {
      if (route.request().headers()['x-fault'] === 'drop-after-commit') {
        firstAttempt = await route.fetch().then(response => response.status(), () => 'dropped' as const)
        return route.abort('connectionreset')
      }
      await retryHeld
      return route.continue()
    })

    await page.getByTestId('pay').click()
    await page.getByTestId('request-status')
      .getByText('Connection trouble (network error). Trying again with the same request — attempt 2…')
      .waitFor()
    await screenshot(page, 'retrying')
    expect(firstAttempt).toBe('dropped')
    releaseRetry()
    const orderId = await shownOrderId(page)
    await page.getByTestId('replayed-note').waitFor()

    expect(pageFetches).toHaveLength(2)
    const key = pageFetches[0]!.idempotencyKey!
    expect(pageFetches).toEqual([{ idempotencyKey: key, fault: 'drop-after-commit' }, { idempotencyKey: key, fault: null }])
    expect(await requestLogOf(key, 2)).toEqual([{ outcome: 'miss', status: 499 }, { outcome: 'replay', status: 201 }])
    await expectOneOrder(cartId, key, orderId)
    expect(pageErrors).toEqual([])
  })

  it('reload while a slow Pay is in flight: the page resumes the stored intent with the same key; one order', async () => {
    const { page, pageFetches, pageErrors } = await open()
    const cartId = await fillCart(page)
    await page.getByTestId('fault-delay').check()

    await Promise.all([page.waitForRequest(sent => sent.method() === 'POST' && sent.url().endsWith('/api/orders')), page.getByTestId('pay').click()])
    await page.getByTestId('request-status').getByText('Placing your order…').waitFor()
    await screenshot(page, 'placing-order')
    const intent = await storedIntent(page, cartId)
    expect(intent?.key).toBe(pageFetches[0]!.idempotencyKey)
    const key = intent!.key

    // The server holds the first attempt 4 s before its commit; the page goes away meanwhile.
    await page.reload()
    const orderId = await shownOrderId(page)

    // The fetch log outlives the reload: one attempt before it, the resumed one after, one key.
    expect(pageFetches).toEqual([{ idempotencyKey: key, fault: 'delay-before-commit=4000' }, { idempotencyKey: key, fault: null }])
    await expectOneOrder(cartId, key, orderId)
    // The resumed attempt waited (Prefer: wait) for the first one's commit and replayed it.
    await page.getByTestId('replayed-note').waitFor()
    // Both attempts reached the server under the key: the first one's client went away (499).
    // Its row is written once its handler finished, so it says what that request did: it executed.
    const log = await requestLogOf(key, 2)
    expect(log.sort((a, b) => b.status - a.status)).toEqual([{ outcome: 'miss', status: 499 }, { outcome: 'replay', status: 201 }])
    expect(await storedIntent(page, cartId)).toBeUndefined()
    expect(pageErrors).toEqual([])
  })

  it('reload while the order awaits payment: "Resuming your order…" until it is read, never an empty cart or IDR 0; then the order and its items', async () => {
    const { page, pageErrors } = await open()
    await fillCart(page)
    await page.getByTestId('pay').click()
    const orderId = await shownOrderId(page)
    await page.addInitScript(recordSummaryStates)
    const releaseOrderReads = await holdOrderReads(page, orderId)

    await page.reload()
    const opening = page.locator('[data-testid="summary-opening"][data-opening="order"]')
    await opening.waitFor()
    expect((await opening.locator('p').textContent())?.trim()).toBe('Resuming your order…')
    expect(await page.getByTestId('pay').count()).toBe(0)
    await screenshot(page, 'resuming-order')
    await releaseOrderReads()

    expect(await shownOrderId(page)).toBe(orderId)
    expect(await itemRows(page)).toEqual(CART_ROWS)
    const states = await page.evaluate(() => (globalThis as unknown as { summaryStates: string[] }).summaryStates)
    // Opening (server-rendered), resuming, then the order: no empty cart at any DOM state in between.
    expect(states.filter(state => EMPTY_CART.test(state))).toEqual([])
    expect(states).toContain('Your order Opening your cart…')
    expect(states).toContain('Your order Resuming your order…')
    expect(states.at(-1)).toContain(orderId)
    expect(pageErrors).toEqual([])
  })

  it('pay through mockpay: the badge turns paid, then refunded, without a reload; one confirmation email', async () => {
    const { page, pageErrors } = await open()
    await fillCart(page)
    await page.getByTestId('pay').click()
    const orderId = await shownOrderId(page)
    expect(await page.getByTestId('order-status').getAttribute('data-status')).toBe('pending_payment')
    expect(await itemRows(page)).toEqual(CART_ROWS)
    expect((await page.getByTestId('order-total').textContent())?.trim()).toBe('IDR\u00A0387,000')
    // A marker on the document: a reload would lose it.
    await page.evaluate(() => {
      (globalThis as unknown as { sameDocument: boolean }).sameDocument = true
    })

    // The provider's buttons appear once the worker created the payment intent.
    await page.locator('[data-testid="mockpay-pay"]:enabled').waitFor({ timeout: 20_000 })
    await screenshotAtWidths(page, 'checkout-order-items')

    // With the order's reads held, the page cannot yet learn that the webhook moved it: Approve stays busy.
    const releaseOrderReads = await holdOrderReads(page, orderId)
    await page.getByTestId('mockpay-pay').click()
    const approve = page.locator('[data-testid="mockpay-pay"][aria-busy="true"]')
    await approve.waitFor()
    expect((await approve.textContent())?.trim()).toBe('Approving…')
    expect(await page.locator('[data-testid="mockpay"] button:disabled').count()).toBe(3)
    await screenshotAtWidths(page, 'checkout-approving')
    await releaseOrderReads()

    await page.locator('[data-testid="order-status"][data-status="paid"]').waitFor({ timeout: 20_000 })
    expect((await page.getByTestId('order-status').textContent())?.trim()).toBe('Paid')
    expect(await page.getByTestId('mockpay-pay').getAttribute('aria-busy')).toBeNull()
    expect((await page.getByTestId('mockpay-pay').textContent())?.trim()).toBe('Approve payment')
    await screenshot(page, 'paid')
    expect(await orderThroughApi(page, orderId)).toMatchObject({ id: orderId, status: 'paid', paymentIntentId: expect.stringMatching(/^pi_/) })

    // Every delivery (copies and delays included) has run: a second email would be there by now.
    await jobsSettled(orderId, 'order.send_confirmation')
    expect(await mailOf(orderId)).toEqual([{ to: EMAIL, subject: `Order ${orderId} confirmed` }])

    await page.locator('[data-testid="mockpay-refund"]:enabled').waitFor()
    await page.getByTestId('mockpay-refund').click()
    await page.locator('[data-testid="order-status"][data-status="refunded"]').waitFor({ timeout: 20_000 })
    await jobsSettled(orderId, 'order.send_refund_notice')
    expect(await mailOf(orderId)).toEqual([
      { to: EMAIL, subject: `Order ${orderId} confirmed` },
      { to: EMAIL, subject: `Order ${orderId} refunded` },
    ])
    const [row] = await db()<Array<{ status: string }>>`select status from orders where id = ${orderId}`
    expect(row).toEqual({ status: 'refunded' })
    expect(await page.evaluate(() => (globalThis as unknown as { sameDocument?: boolean }).sameDocument)).toBe(true)
    expect(pageErrors).toEqual([])
  })

  it('invalid email: the problem is shown, nothing is stored, the key is kept; fixed, Pay succeeds with the same key', async () => {
    const { page, orderPosts, pageErrors } = await open()
    const cartId = await fillCart(page, 'not-an-email')
    const recordsBefore = await recordCount()

    const [rejected] = await Promise.all([
      page.waitForResponse(response => response.request().method() === 'POST' && response.url().endsWith('/api/orders')),
      page.getByTestId('pay').click(),
    ])
    expect(rejected.status()).toBe(400)
    const problem = await rejected.json() as { type: string, detail: string, errors: Array<{ path: string, message: string }> }
    expect(problem).toMatchObject({ type: '/problems/validation-failed', status: 400, errors: [{ path: 'customer.email', message: expect.any(String) }] })
    expect(problem.errors).toHaveLength(1)

    // The shopper's words, not the server's (which speak of keys to API clients); the email's
    // message once, beside the input marked invalid.
    const detail = page.getByTestId('problem-detail')
    await detail.waitFor()
    expect((await detail.textContent())?.trim()).toBe('Your order was not placed yet. Fix what is marked above and press Pay again.')
    const email = page.getByLabel('Email for the receipt')
    expect(await email.getAttribute('aria-invalid')).toBe('true')
    expect((await page.locator(`#${await email.getAttribute('aria-describedby')}`).textContent())?.trim()).toBe('Enter a valid email address, like name@example.com.')
    const summary = (await page.locator('aside').textContent()) ?? ''
    expect(summary.split('Enter a valid email address').length - 1).toBe(1)
    expect(summary).not.toContain(problem.detail)
    expect(summary).not.toContain(problem.errors[0]!.message)
    expect(summary).not.toContain('Idempotency-Key')
    await screenshotAtWidths(page, 'checkout-errors')

    expect(orderPosts).toHaveLength(1)
    const key = orderPosts[0]!.idempotencyKey!
    expect(await ordersOfCart(cartId)).toEqual([])
    expect(await recordsOfKey(key)).toEqual([])
    expect(await recordCount()).toBe(recordsBefore)
    // Nothing was stored under the key, so the intent (and its key) stays for the corrected Pay.
    expect((await storedIntent(page, cartId))?.key).toBe(key)

    await page.getByLabel('Email for the receipt').fill(EMAIL)
    await page.getByTestId('pay').click()
    const orderId = await shownOrderId(page)

    expect(orderPosts).toHaveLength(2)
    expect(orderPosts[1]!.idempotencyKey).toBe(key)
    expect(orderPosts[1]!.body).toMatchObject({ cartId, customer: { email: EMAIL } })
    await expectOneOrder(cartId, key, orderId)
    expect(await recordCount()).toBe(recordsBefore + 1)
    expect(await page.getByTestId('replayed-note').count()).toBe(0)
    expect(pageErrors).toEqual([])
  })

  /** Whether the element is wholly inside the viewport as it is scrolled now. */
  async function onScreen(page: Page, testId: string): Promise<boolean> {
    const box = await page.getByTestId(testId).boundingBox()
    return !!box && box.y >= 0 && box.y + box.height <= page.viewportSize()!.height && box.x >= 0 && box.x + box.width <= page.viewportSize()!.width
  }

  /** How a disabled control looks: its opacity and the contrast of its text on its face. */
  async function disabledLook(page: Page, selector: string) {
    const control = page.locator(selector)
    expect(await control.isDisabled()).toBe(true)
    const style = await control.evaluate((element) => {
      const computed = (globalThis as unknown as PageGlobals).getComputedStyle(element)
      return { color: computed.color, background: computed.backgroundColor, opacity: computed.opacity }
    })
    return { opacity: style.opacity, contrast: contrastRatio(style.color, style.background) }
  }

  it('at 375 px: nothing scrolls sideways, Pay stays on screen in a bar with the cart\'s count, and a disabled Pay is readable', async () => {
    const { page, pageErrors } = await open()
    await page.setViewportSize(phoneViewport)

    // An empty cart: Pay and the quantity's minus are disabled, yet their text reads at AA contrast.
    expect((await page.getByTestId('pay').textContent())?.trim()).toBe('Pay IDR\u00A00')
    for (const selector of ['[data-testid="pay"]', '[aria-label="One less Organic cotton tee"]']) {
      const look = await disabledLook(page, selector)
      expect(look.opacity, selector).toBe('1')
      expect(look.contrast, selector).toBeGreaterThanOrEqual(4.5)
    }
    expect((await page.getByTestId('cart-link').textContent())?.trim()).toBe('Your cart is empty')

    // Shopping from the top of the catalogue, then from its end: Pay is on screen all along.
    await page.evaluate(() => (globalThis as unknown as PageGlobals).scrollTo(0, 0))
    await page.getByTestId('add-TEE-ORGANIC').click()
    await page.getByTestId('add-TEE-ORGANIC').click()
    await page.getByTestId('add-MUG-ENAMEL').click()
    expect(await onScreen(page, 'pay')).toBe(true)
    await page.getByTestId('add-CAP-WOOL').scrollIntoViewIfNeeded()
    expect(await onScreen(page, 'pay')).toBe(true)
    expect((await page.getByTestId('pay').textContent())?.trim()).toBe('Pay IDR\u00A0387,000')
    expect((await page.getByTestId('cart-link').textContent())?.trim()).toBe('3 items in your cart')
    expect(await page.evaluate(() => (globalThis as unknown as PageGlobals).document.documentElement.scrollWidth)).toBeLessThanOrEqual(phoneViewport.width)
    await page.evaluate(() => (globalThis as unknown as PageGlobals).scrollTo(0, 0))
    await screenshot(page, 'checkout-cart-375')

    // The bar's link takes the shopper to the cart, its lines and the email.
    await page.getByTestId('cart-link').click()
    await page.waitForFunction(() => (globalThis as unknown as { location: { hash: string } }).location.hash === '#summary-heading')
    expect(await onScreen(page, 'total')).toBe(true)
    await page.getByLabel('Email for the receipt').fill(EMAIL)
    expect(await onScreen(page, 'pay')).toBe(true)
    await screenshot(page, 'checkout-cart-bottom-375')

    await page.getByTestId('pay').click()
    const orderId = await shownOrderId(page)
    expect(await orderThroughApi(page, orderId)).toMatchObject({ id: orderId, amount: CART_TOTAL, paymentMethod: 'card' })
    // The placed order, with its items table, fits the phone too: each item's name on one line.
    expect(await page.evaluate(() => (globalThis as unknown as PageGlobals).document.documentElement.scrollWidth)).toBeLessThanOrEqual(phoneViewport.width)
    expect(await page.getByTestId('item-name').evaluateAll(names => names.map((name) => {
      const range = (globalThis as unknown as PageGlobals).document.createRange()
      range.selectNodeContents(name)
      return range.getClientRects().length
    }))).toEqual([1, 1])
    expect(pageErrors).toEqual([])
  })

  it('Cancel order: asked once more, one POST under one key; the order reads canceled on screen, in the API and after a reload', async () => {
    const { page, pageErrors } = await open()
    await fillCart(page)
    await page.getByTestId('pay').click()
    const orderId = await shownOrderId(page)
    expect((await page.getByTestId('order-payment-method').textContent())?.trim()).toBe('Card')
    const cancelPath = `/api/orders/${orderId}/cancel`
    const cancelKeys: Array<string | undefined> = []
    page.on('request', (sent) => {
      if (sent.method() === 'POST' && new URL(sent.url()).pathname === cancelPath) cancelKeys.push(sent.headers()['idempotency-key'])
    })

    await page.getByTestId('cancel-order').click()
    expect((await page.locator('#cancel-question').textContent())?.trim()).toBe('Cancel this order? Nothing will be charged for it, and it cannot be undone.')
    await screenshotAtWidths(page, 'checkout-cancel-confirm')
    const [answer] = await Promise.all([
      page.waitForResponse(response => response.request().method() === 'POST' && new URL(response.url()).pathname === cancelPath),
      page.getByTestId('cancel-confirm').click(),
    ])
    expect(answer.status()).toBe(200)
    expect(await answer.json()).toMatchObject({ id: orderId, status: 'canceled', idempotency: { replayed: false } })

    await page.locator('[data-testid="order-status"][data-status="canceled"]').waitFor()
    expect((await page.getByTestId('result-heading').textContent())?.trim()).toBe('Order canceled')
    expect((await page.getByTestId('order-status').textContent())?.trim()).toBe('Canceled')
    expect((await page.getByTestId('canceled-note').textContent())?.trim()).toBe('This order was canceled. Nothing will be charged for it.')
    expect(await page.getByTestId('cancel-order').count()).toBe(0)
    await screenshotAtWidths(page, 'checkout-canceled')

    expect(cancelKeys).toEqual([expect.stringMatching(/^[0-9a-f-]{36}$/)])
    const [row] = await db()<Array<{ status: string }>>`select status from orders where id = ${orderId}`
    expect(row).toEqual({ status: 'canceled' })
    expect(await db()<Array<{ route: string, status: string, responseStatus: number }>>`
      select route, status, response_status as "responseStatus" from idempotency_records where scope = ${DEMO_SCOPE} and key = ${cancelKeys[0]!}`)
      .toEqual([{ route: 'POST /api/orders/:id/cancel', status: 'succeeded', responseStatus: 200 }])
    expect(await orderThroughApi(page, orderId)).toMatchObject({ id: orderId, status: 'canceled', amountRefunded: 0, refunds: [] })

    // A reload shows the canceled order again, with nothing left to cancel.
    await page.reload()
    await page.locator('[data-testid="order-status"][data-status="canceled"]').waitFor()
    expect((await page.getByTestId('result-heading').textContent())?.trim()).toBe('Order canceled')
    expect(await page.getByTestId('cancel-order').count()).toBe(0)
    expect(cancelKeys).toHaveLength(1)
    expect(pageErrors).toEqual([])
  })

  it('a paid order partly refunded by the shop: "Partially refunded" and how much came back, without a reload', async () => {
    const { page, pageErrors } = await open()
    await fillCart(page)
    await page.getByTestId('pay').click()
    const orderId = await shownOrderId(page)
    await page.locator('[data-testid="mockpay-pay"]:enabled').waitFor({ timeout: 20_000 })
    await page.getByTestId('mockpay-pay').click()
    await page.locator('[data-testid="order-status"][data-status="paid"]').waitFor({ timeout: 20_000 })
    expect(await page.getByTestId('cancel-order').count()).toBe(0)

    // The shop refunds part of it from the console (the operators' route).
    const refund = await request(app.url, `/api/ops/orders/${orderId}/refunds`, {
      method: 'POST',
      headers: { 'authorization': `Bearer ${testSecrets.opsToken}`, 'idempotency-key': newIdempotencyKey() },
      body: { amount: 100_000, reason: 'requested_by_customer' },
    })
    expect(refund.status, refund.text).toBe(201)

    await page.locator('[data-testid="order-status"][data-status="partially_refunded"]').waitFor({ timeout: 20_000 })
    expect((await page.getByTestId('order-status').textContent())?.trim()).toBe('Partially refunded')
    expect((await page.getByTestId('order-refunded').textContent())?.trim()).toBe('IDR\u00A0100,000 of IDR\u00A0387,000')
    await screenshotAtWidths(page, 'checkout-partially-refunded')
    expect(pageErrors).toEqual([])
  })

  /** Waits until every job of the order (and mockpay's deliveries for it) completed, `kind` among them. */
  async function jobsSettled(orderId: string, kind: string): Promise<void> {
    let jobs: Array<{ kind: string, status: string }> = []
    await pollUntil(`every job of order ${orderId} completed, ${kind} among them (${JSON.stringify(jobs)})`, async () => {
      jobs = await db()<Array<{ kind: string, status: string }>>`
        select kind, status from jobs
        where resource_id = ${`order:${orderId}`} or (kind = 'mockpay.deliver' and payload->>'orderId' = ${orderId})`
      return jobs.some(job => job.kind === kind) && jobs.every(job => job.status === 'completed')
    }, { timeoutMs: 20_000, intervalMs: 100 })
  }

  function mailOf(orderId: string) {
    return db()<Array<{ to: string, subject: string }>>`select "to", subject from mailbox where order_id = ${orderId} order by created_at, id`
  }

  it('with JavaScript off the shop is server-rendered: the catalogue, its stock notes and the session cookie come with the page', async () => {
    const context = await browser!.newContext({ baseURL: app.url, viewport: desktopViewport, javaScriptEnabled: false })
    try {
      const page = await context.newPage()
      const response = await page.goto('/')
      expect(response?.status()).toBe(200)
      expect(await page.locator('[data-testid^="product-"]').evaluateAll(products => products.map(product => (product as unknown as { dataset: { testid: string } }).dataset.testid)))
        .toEqual(['product-TEE-ORGANIC', 'product-MUG-ENAMEL', 'product-TOTE-CANVAS', 'product-CAP-WOOL'])
      expect((await page.getByTestId('stock-TOTE-CANVAS').textContent())?.trim()).toBe('Only 3 left')
      expect(await page.getByText('Opening the store…').count()).toBe(0)
      expect((await context.cookies()).map(cookie => cookie.name)).toContain('ic_checkout')
      await screenshot(page, 'checkout-server-rendered')
    }
    finally {
      await context.close()
    }
  })

  it('the low tote says "Only 3 left" and stops the cart at 3; buying them sells it out: "Sold out" at once and after a reload, and the stock row holds them', async () => {
    const { page, pageErrors } = await open()
    const tote = page.getByTestId('stock-TOTE-CANVAS')
    expect((await tote.textContent())?.trim()).toBe('Only 3 left')
    // Plenty of the rest: nothing said.
    expect(await page.locator('[data-testid^="stock-"]').count()).toBe(1)
    const add = page.getByTestId('add-TOTE-CANVAS')
    for (let click = 0; click < 3; click++) await add.click()
    expect(await add.isDisabled()).toBe(true)
    expect((await storedCart(page)).quantities).toEqual({ 'TOTE-CANVAS': 3 })
    await screenshot(page, 'checkout-only-3-left')

    await page.getByLabel('Email for the receipt').fill(EMAIL)
    await page.getByTestId('pay').click()
    const orderId = await shownOrderId(page)
    await page.locator('[data-testid="stock-TOTE-CANVAS"]', { hasText: 'Sold out' }).waitFor()
    const [row] = await db()<Array<{ onHand: number, reserved: number }>>`select on_hand::int as "onHand", reserved::int as reserved from stock where tenant_id = ${DEMO_TENANT} and sku = 'TOTE-CANVAS'`
    expect(row).toEqual({ onHand: 3, reserved: 3 })
    expect(await orderThroughApi(page, orderId)).toMatchObject({ reservations: [{ sku: 'TOTE-CANVAS', quantity: 3, status: 'reserved' }] })

    await page.reload()
    await shownOrderId(page)
    await page.getByRole('button', { name: 'Start a new order' }).click()
    await page.locator('[data-testid="stock-TOTE-CANVAS"]', { hasText: 'Sold out' }).waitFor()
    expect(await page.getByTestId('add-TOTE-CANVAS').isDisabled()).toBe(true)
    expect(await page.getByTestId('add-TEE-ORGANIC').isEnabled()).toBe(true)
    await screenshot(page, 'checkout-sold-out')
    expect(pageErrors).toEqual([])
  })
})

afterAll(async () => {
  await stopAll()
})
