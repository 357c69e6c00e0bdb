import postgres from 'postgres'
import type { Browser, Page } from 'playwright-core'
import { afterAll, afterEach, beforeAll, beforeEach, expect, it } from 'vitest'
import { type AppProcess, fastJobsEnv, startApp, stopAll, testSecrets } from '../support/app'
import { type CheckoutPage, withChromium, openCheckout, screenshot, storedCart } from '../support/browser'
import { type MidtransApi, startMidtransApi } from '../support/midtrans-api'
import { createTestDatabase, describeWithServices, redisUrl } from '../support/services'

// The checkout page's provider steps (components/checkout/OrderResult.vue) in real Chromium against
// the built server with PAYMENT_PROVIDER=midtrans, pointed at a local stand-in of Midtrans' Core
// API, and mockpay off: a bank transfer shows the virtual account Midtrans issued, a refused payment
// shows why, each from one charge (or none) at the stand-in, checked there and in the database.

const EMAIL = 'shopper@example.com'
/** 2 × Organic cotton tee (149 000) + 1 × Enamel camp mug (89 000). */
const CART_TOTAL = 387_000
/** What server/payments/midtrans.ts tells the shopper when Midtrans answers a charge with deny (or cancel, expire, failure). */
const DECLINED_MESSAGE = 'The payment was declined. Nothing was charged; please place the order again with another payment method.'
/** …and when the order asks for a card, which it refuses before calling Midtrans. */
const CARD_UNSUPPORTED_MESSAGE = 'Card payments are not available for this shop yet. Nothing was charged; please place the order again with bank transfer or e-wallet.'

type PaymentMethod = 'Card' | 'Bank transfer' | 'E-wallet'

