import { appendResponseHeader } from 'h3'
import { computed, onBeforeUnmount, reactive, ref, watch } from 'vue'
import type { OrderView } from '#shared/orders'
import { newIdempotencyKey, type Problem, useIdempotentRequest } from './useIdempotentRequest'

/**
 * The demo store's checkout: the session, the cart (kept in localStorage so a reload or another tab
 * sees the same cart), paying through useIdempotentRequest, then the order with its payment status
 * polled live, and mockpay's buttons where the simulated provider is on.
 */

/** A product of the store; `available` is what an order can take now, null when the shop does not count its stock. */
export interface CatalogueItem { sku: string, name: string, description: string, unitPrice: number, available: number | null }

/** At or below this many left, the shop says how many. */
export const LOW_STOCK = 5
/** The most of one item a cart holds (the quantity field's max). */
const MAX_QUANTITY = 99

/** The most of an item the cart may hold: what is available, when counted. */
export const maxQuantityOf = (item: CatalogueItem) => Math.min(MAX_QUANTITY, item.available ?? MAX_QUANTITY)

export interface StoreSession {
  tenant: { id: string, name: string }
  currency: string
  catalogue: CatalogueItem[]
  mockpay: boolean
  faults: boolean
}

/**
 * The order as GET /api/orders/:id answers it. POST /api/orders answers it without `payment`,
 * `paymentIntentId` (the worker has not asked the provider yet) and its refunds: read as absent until a poll.
 */
type ReadLater = 'paymentIntentId' | 'payment' | 'amountRefunded' | 'refunds'
export type Order = Omit<OrderView, ReadLater> & Partial<Pick<OrderView, ReadLater>>

export type PaymentMethod = 'card' | 'bank_transfer' | 'ewallet'

/** The payment methods in the order the form offers them, with the words both the form and the placed order use. */
export const paymentMethodLabels: Record<PaymentMethod, string> = { card: 'Card', bank_transfer: 'Bank transfer', ewallet: 'E-wallet' }

export interface Cart {
  cartId: string
  quantities: Record<string, number>
  email: string
  paymentMethod: PaymentMethod
}

/** A test fault for the next Pay (X-Fault), shown in the "network trouble" panel when faults are on. */
export type NetworkTrouble = 'none' | 'drop-after-commit' | 'delay-before-commit'

const STORE_PATH = '/api/checkout/session'
const CART_KEY = 'checkout:cart'
const LAST_ORDER_KEY = 'checkout:last-order'
const POLL_MS = 1000
const SLOW_COMMIT_MS = 4000
/** A provider action whose webhook never moves the order gives the buttons back after this long. */
const PROVIDER_ACTION_MAX_MS = 20_000
/** Statuses after which nothing more happens to an order. */
const settled = new Set(['refunded'])
/** An order not paid yet: the shopper may still cancel it. */
export const cancelableStatuses = new Set(['pending_payment', 'payment_failed'])

const newCart = (): Cart => ({ cartId: `cart_${newIdempotencyKey()}`, quantities: {}, email: '', paymentMethod: 'card' })

function readJson<T>(key: string): T | undefined {
  try {
    return JSON.parse(localStorage.getItem(key) ?? 'null') ?? undefined
  }
  catch {
    return undefined
  }
}

export function formatMoney(amount: number, currency: string): string {
  return new Intl.NumberFormat('en-US', { style: 'currency', currency, maximumFractionDigits: 0 }).format(amount)
}

export type ProviderAction = 'succeed' | 'fail' | 'refund'

/** A failed Pay in the shopper's words: one summary, and each field's message next to that field. */
export interface ShopperProblem {
  /** The problem type (`/problems/<slug>`), or `network` when no answer was final. */
  type: string
  summary: string
  fields: { email?: string, paymentMethod?: string }
  /** Problems of the cart itself, listed under the summary. */
  cart: string[]
}

const tryAgainLater = 'We could not reach the shop just now. Your order may already have gone through: press Pay again and it will be placed once, never twice.'
const somethingBroke = 'Something went wrong on our side while sending your order. Reload the page and press Pay again.'
const visitExpired = 'Your visit to the store has expired. Reload the page to continue.'
const shopperSummaries: Record<string, string> = {
  'validation-failed': 'Your order was not placed yet. Fix what is marked above and press Pay again.',
  'idempotency-key-reused': 'Your cart changed after an earlier attempt to pay. Press Pay again to order the cart as it is now.',
  'unauthorized': visitExpired,
  'not-found': 'The store is not open right now. Please come back later.',
  'payload-too-large': 'Your cart is too large to order at once. Remove some items and press Pay again.',
  'currency-not-supported': 'The store cannot take payments for this order right now. Nothing was charged; please come back later.',
  'insufficient-stock': 'Some items sold out or ran low while you shopped, so nothing was ordered or charged. Change the marked items and press Pay again.',
}
const cancelSummaries: Record<string, string> = {
  'order-not-cancelable': 'Your payment arrived before the order could be canceled, so the order stands. Ask the shop for a refund if you no longer want it.',
  'unauthorized': visitExpired,
  'not-found': 'This order could not be found any more. Reload the page to see your order.',
}

