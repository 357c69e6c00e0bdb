import { mountSuspended, registerEndpoint } from '@nuxt/test-utils/runtime'
import { getHeader, type H3Event, readBody, setResponseHeader, setResponseStatus } from 'h3'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import IndexPage from '~/pages/index.vue'
import type { CatalogueItem, Order } from '~/composables/useCheckout'
import { catalogue, deferred, placedOrder, storeSession } from './support/checkout'

// The checkout page mounted in the Nuxt environment, its API answered by registered endpoints:
// what the shopper sees at each step, in the words the page uses.

type Wrapper = Awaited<ReturnType<typeof mountSuspended>>
const summaryText = (wrapper: Wrapper) => wrapper.get('aside').text()
const order = placedOrder()

/** The answer GET /api/orders/:id gives next; a held promise keeps the page waiting. */
let orderAnswer: () => Promise<Order> | Order
/** The answer GET /api/checkout/session gives: the demo store, unless a test closes it. */
let sessionAnswer: (event: H3Event) => unknown
/** The answer POST /api/orders gives: a validation problem, unless a test says otherwise. */
let placeAnswer: (event: H3Event) => unknown
let confirmations = 0

/** A problem document (RFC 9457) with its status. */
function answerProblem(event: H3Event, status: number, problem: Record<string, unknown>) {
  setResponseStatus(event, status)
  setResponseHeader(event, 'content-type', 'application/problem+json')
  return { status, ...problem }
}

registerEndpoint('/api/checkout/session', event => sessionAnswer(event))
registerEndpoint(`/api/orders/${order.id}`, () => orderAnswer())
registerEndpoint('/api/mockpay/intents/pi_1/confirm', {
  method: 'POST',
  handler: () => {
    confirmations++
    return { id: 'pi_1', status: 'succeeded' }
  },
})
registerEndpoint('/api/orders', { method: 'POST', handler: event => placeAnswer(event) })
const invalidEmail = (event: H3Event) => answerProblem(event, 400, {
  type: '/problems/validation-failed',
  title: 'Validation failed',
  detail: 'The order body is invalid: customer.email: Invalid email address. Fix the fields listed in errors and send the request again with the same Idempotency-Key.',
  errors: [{ path: 'customer.email', message: 'Invalid email address' }],
})

beforeEach(() => {
  localStorage.clear()
  orderAnswer = () => order
  sessionAnswer = () => storeSession
  placeAnswer = invalidEmail
  confirmations = 0
})
afterEach(() => {
  localStorage.clear()
})

describe('checkout page: reload while an order is shown', () => {
  it('says "Resuming your order…" until the stored order is read, never an empty cart or IDR 0, then shows the order', async () => {
    localStorage.setItem('checkout:last-order', order.id)
    const held = deferred()
    orderAnswer = async () => {
      await held.promise
      return order
    }

    const wrapper = await mountSuspended(IndexPage)
    await vi.waitFor(() => expect(wrapper.find('[data-testid="summary-opening"]').attributes('data-opening')).toBe('order'))
    expect(summaryText(wrapper)).toBe('Your order Resuming your order…')
    // Intl separates the code with a no-break space, which \s matches.
    expect(wrapper.text()).not.toMatch(/IDR\s0\b/)
    expect(wrapper.text()).not.toContain('Your cart is empty')
    expect(wrapper.find('[data-testid="pay"]').exists()).toBe(false)

    held.resolve()
    await vi.waitFor(() => expect(wrapper.find('[data-testid="order-id"]').exists()).toBe(true))
    expect(wrapper.get('[data-testid="order-id"]').text()).toBe(order.id)
    expect(wrapper.find('[data-testid="summary-opening"]').exists()).toBe(false)
    wrapper.unmount()
  })

  it('shows the empty cart once a stored order no longer exists (404), and forgets it', async () => {
    localStorage.setItem('checkout:last-order', 'ord_gone')
    registerEndpoint('/api/orders/ord_gone', (event) => {
      setResponseStatus(event, 404)
      return { type: '/problems/not-found', status: 404 }
    })

    const wrapper = await mountSuspended(IndexPage)
    await vi.waitFor(() => expect(wrapper.find('[data-testid="pay"]').exists()).toBe(true))
    expect(wrapper.find('[data-testid="summary-opening"]').exists()).toBe(false)
    expect(wrapper.get('[data-testid="pay"]').text()).toBe('Pay IDR\u00A00')
    expect(localStorage.getItem('checkout:last-order')).toBeNull()
    wrapper.unmount()
  })
})

