import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core'
import { afterAll, beforeAll } from 'vitest'

/**
 * The checkout page in a real browser: Debian's Chromium driven by playwright-core (no browser
 * download), one isolated context per test so localStorage and the session cookie start empty,
 * the page's POSTs to /api/orders recorded as the browser sent them, and screenshots for a person
 * to look at.
 */

export const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
export const desktopViewport = { width: 1200, height: 800 }
export const mobileViewport = { width: 390, height: 844 }
/** Git-ignored: the screenshots of the key states are for people, not assertions. */
export const screenshotDir = fileURLToPath(new URL('../../test-results/checkout/', import.meta.url))

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] })
}

/** One Chromium for the suite: launched before its tests, handed to `use`, closed after them. */
export function withChromium(use: (browser: Browser) => void): void {
  let browser: Browser | undefined
  beforeAll(async () => {
    browser = await launchChromium()
    use(browser)
  })
  afterAll(async () => {
    await browser?.close()
  })
}

/** One POST /api/orders as the browser reported it (Playwright's request event). */
export interface SentOrderRequest {
  idempotencyKey: string | undefined
  fault: string | undefined
  prefer: string | undefined
  body: unknown
}

/** One POST /api/orders made by the page's code: one attempt of the idempotent client. */
export interface PageFetch {
  idempotencyKey: string | null
  fault: string | null
}

export interface CheckoutPage {
  context: BrowserContext
  page: Page
  /**
   * Every POST /api/orders the browser reported, in order. Chromium's own silent resend of a request
   * whose reused keep-alive connection closed without an answer is not reported separately.
   */
  orderPosts: SentOrderRequest[]
  /** Every POST /api/orders the page's code made, in order, across reloads. */
  pageFetches: PageFetch[]
  /** Uncaught exceptions in the page. */
  pageErrors: string[]
}

/**
 * Wraps the page's fetch to report each POST /api/orders to the test (through the
 * `recordOrderFetch` binding, which outlives a reload). A string: it runs in the page, not here.
 */
const reportOrderFetches = `(() => {
  const original = window.fetch
  window.fetch = function (input, init) {
    const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url, location.href)
    const method = (init && init.method) || (input instanceof Request ? input.method : 'GET')
    if (method.toUpperCase() === 'POST' && url.pathname === '/api/orders') {
      const headers = new Headers(init && init.headers)
      window.recordOrderFetch({ idempotencyKey: headers.get('idempotency-key'), fault: headers.get('x-fault') })
    }
    return original.apply(this, arguments)
  }
})()`

/** The page's globals these helpers read (the tests compile without the DOM types). */
interface PageGlobals { localStorage: { getItem: (key: string) => string | null } }

/** A fresh context (no cookies, empty localStorage) on the store, once its catalogue is shown. */
export async function openCheckout(browser: Browser, baseURL: string): Promise<CheckoutPage> {
  const context = await browser.newContext({ baseURL, viewport: desktopViewport })
  const page = await context.newPage()
  const orderPosts: SentOrderRequest[] = []
  const pageFetches: PageFetch[] = []
  const pageErrors: string[] = []
  await context.exposeBinding('recordOrderFetch', (_source, fetch: PageFetch) => {
    pageFetches.push(fetch)
  })
  await context.addInitScript(reportOrderFetches)
  page.on('request', (sent) => {
    if (sent.method() !== 'POST' || new URL(sent.url()).pathname !== '/api/orders') return
    const headers = sent.headers()
    orderPosts.push({ idempotencyKey: headers['idempotency-key'], fault: headers['x-fault'], prefer: headers.prefer, body: sent.postDataJSON() })
  })
  page.on('pageerror', error => pageErrors.push(error.message))
  await page.goto('/')
  // The catalogue comes from GET /api/checkout/session, which also sets the session cookie.
  await page.getByTestId('add-TEE-ORGANIC').waitFor()
  return { context, page, orderPosts, pageFetches, pageErrors }
}

export interface StoredCart { cartId: string, quantities: Record<string, number>, email: string, paymentMethod: string }
export interface StoredIntent { key: string, body: unknown, startedAt: number }

// The callback runs in the page: it can use nothing from this module.
const readLocalStorage = (page: Page, name: string) => page.evaluate(key => (globalThis as unknown as PageGlobals).localStorage.getItem(key), name)

/** The cart as the page keeps it in localStorage. */
export async function storedCart(page: Page): Promise<StoredCart> {
  const raw = await readLocalStorage(page, 'checkout:cart')
  if (!raw) throw new Error('no cart in localStorage (checkout:cart)')
  return JSON.parse(raw) as StoredCart
}

/** The pending intent of a cart (its Idempotency-Key), or undefined once the intent ended. */
export async function storedIntent(page: Page, cartId: string): Promise<StoredIntent | undefined> {
  const raw = await readLocalStorage(page, `idempotent-intent:checkout:${cartId}`)
  return raw ? JSON.parse(raw) as StoredIntent : undefined
}

/** The widths the checkout screenshots in docs/checkout-page.md are taken at. */
export const screenshotViewports = [{ width: 1280, height: 800 }, { width: 375, height: 812 }]

/** One PNG per width in screenshotViewports (`<name>-1280.png`, `<name>-375.png`), then back to the desktop viewport. */
export async function screenshotAtWidths(page: Page, name: string): Promise<void> {
  for (const viewport of screenshotViewports) {
    await page.setViewportSize(viewport)
    await screenshot(page, `${name}-${viewport.width}`, { fullPage: viewport.width < 760 })
  }
  await page.setViewportSize(desktopViewport)
}

/** A PNG of the page into test-results/checkout/<name>.png. */
export async function screenshot(page: Page, name: string, options: { fullPage?: boolean } = {}): Promise<void> {
  await mkdir(screenshotDir, { recursive: true })
  await page.screenshot({ path: join(screenshotDir, `${name}.png`), fullPage: options.fullPage ?? false, animations: 'disabled' })
}

/** The console (`/ops`) in a new context on `baseURL`, signed in with the operator token; the page's errors collected. */
export async function openOpsConsole(browser: Browser, baseURL: string, opsToken: string): Promise<{ context: BrowserContext, page: Page, pageErrors: string[] }> {
  const context = await browser.newContext({ baseURL, viewport: { width: 1400, height: 900 } })
  const page = await context.newPage()
  const pageErrors: string[] = []
  page.on('pageerror', error => pageErrors.push(error.message))
  await page.goto('/ops')
  await page.getByLabel('Operator token').fill(opsToken)
  await page.getByTestId('token-submit').click()
  await page.getByTestId('console').waitFor()
  return { context, page, pageErrors }
}
