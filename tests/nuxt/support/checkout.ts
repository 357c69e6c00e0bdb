import type { RefundView } from '#shared/orders'
import type { CatalogueItem, Order, StoreSession } from '~/composables/useCheckout'

/** The demo store as GET /api/checkout/session answers it (two of its products, plenty of each). */
export const catalogue: CatalogueItem[] = [
  { sku: 'TEE-ORGANIC', name: 'Organic cotton tee', description: 'Heavyweight, garment-dyed, made to last.', unitPrice: 149_000, available: 50 },
  { sku: 'MUG-ENAMEL', name: 'Enamel camp mug', description: 'Chip-resistant, 350 ml, stacks neatly.', unitPrice: 89_000, available: 50 },
]

export const storeSession: StoreSession = { tenant: { id: 'ten_demo_store', name: 'Demo store' }, currency: 'IDR', catalogue, mockpay: true, faults: false }

/** 2 tees and a mug, awaiting payment at mockpay. */
export function placedOrder(overrides: Partial<Order> = {}): Order {
  return {
    id: 'ord_01JZ8Q6T4V',
    object: 'order',
    status: 'pending_payment',
    cartId: 'cart_1',
    currency: 'IDR',
    amount: 387_000,
    paymentMethod: 'card',
    items: [{ sku: 'TEE-ORGANIC', quantity: 2, unitPrice: 149_000 }, { sku: 'MUG-ENAMEL', quantity: 1, unitPrice: 89_000 }],
    customer: { email: 'shopper@example.com' },
    createdAt: '2026-12-01T10:00:00.000Z',
    paymentIntentId: 'pi_1',
    payment: { provider: 'mockpay', id: 'pi_1', nextAction: { type: 'mockpay' }, error: null, status: 'ready' },
    cancelReason: null,
    amountRefunded: 0,
    refunds: [],
    reservations: [],
    ...overrides,
  }
}

/** A refund of the placed order, made through the API and settled by the provider. */
export function refundOf(overrides: Partial<RefundView> = {}): RefundView {
  return {
    id: 're_01JZ8R1',
    object: 'refund',
    orderId: 'ord_01JZ8Q6T4V',
    amount: 100_000,
    currency: 'IDR',
    status: 'succeeded',
    reason: 'requested_by_customer',
    source: 'api',
    createdAt: '2026-12-01T11:00:00.000Z',
    ...overrides,
  }
}

/** A promise with its resolve: lets a test hold an endpoint's answer while it looks at the page. */
export function deferred<T = void>() {
  let resolve!: (value: T) => void
  const promise = new Promise<T>((done) => {
    resolve = done
  })
  return { promise, resolve }
}
