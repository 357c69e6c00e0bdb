import { mountSuspended } from '@nuxt/test-utils/runtime'
import type { DOMWrapper } from '@vue/test-utils'
import { describe, expect, it } from 'vitest'
import OrderResult from '~/components/checkout/OrderResult.vue'
import type { OrderPaymentView } from '#shared/orders'
import { catalogue, placedOrder, refundOf } from './support/checkout'

/** Intl writes a no-break space between the currency code and the amount. */
const idr = (amount: string) => `IDR\u00A0${amount}`
type Wrapper = Awaited<ReturnType<typeof mountSuspended>>
/** The order's facts as the shopper reads them: each term with its value. */
const factsOf = (wrapper: Wrapper) => {
  const terms = wrapper.findAll('dt').map((term: DOMWrapper<Element>) => term.text())
  const values = wrapper.findAll('dd').map((value: DOMWrapper<Element>) => value.text())
  return Object.fromEntries(terms.map((term: string, index: number) => [term, values[index]]))
}
const rowsOf = (wrapper: Wrapper, part: 'thead' | 'tfoot') =>
  wrapper.findAll(`[data-testid="order-items"] ${part} tr`).map((row: DOMWrapper<Element>) => row.findAll('th, td').map((cell: DOMWrapper<Element>) => cell.text()))
/** Each item row: its name, quantity × unit price (the line under the name), and its total. */
const itemsOf = (wrapper: Wrapper) => wrapper.findAll('[data-testid="order-items"] tbody tr').map((row: DOMWrapper<Element>) =>
  ['item-name', 'item-each', 'item-total'].map(part => row.get(`[data-testid="${part}"]`).text()))

