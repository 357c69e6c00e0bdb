import { computed, onBeforeUnmount, reactive, ref, watch } from 'vue'
import { newIdempotencyKey, type Problem, useIdempotentRequest } from './useIdempotentRequest'

/**
 * The demo store's checkout: the session, the cart (kept in localStorage so a reload or another tab
 * sees the same cart), paying through useIdempotentRequest, then the order with its payment status
 * polled live, and mockpay's buttons where the simulated provider is on.
 */

export interface CatalogueItem { sku: string, name: string, description: string, unitPrice: number }

export interface StoreSession {
  tenant: { id: string, name: string }
  currency: string
  catalogue: CatalogueItem[]
  mockpay: boolean
  faults: boolean
}

export interface Order {
  id: string
  status: string
  cartId: string
  currency: string
  amount: number
  items: Array<{ sku: string, quantity: number, unitPrice: number }>
  customer: { email: string }
  createdAt: string
  paymentIntentId?: string | null
  payment?: OrderPayment | null
}

/** The order's payment at its provider, as GET /api/orders/:id answers it once the worker asked. */
export interface OrderPayment {
  provider: 'mockpay' | 'stripe' | 'midtrans'
  id: string | null
  nextAction:
    | { type: 'mockpay' }
    | { type: 'stripe_client_secret', clientSecret: string }
    | { type: 'midtrans_bank_transfer', bank: string, vaNumber: string, expiresAt?: string }
    | { type: 'midtrans_actions', actions: Array<{ name: string, method: string, url: string }>, expiresAt?: string }
    | null
  error: { code: string, message: string } | null
}

export interface Cart {
  cartId: string
  quantities: Record<string, number>
  email: string
  paymentMethod: 'card' | 'bank_transfer' | 'ewallet'
}

/** A test fault for the next Pay (X-Fault), shown in the "network trouble" panel when faults are on. */
export type NetworkTrouble = 'none' | 'drop-after-commit' | 'delay-before-commit'

const CART_KEY = 'checkout:cart'
const LAST_ORDER_KEY = 'checkout:last-order'
const POLL_MS = 1000
const SLOW_COMMIT_MS = 4000
/** Statuses after which nothing more happens to an order. */
const settled = new Set(['refunded'])

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

export function useCheckout() {
  const session = ref<StoreSession>()
  const sessionError = ref<string>()
  const cart = reactive<Cart>(newCart())
  const order = ref<Order>()
  /** Set when the shown order came from a replay or from an earlier order of the same cart. */
  const orderNote = ref<string>()
  const trouble = ref<NetworkTrouble>('none')
  const providerBusy = ref(false)
  const providerError = ref<string>()

  const request = useIdempotentRequest<Order>({ url: '/api/orders', intentName: () => `checkout:${cart.cartId}` })

  const lines = computed(() => (session.value?.catalogue ?? [])
    .filter(item => (cart.quantities[item.sku] ?? 0) > 0)
    .map(item => ({ ...item, quantity: cart.quantities[item.sku]!, total: item.unitPrice * cart.quantities[item.sku]! })))
  const total = computed(() => lines.value.reduce((sum, line) => sum + line.total, 0))
  const busy = computed(() => ['submitting', 'retrying'].includes(request.state.value.phase))

  const orderBody = () => ({
    cartId: cart.cartId,
    currency: session.value!.currency,
    amount: total.value,
    paymentMethod: cart.paymentMethod,
    items: lines.value.map(line => ({ sku: line.sku, quantity: line.quantity, unitPrice: line.unitPrice })),
    customer: { email: cart.email.trim() },
  })

  watch(cart, value => localStorage.setItem(CART_KEY, JSON.stringify(value)), { deep: true })

  function setQuantity(sku: string, quantity: number) {
    cart.quantities[sku] = Math.max(0, Math.min(99, Math.floor(quantity) || 0))
  }

  let pollTimer: ReturnType<typeof setTimeout> | undefined
  async function refreshOrder(orderId: string) {
    clearTimeout(pollTimer)
    try {
      const response = await fetch(`/api/orders/${encodeURIComponent(orderId)}`, { credentials: 'same-origin' })
      if (response.ok) order.value = await response.json()
    }
    catch {
      // Offline for a moment: the next poll tries again.
    }
    if (order.value?.id === orderId && !settled.has(order.value.status)) pollTimer = setTimeout(() => void refreshOrder(orderId), POLL_MS)
  }

  function showOrder(placed: Order, note?: string) {
    order.value = placed
    orderNote.value = note
    localStorage.setItem(LAST_ORDER_KEY, placed.id)
    // The intent ended with this order: the next purchase is a new cart and a new key.
    Object.assign(cart, newCart())
    void refreshOrder(placed.id)
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
  }

  async function pay() {
    if (!session.value || busy.value) return
    orderNote.value = undefined
    const fault = trouble.value === 'delay-before-commit' ? `delay-before-commit=${SLOW_COMMIT_MS}` : trouble.value === 'drop-after-commit' ? 'drop-after-commit' : undefined
    await settle(request.submit(orderBody(), { firstAttemptHeaders: fault ? { 'x-fault': fault } : {} }))
  }

  async function provider(action: 'succeed' | 'fail' | 'refund') {
    const intentId = order.value?.paymentIntentId
    if (!intentId) return
    providerBusy.value = true
    providerError.value = undefined
    try {
      const path = action === 'refund' ? 'refund' : 'confirm'
      const response = await fetch(`/api/mockpay/intents/${encodeURIComponent(intentId)}/${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(action === 'refund' ? {} : { outcome: action }),
      })
      if (!response.ok) providerError.value = ((await response.json().catch(() => ({}))) as Problem).detail ?? `The provider answered ${response.status}.`
      void refreshOrder(order.value!.id)
    }
    finally {
      providerBusy.value = false
    }
  }

  function startOver() {
    clearTimeout(pollTimer)
    order.value = undefined
    orderNote.value = undefined
    localStorage.removeItem(LAST_ORDER_KEY)
    request.forget()
  }

  async function start() {
    const saved = readJson<Cart>(CART_KEY)
    if (saved?.cartId) Object.assign(cart, saved)
    try {
      const response = await fetch('/api/checkout/session', { credentials: 'same-origin' })
      const body = await response.json()
      if (!response.ok) throw new Error((body as Problem).detail ?? `HTTP ${response.status}`)
      session.value = body
    }
    catch (error) {
      sessionError.value = `The store could not be opened: ${(error as Error).message}`
      return
    }
    // A Pay that was still in flight when the page went away is resumed with its key.
    const resumed = request.resume()
    if (resumed) return settle(resumed)
    const lastOrder = localStorage.getItem(LAST_ORDER_KEY)
    if (lastOrder) await refreshOrder(lastOrder)
  }

  onBeforeUnmount(() => clearTimeout(pollTimer))

  return { session, sessionError, cart, lines, total, busy, request: request.state, order, orderNote, trouble, providerBusy, providerError, setQuantity, pay, provider, startOver, start }
}
