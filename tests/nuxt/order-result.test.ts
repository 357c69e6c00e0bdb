import { mountSuspended } from '@nuxt/test-utils/runtime'
import { describe, expect, it } from 'vitest'
import OrderResult from '~/components/checkout/OrderResult.vue'
import type { Order } from '~/composables/useCheckout'

const order: Order = {
  id: 'ord_01JZ8Q6T4V',
  status: 'pending_payment',
  cartId: 'cart_1',
  currency: 'IDR',
  amount: 250000,
  items: [{ sku: 'tee', quantity: 2, unitPrice: 125000 }],
  customer: { email: 'ana@example.com' },
  createdAt: '2026-12-01T10:00:00.000Z',
  paymentIntentId: null,
  payment: null,
}

describe('OrderResult', () => {
  it('shows the order id, its total and its payment status in words', async () => {
    const wrapper = await mountSuspended(OrderResult, { props: { order, mockpay: false, providerBusy: false } })

    expect(wrapper.get('[data-testid="order-id"]').text()).toBe('ord_01JZ8Q6T4V')
    expect(wrapper.get('[data-testid="order-status"]').text()).toBe('Awaiting payment')
    expect(wrapper.get('[data-testid="order-status"]').attributes('data-status')).toBe('pending_payment')
    expect(wrapper.find('[data-testid="mockpay"]').exists()).toBe(false)
  })
})