describeWithServices('checkout page in Chromium: the payment provider\'s next step and refusals (Midtrans)', ['postgres', 'redis'], () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>> | undefined
  let midtrans: MidtransApi | undefined
  let app: AppProcess
  let sql: postgres.Sql | undefined
  let browser: Browser | undefined
  withChromium((launched) => {
    browser = launched
  })
  /** The current test's context: closed after each test, so the next starts with no cookie or storage. */
  let shop: CheckoutPage | undefined

  beforeAll(async () => {
    database = await createTestDatabase('checkout_providers_browser')
    midtrans = await startMidtransApi({ serverKey: testSecrets.midtransServerKey })
    app = await startApp({
      databaseUrl: database.url,
      redisUrl,
      label: 'checkout-providers-browser',
      // MIDTRANS_SERVER_KEY is appEnv's testSecrets.midtransServerKey, the one the stand-in accepts.
      env: {
        CHECKOUT_DEMO_ENABLED: 'true',
        ...fastJobsEnv,
        PAYMENT_PROVIDER: 'midtrans',
        MIDTRANS_API_BASE: midtrans.url,
        MOCKPAY_ENABLED: 'false',
      },
    })
    sql = postgres(database.url, { max: 2, onnotice: () => {} })
  })

  beforeEach(() => {
    // Transactions stay (as at Midtrans, an order_id is used once); each test counts its own calls.
    midtrans!.calls.length = 0
    midtrans!.script.length = 0
  })

  afterEach(async () => {
    await shop?.context.close()
    shop = undefined
  })

  afterAll(async () => {
    await app?.stop()
    await midtrans?.close()
    await sql?.end()
    await database?.drop()
  })

  const db = () => sql!
  const api = () => midtrans!

  /** Fills the cart (2 tees, 1 mug), the email and the payment method, and pays; the order the page then shows. */
  async function placeOrder(method: PaymentMethod): Promise<{ page: Page, orderId: string, pageErrors: string[] }> {
    shop = await openCheckout(browser!, app.url)
    const { page, orderPosts, pageErrors } = shop
    await page.getByTestId('add-TEE-ORGANIC').click()
    await page.getByTestId('add-TEE-ORGANIC').click()
    await page.getByTestId('add-MUG-ENAMEL').click()
    await page.getByLabel('Email for the receipt').fill(EMAIL)
    await page.getByLabel(method, { exact: true }).check()
    const paymentMethod = { 'Card': 'card', 'Bank transfer': 'bank_transfer', 'E-wallet': 'ewallet' }[method]
    expect(await storedCart(page)).toMatchObject({ quantities: { 'TEE-ORGANIC': 2, 'MUG-ENAMEL': 1 }, email: EMAIL, paymentMethod })
    await page.getByTestId('pay').click()

    const shown = page.getByTestId('order-id')
    await shown.waitFor({ timeout: 20_000 })
    const orderId = (await shown.textContent())?.trim() ?? ''
    expect(orderId).toMatch(/^ord_/)
    expect(orderPosts).toHaveLength(1)
    expect(orderPosts[0]!.body).toMatchObject({ amount: CART_TOTAL, currency: 'IDR', paymentMethod, customer: { email: EMAIL } })
    return { page, orderId, pageErrors }
  }

  /** The stand-in's charges for one order, and every call it got in this test. */
  function chargesOf(orderId: string) {
    return api().calls.filter(call => call.method === 'POST' && call.path === '/v2/charge'
      && (call.body.transaction_details as Record<string, unknown> | undefined)?.order_id === orderId)
  }

  /** The order's jobs once its payment.create_intent completed (the page may show the result a poll earlier). */
  async function settledJobs(orderId: string) {
    let jobs: Array<{ kind: string, status: string, attempt: number }> = []
    const deadline = Date.now() + 10_000
    do {
      jobs = await db()<Array<{ kind: string, status: string, attempt: number }>>`
        select kind, status, attempt from jobs where resource_id = ${`order:${orderId}`} order by kind, id`
      if (jobs.every(job => job.status === 'completed')) return jobs
      await new Promise(resolve => setTimeout(resolve, 100))
    } while (Date.now() < deadline)
    throw new Error(`the jobs of ${orderId} did not complete: ${JSON.stringify(jobs)}`)
  }

  async function orderThroughApi(page: Page, orderId: string) {
    const response = await page.request.get(`/api/orders/${orderId}`)
    expect(response.status()).toBe(200)
    return response.json()
  }

  /** No mockpay panel or button anywhere on the page. */
  async function expectNoMockpay(page: Page): Promise<void> {
    for (const testId of ['mockpay', 'mockpay-pay', 'mockpay-fail', 'mockpay-refund']) expect(await page.getByTestId(testId).count(), testId).toBe(0)
    expect(await page.getByRole('button', { name: /Approve payment|Decline payment|Refund/ }).count()).toBe(0)
  }

  it('bank transfer: the page shows the BCA virtual account the one charge at Midtrans issued, and no mockpay buttons', async () => {
    const { page, orderId, pageErrors } = await placeOrder('Bank transfer')

    const nextStep = page.locator('[data-testid="payment-next-step"][data-type="midtrans_bank_transfer"]')
    await nextStep.waitFor({ timeout: 20_000 })
    const transaction = api().transactions.get(orderId)
    expect(transaction).toMatchObject({ payment_type: 'bank_transfer', bank: 'bca', gross_amount: CART_TOTAL, transaction_status: 'pending' })
    expect(transaction!.va_number).toMatch(/^\d{11}$/)
    expect(await page.getByTestId('va-number').textContent()).toBe(transaction!.va_number)
    expect(await nextStep.getByText('BCA', { exact: true }).count()).toBe(1)
    expect((await page.getByTestId('order-status').textContent())?.trim()).toBe('Awaiting payment')
    expect(await page.getByTestId('order-status').getAttribute('data-status')).toBe('pending_payment')
    expect(await page.getByTestId('payment-error').count()).toBe(0)
    await expectNoMockpay(page)
    await screenshot(page, 'midtrans-va')

    // Exactly one charge, for this order's amount and bank, answered with the account shown.
    const charges = chargesOf(orderId)
    expect(charges).toHaveLength(1)
    expect(charges[0]).toMatchObject({
      answered: 200,
      body: { payment_type: 'bank_transfer', bank_transfer: { bank: 'bca' }, transaction_details: { order_id: orderId, gross_amount: CART_TOTAL }, customer_details: { email: EMAIL } },
    })
    expect(api().calls.filter(call => call.path === '/v2/charge')).toHaveLength(1)
    expect(await settledJobs(orderId)).toEqual([{ kind: 'payment.create_intent', status: 'completed', attempt: 1 }])
    expect(await orderThroughApi(page, orderId)).toMatchObject({
      id: orderId,
      status: 'pending_payment',
      amount: CART_TOTAL,
      paymentIntentId: orderId,
      payment: { provider: 'midtrans', id: orderId, nextAction: { type: 'midtrans_bank_transfer', bank: 'bca', vaNumber: transaction!.va_number, expiresAt: transaction!.expiry_time }, error: null },
    })
    // mockpay was never asked.
    expect(await db()`select id from payment_intents where order_id = ${orderId}`).toEqual([])
    expect(pageErrors).toEqual([])
  })

  it('a charge the bank denies: the page shows the refusal as an alert and the badge "Payment failed"; one charge, not retried', async () => {
    api().script.push({ match: 'create', fault: { kind: 'deny' } })
    const { page, orderId, pageErrors } = await placeOrder('Bank transfer')

    const refusal = page.getByRole('alert').and(page.getByTestId('payment-error'))
    await refusal.waitFor({ timeout: 20_000 })
    expect((await refusal.textContent())?.trim()).toBe(DECLINED_MESSAGE)
    expect(await refusal.getAttribute('data-code')).toBe('deny')
    const badge = page.locator('[data-testid="order-status"][data-status="payment_failed"]')
    await badge.waitFor()
    expect((await badge.textContent())?.trim()).toBe('Payment failed')
    // Nothing left to do at the provider: no virtual account, no mockpay.
    expect(await page.getByTestId('payment-next-step').count()).toBe(0)
    expect(await page.getByTestId('va-number').count()).toBe(0)
    await expectNoMockpay(page)
    await screenshot(page, 'payment-refused')

    expect(chargesOf(orderId).map(call => call.answered)).toEqual([200])
    expect(api().transactions.get(orderId)).toMatchObject({ transaction_status: 'deny', channel_response_message: 'Do not honour' })
    expect(await settledJobs(orderId)).toEqual([{ kind: 'payment.create_intent', status: 'completed', attempt: 1 }])
    expect(await orderThroughApi(page, orderId)).toMatchObject({
      id: orderId,
      status: 'payment_failed',
      paymentIntentId: null,
      payment: { provider: 'midtrans', id: null, nextAction: null, error: { code: 'deny', message: DECLINED_MESSAGE } },
    })
    expect(await db()`select from_status as "fromStatus", to_status as "toStatus", outcome from order_status_history where order_id = ${orderId} order by id`)
      .toEqual([{ fromStatus: 'pending_payment', toStatus: 'payment_failed', outcome: 'applied' }])
    expect(pageErrors).toEqual([])
  })

  it('card, which this shop cannot take through Midtrans: refused without calling Midtrans, the reason shown as an alert', async () => {
    const { page, orderId, pageErrors } = await placeOrder('Card')

    const refusal = page.getByRole('alert').and(page.getByTestId('payment-error'))
    await refusal.waitFor({ timeout: 20_000 })
    expect((await refusal.textContent())?.trim()).toBe(CARD_UNSUPPORTED_MESSAGE)
    expect(await refusal.getAttribute('data-code')).toBe('payment_method_unsupported')
    await page.locator('[data-testid="order-status"][data-status="payment_failed"]').waitFor()
    expect((await page.getByTestId('order-status').textContent())?.trim()).toBe('Payment failed')
    await expectNoMockpay(page)

    expect(await settledJobs(orderId)).toEqual([{ kind: 'payment.create_intent', status: 'completed', attempt: 1 }])
    expect(chargesOf(orderId)).toEqual([])
    expect(api().calls).toEqual([])
    expect(api().transactions.has(orderId)).toBe(false)
    expect(pageErrors).toEqual([])
  })
})

afterAll(async () => {
  await stopAll()
})