describe('checkout page: a Pay the server rejects', () => {
  it('shows shopper words, the email message once beside the field, and not the server\'s detail', async () => {
    const wrapper = await mountSuspended(IndexPage)
    await vi.waitFor(() => expect(wrapper.find('[data-testid="add-TEE-ORGANIC"]').exists()).toBe(true))
    await wrapper.get('[data-testid="add-TEE-ORGANIC"]').trigger('click')
    await wrapper.get('#email').setValue('not-an-email')
    await wrapper.get('form').trigger('submit')

    await vi.waitFor(() => expect(wrapper.find('[data-testid="problem-detail"]').exists()).toBe(true))
    expect(wrapper.get('[data-testid="problem-detail"]').text()).toBe('Your order was not placed yet. Fix what is marked above and press Pay again.')
    expect(wrapper.get('[data-testid="problem-detail"]').attributes('data-problem-type')).toBe('/problems/validation-failed')
    expect(wrapper.get('#email-error').text()).toBe('Enter a valid email address, like name@example.com.')
    expect(wrapper.get('#email').attributes('aria-invalid')).toBe('true')
    expect(wrapper.get('#email').attributes('aria-describedby')).toBe('email-error')
    const page = wrapper.text()
    expect(page.split('Enter a valid email address').length - 1).toBe(1)
    expect(page).not.toContain('Idempotency-Key')
    expect(page).not.toContain('Invalid email address')

    // Emptied, the field asks for an address instead.
    await wrapper.get('#email').setValue('')
    expect(wrapper.get('#email-error').text()).toBe('Enter your email address for the receipt.')
    wrapper.unmount()
  })
})

describe('checkout page: Approve payment', () => {
  it('keeps the button busy ("Approving…", aria-busy) from the click until the order is paid', async () => {
    localStorage.setItem('checkout:last-order', order.id)
    const wrapper = await mountSuspended(IndexPage)
    await vi.waitFor(() => expect(wrapper.find('[data-testid="mockpay-pay"]').exists()).toBe(true))

    await wrapper.get('[data-testid="mockpay-pay"]').trigger('click')
    await vi.waitFor(() => expect(confirmations).toBe(1))
    // mockpay answered; its webhook has not moved the order yet, so the page still waits.
    await vi.waitFor(() => expect(wrapper.get('[data-testid="mockpay-pay"]').text()).toBe('Approving…'))
    expect(wrapper.get('[data-testid="mockpay-pay"]').attributes('aria-busy')).toBe('true')
    expect(wrapper.get('[data-testid="mockpay-pay"]').attributes('disabled')).toBeDefined()
    expect(wrapper.get('[data-testid="mockpay-fail"]').attributes('disabled')).toBeDefined()

    orderAnswer = () => ({ ...order, status: 'paid' })
    await vi.waitFor(() => expect(wrapper.get('[data-testid="order-status"]').attributes('data-status')).toBe('paid'), { timeout: 3000 })
    expect(wrapper.get('[data-testid="mockpay-pay"]').text()).toBe('Approve payment')
    expect(wrapper.get('[data-testid="mockpay-pay"]').attributes('aria-busy')).toBeUndefined()
    expect(wrapper.get('[data-testid="mockpay-refund"]').attributes('disabled')).toBeUndefined()
    expect(confirmations).toBe(1)
    wrapper.unmount()
  })
})

