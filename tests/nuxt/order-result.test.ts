import { mountSuspended } from '@nuxt/test-utils/runtime'
import type { DOMWrapper } from '@vue/test-utils'
import { describe, expect, it } from 'vitest'
import OrderResult from '~/components/checkout/OrderResult.vue'
import { catalogue, placedOrder } from './support/checkout'

/** Intl writes a no-break space between the currency code and the amount. */
const idr = (amount: string) => `IDR\u00A0${amount}`
const rowsOf = (wrapper: Awaited<ReturnType<typeof mountSuspended>>, part: 'thead' | 'tbody' | 'tfoot') =>
  wrapper.findAll(`[data-testid="order-items"] ${part} tr`).map((row: DOMWrapper<Element>) => row.findAll('th, td').map((cell: DOMWrapper<Element>) => cell.text()))

describe('OrderResult', () => {
  it('shows the order id and its payment status in words', async () => {
    const wrapper = await mountSuspended(OrderResult, { props: { order: placedOrder({ paymentIntentId: null, payment: null }), catalogue, mockpay: false } })

    expect(wrapper.get('[data-testid="order-id"]').text()).toBe('ord_01JZ8Q6T4V')
    expect(wrapper.get('[data-testid="order-status"]').text()).toBe('Awaiting payment')
    expect(wrapper.get('[data-testid="order-status"]').attributes('data-status')).toBe('pending_payment')
    expect(wrapper.find('[data-testid="mockpay"]').exists()).toBe(false)
  })

  it('lists each item by name with its quantity, unit price and line total, then the order total', async () => {
    const wrapper = await mountSuspended(OrderResult, { props: { order: placedOrder(), catalogue, mockpay: true } })

    expect(rowsOf(wrapper, 'thead')).toEqual([['Item', 'Qty', 'Price', 'Total']])
    expect(rowsOf(wrapper, 'tbody')).toEqual([
      ['Organic cotton tee', '2', idr('149,000'), idr('298,000')],
      ['Enamel camp mug', '1', idr('89,000'), idr('89,000')],
    ])
    expect(rowsOf(wrapper, 'tfoot')).toEqual([['Total', idr('387,000')]])
  })

  it('names an item the catalogue no longer has by its sku', async () => {
    const order = placedOrder({ amount: 10_000, items: [{ sku: 'RETIRED-1', quantity: 1, unitPrice: 10_000 }] })
    const wrapper = await mountSuspended(OrderResult, { props: { order, catalogue, mockpay: false } })

    expect(rowsOf(wrapper, 'tbody')).toEqual([['RETIRED-1', '1', idr('10,000'), idr('10,000')]])
  })

  it('while an approval is under way: that button says "Approving…" and is busy, and every mockpay button is disabled', async () => {
    const wrapper = await mountSuspended(OrderResult, { props: { order: placedOrder(), catalogue, mockpay: true, providerAction: 'succeed' } })

    const buttons = wrapper.findAll('[data-testid="mockpay"] button').map(button => ({
      text: button.text(),
      disabled: button.attributes('disabled') !== undefined,
      busy: button.attributes('aria-busy'),
    }))
    expect(buttons).toEqual([
      { text: 'Approving…', disabled: true, busy: 'true' },
      { text: 'Decline payment', disabled: true, busy: undefined },
      { text: 'Refund', disabled: true, busy: undefined },
    ])
  })

  it('with nothing under way: Approve and Decline are enabled on a pending order, Refund is not', async () => {
    const wrapper = await mountSuspended(OrderResult, { props: { order: placedOrder(), catalogue, mockpay: true } })

    const buttons = wrapper.findAll('[data-testid="mockpay"] button').map(button => [button.text(), button.attributes('disabled') !== undefined, button.attributes('aria-busy')])
    expect(buttons).toEqual([['Approve payment', false, undefined], ['Decline payment', false, undefined], ['Refund', true, undefined]])
  })
})