describe('OrderResult', () => {
  it('shows the order id and its payment status in words', async () => {
    const wrapper = await mountSuspended(OrderResult, { props: { order: placedOrder({ paymentIntentId: null, payment: null }), catalogue, mockpay: false } })

    expect(wrapper.get('[data-testid="order-id"]').text()).toBe('ord_01JZ8Q6T4V')
    expect(wrapper.get('[data-testid="order-status"]').text()).toBe('Awaiting payment')
    expect(wrapper.get('[data-testid="order-status"]').attributes('data-status')).toBe('pending_payment')
    expect(wrapper.find('[data-testid="mockpay"]').exists()).toBe(false)
  })

  it('lists each item by name with its quantity × unit price under it and its line total, then the order total', async () => {
    const wrapper = await mountSuspended(OrderResult, { props: { order: placedOrder(), catalogue, mockpay: true } })

    expect(rowsOf(wrapper, 'thead')).toEqual([['Item', 'Total']])
    expect(itemsOf(wrapper)).toEqual([
      ['Organic cotton tee', `2 × ${idr('149,000')}`, idr('298,000')],
      ['Enamel camp mug', `1 × ${idr('89,000')}`, idr('89,000')],
    ])
    expect(rowsOf(wrapper, 'tfoot')).toEqual([['Total', idr('387,000')]])
  })

  it('names an item the catalogue no longer has by its sku', async () => {
    const order = placedOrder({ amount: 10_000, items: [{ sku: 'RETIRED-1', quantity: 1, unitPrice: 10_000 }] })
    const wrapper = await mountSuspended(OrderResult, { props: { order, catalogue, mockpay: false } })

    expect(itemsOf(wrapper)).toEqual([['RETIRED-1', `1 × ${idr('10,000')}`, idr('10,000')]])
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

  it('names the payment method the order was placed with', async () => {
    const wrapper = await mountSuspended(OrderResult, { props: { order: placedOrder({ paymentMethod: 'bank_transfer' }), catalogue, mockpay: false } })

    expect(factsOf(wrapper)).toEqual({ 'Order': 'ord_01JZ8Q6T4V', 'Payment': 'Awaiting payment', 'Paying by': 'Bank transfer' })
    expect(wrapper.get('[data-testid="order-payment-method"]').text()).toBe('Bank transfer')
  })
})

describe('OrderResult: refunds and cancellation in the shopper\'s words', () => {
  it('a partly refunded order: how much of the total came back, and a refund still on its way', async () => {
    const order = placedOrder({
      status: 'partially_refunded',
      amountRefunded: 100_000,
      refunds: [refundOf(), refundOf({ id: 're_01JZ8R2', amount: 50_000, status: 'pending' }), refundOf({ id: 're_01JZ8R3', amount: 20_000, status: 'failed' })],
    })
    const wrapper = await mountSuspended(OrderResult, { props: { order, catalogue, mockpay: false } })

    expect(wrapper.get('[data-testid="order-status"]').text()).toBe('Partially refunded')
    expect(wrapper.get('[data-testid="order-status"]').attributes('data-status')).toBe('partially_refunded')
    expect(factsOf(wrapper)).toMatchObject({ Refunded: `${idr('100,000')} of ${idr('387,000')}` })
    expect(wrapper.get('[data-testid="refund-pending"]').text()).toBe(`A refund of ${idr('50,000')} is on its way to you.`)
    expect(wrapper.find('[data-testid="cancel-order"]').exists()).toBe(false)
  })

  it('a refunded order: the whole amount came back, nothing pending', async () => {
    const order = placedOrder({ status: 'refunded', amountRefunded: 387_000, refunds: [refundOf({ amount: 387_000 })] })
    const wrapper = await mountSuspended(OrderResult, { props: { order, catalogue, mockpay: true } })

    expect(wrapper.get('[data-testid="order-status"]').text()).toBe('Refunded')
    expect(factsOf(wrapper)).toMatchObject({ Refunded: `${idr('387,000')} of ${idr('387,000')}` })
    expect(wrapper.find('[data-testid="refund-pending"]').exists()).toBe(false)
    expect(wrapper.get('[data-testid="mockpay-refund"]').attributes('disabled')).toBeDefined()
  })

  it('a canceled order: says so and that nothing is charged; no Cancel order, and nothing left to do at mockpay', async () => {
    const wrapper = await mountSuspended(OrderResult, { props: { order: placedOrder({ status: 'canceled' }), catalogue, mockpay: true } })

    expect(wrapper.get('[data-testid="order-status"]').text()).toBe('Canceled')
    expect(wrapper.get('[data-testid="canceled-note"]').text()).toBe('This order was canceled. Nothing will be charged for it.')
    expect(wrapper.find('[data-testid="cancel"]').exists()).toBe(false)
    expect(wrapper.find('[data-testid="mockpay"]').exists()).toBe(false)
    expect(factsOf(wrapper)).not.toHaveProperty('Refunded')
  })

  it('a payment that arrived after the cancel was refunded by itself: the shopper is told', async () => {
    const order = placedOrder({ status: 'refunded', amountRefunded: 387_000, refunds: [refundOf({ amount: 387_000, source: 'automatic', reason: 'order_canceled' })] })
    const wrapper = await mountSuspended(OrderResult, { props: { order, catalogue, mockpay: false } })

    expect(wrapper.get('[data-testid="refunded-after-cancel"]').text()).toBe('Your payment arrived after the order was canceled, so it was refunded to you.')
  })
})

describe('OrderResult: a payment provider that is not answering', () => {
  const lastError = 'The payment provider has not answered yet (connect ECONNREFUSED). The payment is asked for again automatically; nothing was charged.'
  const retrying = (payment: Partial<OrderPaymentView> = {}) => placedOrder({ paymentIntentId: null, payment: { provider: 'mockpay', id: null, nextAction: null, error: null, status: 'retrying', ...payment } })

  it('retrying: not answering, we keep trying, nothing was charged, and the shop\'s last error; mockpay does not also say it is preparing', async () => {
    const wrapper = await mountSuspended(OrderResult, { props: { order: retrying({ lastError }), catalogue, mockpay: true } })

    expect(wrapper.get('[data-testid="payment-retrying"]').findAll('p').map(line => line.text())).toEqual([
      'The payment provider is not answering right now. We keep trying by ourselves, and nothing has been charged: you can leave this page open or come back later.',
      lastError,
    ])
    expect(wrapper.get('[data-testid="order-status"]').text()).toBe('Awaiting payment')
    expect(wrapper.get('[data-testid="mockpay"]').text()).not.toContain('Preparing the payment…')
  })

  it('a Stripe payment: the shopper reads where the payment is, not how the shop\'s page is built', async () => {
    const order = placedOrder({ payment: { provider: 'stripe', id: 'pi_1', nextAction: { type: 'stripe_client_secret', clientSecret: 'pi_1_secret_x' }, error: null, status: 'ready' } })
    const wrapper = await mountSuspended(OrderResult, { props: { order, catalogue, mockpay: false } })
    expect(wrapper.get('[data-testid="payment-next-step"]').text()).toBe('Your card payment is with Stripe. This page updates by itself once Stripe confirms it.')
  })

  it('retrying without a last error: the first line alone', async () => {
    const wrapper = await mountSuspended(OrderResult, { props: { order: retrying(), catalogue, mockpay: false } })
    expect(wrapper.get('[data-testid="payment-retrying"]').findAll('p')).toHaveLength(1)
  })

  it('a payment that is ready, or not asked for yet: nothing about the provider', async () => {
    for (const order of [placedOrder(), placedOrder({ paymentIntentId: null, payment: null })]) {
      const wrapper = await mountSuspended(OrderResult, { props: { order, catalogue, mockpay: true } })
      expect(wrapper.find('[data-testid="payment-retrying"]').exists()).toBe(false)
    }
  })
})

describe('OrderResult: Cancel order', () => {
  it('an unpaid order offers Cancel order; it asks once more, Keep the order closes the question, Yes asks the page to cancel', async () => {
    for (const status of ['pending_payment', 'payment_failed']) {
      const wrapper = await mountSuspended(OrderResult, { props: { order: placedOrder({ status }), catalogue, mockpay: false } })

      expect(wrapper.get('[data-testid="cancel-order"]').text()).toBe('Cancel order')
      await wrapper.get('[data-testid="cancel-order"]').trigger('click')
      expect(wrapper.get('#cancel-question').text()).toBe('Cancel this order? Nothing will be charged for it, and it cannot be undone.')
      expect(wrapper.get('[data-testid="cancel-confirm"]').text()).toBe('Yes, cancel the order')
      await wrapper.get('[data-testid="cancel-keep"]').trigger('click')
      expect(wrapper.find('#cancel-question').exists()).toBe(false)
      expect(wrapper.emitted('cancel')).toBeUndefined()

      await wrapper.get('[data-testid="cancel-order"]').trigger('click')
      await wrapper.get('[data-testid="cancel-confirm"]').trigger('click')
      expect(wrapper.emitted('cancel')).toEqual([[]])
    }
  })

  it('a paid order has no Cancel order', async () => {
    for (const status of ['paid', 'partially_refunded', 'refunded', 'canceled']) {
      const wrapper = await mountSuspended(OrderResult, { props: { order: placedOrder({ status }), catalogue, mockpay: false } })
      expect(wrapper.find('[data-testid="cancel-order"]').exists()).toBe(false)
    }
  })

  it('while the cancel is under way: "Canceling…", busy, its line, and the order cannot be left', async () => {
    const wrapper = await mountSuspended(OrderResult, {
      props: { order: placedOrder(), catalogue, mockpay: false, canceling: true, cancelStatus: 'Connection trouble (HTTP 503). Trying again with the same request — attempt 2…' },
    })
    await wrapper.get('[data-testid="cancel-order"]').trigger('click')

    const confirm = wrapper.get('[data-testid="cancel-confirm"]')
    expect(confirm.text()).toBe('Canceling…')
    expect(confirm.attributes('aria-busy')).toBe('true')
    expect(confirm.attributes('disabled')).toBeDefined()
    expect(wrapper.get('[data-testid="cancel-keep"]').attributes('disabled')).toBeDefined()
    expect(wrapper.get('[data-testid="cancel-status"]').text()).toBe('Connection trouble (HTTP 503). Trying again with the same request — attempt 2…')
    const startOver = wrapper.findAll('button').find(button => button.text() === 'Start a new order')!
    expect(startOver.attributes('disabled')).toBeDefined()
  })

  it('a refused cancel stays in view once the order shows paid', async () => {
    const words = 'Your payment arrived before the order could be canceled, so the order stands. Ask the shop for a refund if you no longer want it.'
    const wrapper = await mountSuspended(OrderResult, { props: { order: placedOrder({ status: 'paid' }), catalogue, mockpay: false, cancelProblem: words } })

    expect(wrapper.get('[data-testid="cancel-problem"]').text()).toBe(words)
    expect(wrapper.get('[data-testid="cancel-problem"]').attributes('role')).toBe('alert')
    expect(wrapper.find('[data-testid="cancel-order"]').exists()).toBe(false)
  })
})