describe('checkout page: no store to open', () => {
  it('with the demo store off (404), shoppers read a plain closed page, never the operator\'s words', async () => {
    sessionAnswer = event => answerProblem(event, 404, {
      type: '/problems/not-found',
      title: 'Not found',
      detail: 'The demo checkout is off here. Set CHECKOUT_DEMO_ENABLED=true (it is on by default only in embedded and development mode), or call the API with a secret key.',
    })

    const wrapper = await mountSuspended(IndexPage)
    await vi.waitFor(() => expect(wrapper.find('[data-testid="store-unavailable"]').exists()).toBe(true))
    const closed = wrapper.get('[data-testid="store-unavailable"]')
    expect(closed.attributes('data-reason')).toBe('closed')
    expect(closed.get('h1').text()).toBe('The store is closed')
    expect(closed.text()).toBe('The store is closed We are not taking orders here right now. Please come back later.')
    expect(wrapper.text()).not.toMatch(/CHECKOUT_DEMO_ENABLED|secret key|API/)
    expect(wrapper.find('[data-testid="pay"]').exists()).toBe(false)
    expect(wrapper.find('#catalogue-heading').exists()).toBe(false)
    wrapper.unmount()
  })

  it('a store that does not answer (503): try again later, in the same plain words', async () => {
    sessionAnswer = event => answerProblem(event, 503, { type: '/problems/service-unavailable', detail: 'The database is unreachable (ECONNREFUSED 10.0.0.5:5432).' })

    const wrapper = await mountSuspended(IndexPage)
    await vi.waitFor(() => expect(wrapper.find('[data-testid="store-unavailable"]').exists()).toBe(true))
    expect(wrapper.get('[data-testid="store-unavailable"]').attributes('data-reason')).toBe('unreachable')
    expect(wrapper.get('[data-testid="store-unavailable"]').text()).toBe('The store could not be opened We could not reach the shop just now. Reload the page to try again.')
    expect(wrapper.text()).not.toContain('ECONNREFUSED')
    wrapper.unmount()
  })
})