/** Whether a failure is one where the request may or may not have gone through (no final answer). */
const unanswered = (type: string, status: number) => type === 'network' || status >= 500 || status === 429

/** The problem type of a failed request, or `network` when no answer was final. */
const problemType = (problem: Problem | undefined) =>
  typeof problem?.type === 'string' && problem.type.startsWith('/problems/') ? problem.type : 'network'

/**
 * The page's words for a failed Pay. The server's `detail` speaks to API clients (keys, headers);
 * a shopper gets what to do next, per problem type and field.
 */
export function shopperProblem(snapshot: { phase: string, problem?: Problem }, email: string): ShopperProblem | undefined {
  if (snapshot.phase !== 'failed') return undefined
  const problem = snapshot.problem
  const type = problemType(problem)
  const slug = type.slice('/problems/'.length)
  const summary = shopperSummaries[slug] ?? (unanswered(type, problem?.status ?? 0) ? tryAgainLater : somethingBroke)
  const fields: ShopperProblem['fields'] = {}
  const cart = new Set<string>()
  for (const error of slug === 'validation-failed' ? problem?.errors ?? [] : []) {
    if (error.path === 'customer.email') fields.email = email.trim() ? 'Enter a valid email address, like name@example.com.' : 'Enter your email address for the receipt.'
    else if (error.path === 'paymentMethod') fields.paymentMethod = 'Choose a payment method.'
    else if (error.path === 'amount' || error.path.startsWith('items')) cart.add('Your cart no longer matches the shop\'s prices. Reload the page to see the current total.')
    else cart.add(somethingBroke)
  }
  return { type, summary, fields, cart: [...cart] }
}

/** The page's words for a failed Cancel order, per problem type. */
export function shopperCancelProblem(snapshot: { phase: string, problem?: Problem }): { type: string, summary: string } | undefined {
  if (snapshot.phase !== 'failed') return undefined
  const type = problemType(snapshot.problem)
  const summary = cancelSummaries[type.slice('/problems/'.length)] ?? (unanswered(type, snapshot.problem?.status ?? 0)
    ? 'We could not reach the shop just now. Press Cancel order again: the order is canceled once, however often you press it.'
    : 'Something went wrong on our side while canceling your order. Reload the page and try again.')
  return { type, summary }
}

/** What GET /api/checkout/session answered: the store, or why there is none to open. */
type StoreAnswer = { session: StoreSession } | { unavailable: 'closed' | 'unreachable' }

