import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Browser } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type AppProcess, startApp, stopAll, testSecrets } from '../support/app'
import { withChromium, openCheckout } from '../support/browser'
import { request } from '../support/http'

// The README's first command: the app on the embedded default (PGlite, in-process locks, no
// services) serves a checkout that works with no key pasted — the demo store and mockpay are on by
// default there. A double click orders once; mockpay's approval turns the order paid on the page.

describe('checkout page on the embedded default, in Chromium', () => {
  let pgliteDir: string
  let app: AppProcess
  let browser: Browser | undefined
  withChromium((launched) => {
    browser = launched
  })

  beforeAll(async () => {
    pgliteDir = await mkdtemp(join(tmpdir(), 'ic-checkout-embedded-'))
    // No CHECKOUT_DEMO_ENABLED or MOCKPAY_ENABLED: embedded turns both on by itself.
    app = await startApp({
      redisUrl: null,
      label: 'checkout-embedded',
      env: { PGLITE_DIR: pgliteDir, WORKER_ENABLED: 'true', JOB_POLL_INTERVAL_MS: '50', MOCKPAY_MAX_DELAY_MS: '100' },
    })
  })

  afterAll(async () => {
    await stopAll()
    if (pgliteDir) await rm(pgliteDir, { recursive: true, force: true })
  })

  it('a double-clicked Pay places one order; approving it through mockpay shows it paid without a reload', async () => {
    const { context, page, pageFetches, pageErrors } = await openCheckout(browser!, app.url)
    try {
      await page.goto('/')
      await page.getByTestId('add-CAP-WOOL').click()
      await page.getByLabel('Email for the receipt').fill('embedded@example.com')
      await page.getByTestId('pay').dblclick()
      const orderId = ((await page.getByTestId('order-id').textContent({ timeout: 20_000 })) ?? '').trim()
      expect(orderId).toMatch(/^ord_/)
      expect(pageFetches).toHaveLength(1)

      // The app holds the database: the ops API is the window. One order means one intent job.
      const ops = { authorization: `Bearer ${testSecrets.opsToken}` }
      const intentJobs = await request(app.url, '/api/ops/jobs?kind=payment.create_intent', { headers: ops })
      expect(intentJobs.status, intentJobs.text).toBe(200)
      expect(intentJobs.json.data.map((job: { resourceId: string }) => job.resourceId)).toEqual([`order:${orderId}`])

      const approve = page.getByTestId('mockpay-pay')
      await expect.poll(() => approve.isEnabled(), { timeout: 20_000 }).toBe(true)
      await approve.click()
      await page.locator('[data-testid="order-status"][data-status="paid"]').waitFor({ timeout: 20_000 })
      // Read with the page's own session cookie: the order it shows is the demo tenant's, and paid.
      const shown = await page.evaluate(async id => (await fetch(`/api/orders/${id}`)).json(), orderId)
      expect(shown).toMatchObject({ id: orderId, status: 'paid', amount: 99_000, currency: 'IDR', customer: { email: 'embedded@example.com' } })
      expect(pageErrors).toEqual([])
    }
    finally {
      await context.close()
    }
  })
})