describe('checkout page: Cancel order', () => {
  const cancelPath = `/api/orders/${order.id}/cancel`
  /** The Idempotency-Key of every POST to the cancel route, and the answers it gives in turn. */
  let cancelKeys: Array<string | undefined>
  let cancelAnswers: Array<(event: H3Event) => unknown>
  let stopCancel: () => void
  beforeEach(() => {
    cancelKeys = []
    stopCancel = registerEndpoint(cancelPath, {
      method: 'POST',
      handler: (event) => {
        cancelKeys.push(getHeader(event, 'idempotency-key'))
        return cancelAnswers.shift()!(event)
      },
    })
  })
  afterEach(() => stopCancel())

  async function openOrderAndCancel() {
    localStorage.setItem('checkout:last-order', order.id)
    const wrapper = await mountSuspended(IndexPage)
    await vi.waitFor(() => expect(wrapper.find('[data-testid="cancel-order"]').exists()).toBe(true))
    await wrapper.get('[data-testid="cancel-order"]').trigger('click')
    await wrapper.get('[data-testid="cancel-confirm"]').trigger('click')
    return wrapper
  }

  it('a 503 then 200: the retry sends the same key; the order then reads canceled, and the intent ends', async () => {
    const canceled = { ...order, status: 'canceled' }
    cancelAnswers = [
      event => answerProblem(event, 503, { type: '/problems/service-unavailable', detail: 'Retry with the same key.' }),
      () => ({ ...canceled, idempotency: { key: cancelKeys[1], replayed: false } }),
    ]
    // As the server would: the order reads canceled once the second cancel was answered (the page
    // reads the order again right after it).
    orderAnswer = () => cancelKeys.length >= 2 ? canceled : order

    const wrapper = await openOrderAndCancel()
    // The first answer is not final: the page says it tries again, with the same request.
    await vi.waitFor(() => expect(cancelKeys).toHaveLength(2), { timeout: 3000 })
    await vi.waitFor(() => expect(wrapper.get('[data-testid="order-status"]').attributes('data-status')).toBe('canceled'))

    expect(cancelKeys[0]).toMatch(/^[0-9a-f-]{36}$/)
    expect(cancelKeys[1]).toBe(cancelKeys[0])
    expect(wrapper.get('[data-testid="result-heading"]').text()).toBe('Order canceled')
    expect(wrapper.get('[data-testid="order-status"]').text()).toBe('Canceled')
    expect(wrapper.get('[data-testid="canceled-note"]').text()).toBe('This order was canceled. Nothing will be charged for it.')
    expect(wrapper.find('[data-testid="cancel"]').exists()).toBe(false)
    expect(localStorage.getItem(`idempotent-intent:cancel:${order.id}`)).toBeNull()
    wrapper.unmount()
  })

  it('refused because the payment came first (409): the shopper\'s words, and the order as it is now (paid)', async () => {
    cancelAnswers = [event => answerProblem(event, 409, {
      type: '/problems/order-not-cancelable',
      title: 'Order not cancelable',
      detail: 'Order ord_01JZ8Q6T4V is paid: refund it with POST /api/orders/{id}/refunds.',
      orderStatus: 'paid',
      idempotency: { key: 'k', replayed: false },
    })]

    const wrapper = await openOrderAndCancel()
    orderAnswer = () => ({ ...order, status: 'paid' })
    await vi.waitFor(() => expect(wrapper.find('[data-testid="cancel-problem"]').exists()).toBe(true))
    await vi.waitFor(() => expect(wrapper.get('[data-testid="order-status"]').attributes('data-status')).toBe('paid'))

    expect(wrapper.get('[data-testid="cancel-problem"]').text()).toBe('Your payment arrived before the order could be canceled, so the order stands. Ask the shop for a refund if you no longer want it.')
    expect(wrapper.text()).not.toContain('POST /api/orders')
    expect(wrapper.find('[data-testid="cancel-order"]').exists()).toBe(false)
    expect(cancelKeys).toHaveLength(1)
    wrapper.unmount()
  })
})

