import type { Browser } from 'playwright-core'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { type AppProcess, startApp, stopAll } from '../support/app'
import { desktopViewport, withChromium } from '../support/browser'
import { createTestDatabase, describeWithServices } from '../support/services'

// The API reference at /docs in real Chromium against the built server: Redoc, served by the build
// itself, loads GET /api/openapi.json and renders its operations.

describeWithServices('API reference (/docs) in Chromium', ['postgres'], () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>> | undefined
  let app: AppProcess
  let browser: Browser | undefined
  withChromium((launched) => {
    browser = launched
  })

  beforeAll(async () => {
    database = await createTestDatabase('docs_browser')
    app = await startApp({ databaseUrl: database.url, label: 'docs' })
  })

  afterAll(async () => {
    await stopAll()
    await database?.drop()
  })

  it('renders the operations of the served document', async () => {
    const page = await browser!.newPage({ viewport: desktopViewport })
    const pageErrors: string[] = []
    page.on('pageerror', error => pageErrors.push(error.message))
    const answer = await page.goto(`${app.url}/docs`)
    expect(answer?.status()).toBe(200)
    const createOrder = page.getByRole('heading', { name: 'Create an order, exactly once per Idempotency-Key' })
    await createOrder.waitFor({ timeout: 30_000 })
    // The operation's method and path, as Redoc shows them beside its description.
    const endpoint = page.locator('[id="tag/Orders/operation/createOrder"]')
    await expect.poll(() => endpoint.innerText()).toMatch(/post\s*\/api\/orders\b/i)
    expect(await page.getByRole('heading', { name: 'Receive a Stripe event' }).count()).toBe(1)
    expect(pageErrors).toEqual([])
  })
})