export function useCheckout() {
  // On the server the store is read through the page's own request, and the session cookie it sets
  // goes to the browser with the page (setup-time only: capture them now).
  const requestCookie = import.meta.server ? useRequestHeaders(['cookie']) : undefined
  const requestEvent = import.meta.server ? useRequestEvent() : undefined
  const session = ref<StoreSession>()
  /** Why the store cannot open: `closed` where there is no store to open here (404), else `unreachable`. */
  const storeUnavailable = ref<'closed' | 'unreachable'>()
  const cart = reactive<Cart>(newCart())
  const order = ref<Order>()
  /** Set when the shown order came from a replay or from an earlier order of the same cart. */
  const orderNote = ref<string>()
  const trouble = ref<NetworkTrouble>('none')
  /** The provider action asked for, from the click until the order's status moves or an error shows. */
  const providerAction = ref<ProviderAction>()
  const providerError = ref<string>()
  /**
   * Until the page knows what to show: `store` while the store opens, `order` while a stored order
   * or a Pay in flight is being resumed after a reload (never an empty cart meanwhile).
   */
  const opening = ref<'store' | 'order' | false>('store')

  const request = useIdempotentRequest<Order>({ url: '/api/orders', intentName: () => `checkout:${cart.cartId}` })
  /** One intent per order: every press of Cancel order for it, and the retries, share its key. */
  const cancelRequest = useIdempotentRequest<Order>({
    url: () => `/api/orders/${encodeURIComponent(order.value!.id)}/cancel`,
    intentName: () => `cancel:${order.value?.id}`,
  })

  /** The cart's items; `short` when the cart holds more than is available (a restored cart, or a 409 insufficient-stock). */
  const lines = computed(() => (session.value?.catalogue ?? [])
    .filter(item => (cart.quantities[item.sku] ?? 0) > 0)
    .map((item) => {
      const quantity = cart.quantities[item.sku]!
      return { ...item, quantity, total: item.unitPrice * quantity, short: item.available !== null && quantity > item.available }
    }))
  /** Pay waits until no line asks for more than there is. */
  const shortLines = computed(() => lines.value.filter(line => line.short))
  const total = computed(() => lines.value.reduce((sum, line) => sum + line.total, 0))
  const busy = computed(() => ['submitting', 'retrying'].includes(request.state.value.phase))
  const canceling = computed(() => ['submitting', 'retrying'].includes(cancelRequest.state.value.phase))

  const orderBody = () => ({
    cartId: cart.cartId,
    currency: session.value!.currency,
    amount: total.value,
    paymentMethod: cart.paymentMethod,
    items: lines.value.map(line => ({ sku: line.sku, quantity: line.quantity, unitPrice: line.unitPrice })),
    customer: { email: cart.email.trim() },
  })

  watch(cart, value => localStorage.setItem(CART_KEY, JSON.stringify(value)), { deep: true })

  /** Never more than is available: the + stops there, and a typed number is brought down to it. */
  function setQuantity(sku: string, quantity: number) {
    const item = session.value?.catalogue.find(product => product.sku === sku)
    cart.quantities[sku] = Math.max(0, Math.min(item ? maxQuantityOf(item) : MAX_QUANTITY, Math.floor(quantity) || 0))
  }

  /** GET /api/checkout/session: in the browser its cookie is kept by the browser, on the server passed on with the page. */
  async function readStore(): Promise<StoreAnswer> {
    if (requestEvent) {
      try {
        // The renderer's own $fetch calls the route in-process, with the shopper's cookie (a session to renew).
        const response = await $fetch.raw<StoreSession>(STORE_PATH as string, { headers: requestCookie })
        for (const cookie of response.headers.getSetCookie()) appendResponseHeader(requestEvent, 'set-cookie', cookie)
        return { session: response._data! }
      }
      catch (error) {
        return { unavailable: (error as { response?: Response }).response?.status === 404 ? 'closed' : 'unreachable' }
      }
    }
    try {
      const response = await fetch(STORE_PATH, { credentials: 'same-origin' })
      if (response.ok) return { session: await response.json() }
      return { unavailable: response.status === 404 ? 'closed' : 'unreachable' }
    }
    catch {
      return { unavailable: 'unreachable' }
    }
  }

  /**
   * Opens the store while the page is set up: rendered on the server, the catalogue is in the page's
   * HTML (and its payload), so the shop shows before the page's script runs. Call it in setup.
   */
  async function openStore() {
    const { data } = await useAsyncData('checkout:store', readStore)
    const answer = data.value
    if (answer && 'session' in answer) session.value = answer.session
    else if (answer) storeUnavailable.value = answer.unavailable
  }

  /** Reads the store again: what is available now (after an order, or a refused one). A failure keeps what is shown. */
  async function refreshStore() {
    const answer = await readStore()
    if ('session' in answer) session.value = answer.session
  }

  /** A 409 insufficient-stock: its counts at once, then the whole store as it is now. */
  function showShortItems(items: unknown) {
    const shown = session.value
    if (shown && Array.isArray(items)) {
      const available = new Map((items as Array<{ sku: string, available: number }>).map(item => [item.sku, item.available]))
      session.value = { ...shown, catalogue: shown.catalogue.map(item => (available.has(item.sku) ? { ...item, available: available.get(item.sku)! } : item)) }
    }
    return refreshStore()
  }

  let pollTimer: ReturnType<typeof setTimeout> | undefined
  let providerActionTimer: ReturnType<typeof setTimeout> | undefined
  function endProviderAction() {
    clearTimeout(providerActionTimer)
    providerAction.value = undefined
  }

  /** Reads the order; false when it does not exist (any more) for this session. */
  async function refreshOrder(orderId: string): Promise<boolean> {
    clearTimeout(pollTimer)
    let found = true
    try {
      const response = await fetch(`/api/orders/${encodeURIComponent(orderId)}`, { credentials: 'same-origin' })
      if (response.ok) {
        const previous = order.value
        order.value = await response.json()
        if (previous?.id === orderId && previous.status !== order.value!.status) endProviderAction()
      }
      found = response.status !== 404
    }
    catch {
      // Offline for a moment: the next poll tries again.
    }
    if (order.value?.id === orderId && !settled.has(order.value.status)) pollTimer = setTimeout(() => void refreshOrder(orderId), POLL_MS)
    return found
  }

  function showOrder(placed: Order, note?: string) {
    order.value = placed
    orderNote.value = note
    localStorage.setItem(LAST_ORDER_KEY, placed.id)
    // The intent ended with this order: the next purchase is a new cart and a new key.
    Object.assign(cart, newCart())
    void refreshOrder(placed.id)
    // The order took its units: the shop shows what is left.
    void refreshStore()
  }

  async function settle(outcome: Promise<ReturnType<typeof request.snapshot>>) {
    const snapshot = await outcome
    if (snapshot.phase === 'succeeded' && snapshot.result) {
      showOrder(snapshot.result.body, snapshot.replayed ? 'replayed' : undefined)
    }
    else if (snapshot.phase === 'failed' && snapshot.problem?.type === '/problems/cart-already-ordered' && typeof snapshot.problem.orderId === 'string') {
      // Another tab or an earlier key already ordered this cart: that order is the answer.
      await refreshOrder(snapshot.problem.orderId)
      if (order.value) showOrder(order.value, 'already-ordered')
    }
    else if (snapshot.phase === 'failed' && snapshot.problem?.type === '/problems/insufficient-stock') {
      await showShortItems(snapshot.problem.items)
    }
  }

  async function pay() {
    if (!session.value || busy.value || shortLines.value.length) return
    orderNote.value = undefined
    const fault = trouble.value === 'delay-before-commit' ? `delay-before-commit=${SLOW_COMMIT_MS}` : trouble.value === 'drop-after-commit' ? 'drop-after-commit' : undefined
    await settle(request.submit(orderBody(), { firstAttemptHeaders: fault ? { 'x-fault': fault } : {} }))
  }

  /** Cancels the shown order (not paid yet); a paid one stays, and the page says so. */
  async function cancelOrder() {
    const shown = order.value
    if (!shown || !cancelableStatuses.has(shown.status)) return
    await settleCancel(shown.id, cancelRequest.submit({}))
  }

  async function settleCancel(orderId: string, outcome: Promise<ReturnType<typeof cancelRequest.snapshot>>) {
    const snapshot = await outcome
    if (order.value?.id !== orderId) return
    if (snapshot.phase === 'succeeded' && snapshot.result) order.value = { ...order.value, ...snapshot.result.body }
    // Canceled or not, the order as it stands now (its payment, or the payment that came first).
    if (snapshot.phase === 'succeeded' || snapshot.phase === 'failed') void refreshOrder(orderId)
  }

  /** Asks mockpay for the action; the order moves when its webhook arrives (about a second later). */
  async function provider(action: ProviderAction) {
    const intentId = order.value?.paymentIntentId
    if (!intentId || providerAction.value) return
    providerAction.value = action
    providerError.value = undefined
    clearTimeout(providerActionTimer)
    providerActionTimer = setTimeout(endProviderAction, PROVIDER_ACTION_MAX_MS)
    try {
      const path = action === 'refund' ? 'refund' : 'confirm'
      const response = await fetch(`/api/mockpay/intents/${encodeURIComponent(intentId)}/${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(action === 'refund' ? {} : { outcome: action }),
      })
      if (!response.ok) {
        providerError.value = ((await response.json().catch(() => ({}))) as Problem).detail ?? `The provider answered ${response.status}.`
        endProviderAction()
      }
    }
    catch {
      providerError.value = 'The payment provider could not be reached. Try again.'
      endProviderAction()
    }
    if (order.value) void refreshOrder(order.value.id)
  }

  function startOver() {
    clearTimeout(pollTimer)
    endProviderAction()
    order.value = undefined
    orderNote.value = undefined
    localStorage.removeItem(LAST_ORDER_KEY)
    request.forget()
    cancelRequest.forget()
    // A canceled order gave its units back: the new cart starts from the counts as they are now.
    void refreshStore()
  }

  async function start() {
    const saved = readJson<Cart>(CART_KEY)
    if (saved?.cartId) Object.assign(cart, saved)
    const lastOrder = localStorage.getItem(LAST_ORDER_KEY)
    if (lastOrder || request.pendingIntent()) opening.value = 'order'
    // Opened while the page was set up (on the server, or in the browser after a client-side navigation).
    if (!session.value) {
      opening.value = false
      return
    }
    // A Pay that was still in flight when the page went away is resumed with its key: the form
    // shows its cart while it is placed.
    const resumed = request.resume()
    if (resumed) {
      opening.value = false
      return settle(resumed)
    }
    if (lastOrder && !await refreshOrder(lastOrder)) localStorage.removeItem(LAST_ORDER_KEY)
    opening.value = false
    // A Cancel order still unanswered when the page went away goes on with its key.
    const canceled = order.value && cancelRequest.resume()
    if (canceled) await settleCancel(order.value!.id, canceled)
  }

  onBeforeUnmount(() => {
    clearTimeout(pollTimer)
    clearTimeout(providerActionTimer)
  })

  return {
    session,
    storeUnavailable,
    cart,
    lines,
    shortLines,
    total,
    busy,
    opening,
    request: request.state,
    cancel: cancelRequest.state,
    canceling,
    order,
    orderNote,
    trouble,
    providerAction,
    providerError,
    setQuantity,
    pay,
    cancelOrder,
    provider,
    startOver,
    openStore,
    start,
  }
}