describe('checkout page: stock', () => {
  const [tee, mug] = catalogue as [CatalogueItem, CatalogueItem]
  /** The store with `available` set per SKU. */
  const storeWith = (available: Record<string, number | null>) => ({ ...storeSession, catalogue: catalogue.map(item => ({ ...item, available: available[item.sku] ?? null })) })

  it('says "Only N left" at 5 or fewer, "Sold out" at 0 with its + disabled, nothing when plenty or untracked; the cart never takes more than is left', async () => {
    sessionAnswer = () => storeWith({ 'TEE-ORGANIC': 2, 'MUG-ENAMEL': 0 })
    const wrapper = await mountSuspended(IndexPage)
    await vi.waitFor(() => expect(wrapper.find(`[data-testid="stock-${tee.sku}"]`).exists()).toBe(true))
    expect(wrapper.get(`[data-testid="stock-${tee.sku}"]`).text()).toBe('Only 2 left')
    expect(wrapper.get(`[data-testid="stock-${mug.sku}"]`).text()).toBe('Sold out')
    expect(wrapper.get(`[data-testid="add-${mug.sku}"]`).attributes('disabled')).toBeDefined()
    expect(wrapper.get(`#qty-${mug.sku}`).attributes('disabled')).toBeDefined()

    const add = wrapper.get(`[data-testid="add-${tee.sku}"]`)
    await add.trigger('click')
    await add.trigger('click')
    expect(add.attributes('disabled')).toBeDefined()
    await add.trigger('click')
    expect(wrapper.get(`#qty-${tee.sku}`).attributes('max')).toBe('2')
    // A typed number is brought down to what is left.
    await wrapper.get(`#qty-${tee.sku}`).setValue('9')
    await wrapper.get(`#qty-${tee.sku}`).trigger('change')
    expect((wrapper.get(`#qty-${tee.sku}`).element as HTMLInputElement).value).toBe('2')
    expect(JSON.parse(localStorage.getItem('checkout:cart')!).quantities).toEqual({ [tee.sku]: 2 })
    wrapper.unmount()

    sessionAnswer = () => storeWith({ 'TEE-ORGANIC': 6, 'MUG-ENAMEL': null })
    const plenty = await mountSuspended(IndexPage)
    await vi.waitFor(() => expect(plenty.find(`[data-testid="add-${tee.sku}"]`).exists()).toBe(true))
    expect(plenty.findAll('[data-testid^="stock-"]')).toHaveLength(0)
    plenty.unmount()
  })

  it('a 409 insufficient-stock: the short and sold-out lines say how many are left (the store read again), Pay waits until the cart fits, and no generic error', async () => {
    const sessions: number[] = []
    // Plenty when the page opens; read again after the 409, the counts as they are now.
    sessionAnswer = () => sessions.push(sessions.length) === 1 ? storeSession : storeWith({ 'TEE-ORGANIC': 1, 'MUG-ENAMEL': 0 })
    const placed: unknown[] = []
    placeAnswer = async (event) => {
      placed.push(await readBody(event))
      return answerProblem(event, 409, {
        type: '/problems/insufficient-stock',
        title: 'Insufficient stock',
        detail: 'Not enough stock for MUG-ENAMEL (1 asked, 0 available), TEE-ORGANIC (2 asked, 1 available). Nothing was reserved: order fewer units or other items, under a new Idempotency-Key.',
        items: [{ sku: mug.sku, requested: 1, available: 0 }, { sku: tee.sku, requested: 2, available: 1 }],
        idempotency: { key: getHeader(event, 'idempotency-key'), replayed: false },
      })
    }
    const wrapper = await mountSuspended(IndexPage)
    await vi.waitFor(() => expect(wrapper.find(`[data-testid="add-${tee.sku}"]`).exists()).toBe(true))
    await wrapper.get(`[data-testid="add-${tee.sku}"]`).trigger('click')
    await wrapper.get(`[data-testid="add-${tee.sku}"]`).trigger('click')
    await wrapper.get(`[data-testid="add-${mug.sku}"]`).trigger('click')
    await wrapper.get('#email').setValue('shopper@example.com')
    await wrapper.get('form').trigger('submit')

    await vi.waitFor(() => expect(wrapper.find(`[data-testid="short-${tee.sku}"]`).exists()).toBe(true))
    expect(placed).toHaveLength(1)
    await vi.waitFor(() => expect(sessions).toHaveLength(2))
    expect(wrapper.get(`[data-testid="short-${tee.sku}"]`).text()).toBe('Only 1 left: lower the quantity to order.')
    expect(wrapper.get(`[data-testid="short-${mug.sku}"]`).text()).toBe('Sold out: remove it to order the rest.')
    expect(wrapper.get('[data-testid="problem-detail"]').text()).toBe('Some items sold out or ran low while you shopped, so nothing was ordered or charged. Change the marked items and press Pay again.')
    expect(wrapper.get(`[data-testid="stock-${mug.sku}"]`).text()).toBe('Sold out')
    expect(wrapper.get('[data-testid="pay"]').attributes('disabled')).toBeDefined()
    expect(wrapper.text()).not.toMatch(/Something went wrong|Idempotency-Key|asked/)

    // Down to what is left: the marks go, Pay is back.
    await wrapper.get(`[aria-label="One less ${tee.name}"]`).trigger('click')
    await wrapper.get(`[aria-label="One less ${mug.name}"]`).trigger('click')
    expect(wrapper.findAll('[data-testid^="short-"]')).toHaveLength(0)
    expect(wrapper.get('[data-testid="pay"]').attributes('disabled')).toBeUndefined()
    expect(wrapper.get('[data-testid="pay"]').text()).toBe('Pay IDR\u00A0149,000')
    wrapper.unmount()
  })
})
