import { describe, expect, it } from 'vitest'
import { shopperCancelProblem, shopperProblem } from '~/composables/useCheckout'

// What the checkout page tells a shopper for each way a Pay or a Cancel order can fail: never the
// server's detail.

const failed = (problem?: Record<string, unknown>) => ({ phase: 'failed', problem })
const validation = (...paths: string[]) => failed({
  type: '/problems/validation-failed',
  status: 400,
  detail: 'Fix the fields listed in errors and send the request again with the same Idempotency-Key.',
  errors: paths.map(path => ({ path, message: 'Invalid input' })),
})

describe('shopperProblem', () => {
  it('is nothing unless the Pay failed', () => {
    expect(shopperProblem({ phase: 'succeeded' }, 'a@example.com')).toBeUndefined()
    expect(shopperProblem({ phase: 'retrying' }, 'a@example.com')).toBeUndefined()
  })

  it('puts an invalid email beside its field, worded by what the field holds, under one summary', () => {
    expect(shopperProblem(validation('customer.email'), 'not-an-email')).toEqual({
      type: '/problems/validation-failed',
      summary: 'Your order was not placed yet. Fix what is marked above and press Pay again.',
      fields: { email: 'Enter a valid email address, like name@example.com.' },
      cart: [],
    })
    expect(shopperProblem(validation('customer.email'), '  ')?.fields).toEqual({ email: 'Enter your email address for the receipt.' })
  })

  it('asks for a payment method, and for a reload once for any number of cart fields the server refused', () => {
    expect(shopperProblem(validation('paymentMethod', 'amount', 'items.0.unitPrice', 'items.1.quantity'), 'a@example.com')).toEqual({
      type: '/problems/validation-failed',
      summary: 'Your order was not placed yet. Fix what is marked above and press Pay again.',
      fields: { paymentMethod: 'Choose a payment method.' },
      cart: ['Your cart no longer matches the shop\'s prices. Reload the page to see the current total.'],
    })
  })

  it('words each other problem type for the shopper', () => {
    const summaryOf = (problem?: Record<string, unknown>) => shopperProblem(failed(problem), 'a@example.com')?.summary
    expect(summaryOf({ type: '/problems/idempotency-key-reused', status: 422 })).toBe('Your cart changed after an earlier attempt to pay. Press Pay again to order the cart as it is now.')
    expect(summaryOf({ type: '/problems/unauthorized', status: 401 })).toBe('Your visit to the store has expired. Reload the page to continue.')
    expect(summaryOf({ type: '/problems/payload-too-large', status: 413 })).toBe('Your cart is too large to order at once. Remove some items and press Pay again.')
    expect(summaryOf({ type: '/problems/currency-not-supported', status: 400 })).toBe('The store cannot take payments for this order right now. Nothing was charged; please come back later.')
    expect(summaryOf({ type: '/problems/malformed-json', status: 400 })).toBe('Something went wrong on our side while sending your order. Reload the page and press Pay again.')
  })

  it('says the order may have gone through when no answer was final (network, 5xx, 429)', () => {
    const words = 'We could not reach the shop just now. Your order may already have gone through: press Pay again and it will be placed once, never twice.'
    expect(shopperProblem(failed(undefined), 'a@example.com')).toEqual({ type: 'network', summary: words, fields: {}, cart: [] })
    expect(shopperProblem(failed({ type: '/problems/service-unavailable', status: 503 }), 'a@example.com')?.summary).toBe(words)
    expect(shopperProblem(failed({ type: 'about:blank', status: 429 }), 'a@example.com')).toMatchObject({ type: 'network', summary: words })
  })
})

describe('shopperCancelProblem', () => {
  const summaryOf = (problem?: Record<string, unknown>) => shopperCancelProblem(failed(problem))?.summary

  it('is nothing unless the cancel failed', () => {
    expect(shopperCancelProblem({ phase: 'succeeded' })).toBeUndefined()
    expect(shopperCancelProblem({ phase: 'submitting' })).toBeUndefined()
  })

  it('a paid order stands: the shopper is told to ask for a refund, never the server\'s words', () => {
    expect(shopperCancelProblem(failed({ type: '/problems/order-not-cancelable', status: 409, orderStatus: 'paid', detail: 'Order ord_1 is paid: refund it with POST /api/orders/{id}/refunds.' }))).toEqual({
      type: '/problems/order-not-cancelable',
      summary: 'Your payment arrived before the order could be canceled, so the order stands. Ask the shop for a refund if you no longer want it.',
    })
  })

  it('words each other problem type for the shopper', () => {
    expect(summaryOf({ type: '/problems/unauthorized', status: 401 })).toBe('Your visit to the store has expired. Reload the page to continue.')
    expect(summaryOf({ type: '/problems/not-found', status: 404 })).toBe('This order could not be found any more. Reload the page to see your order.')
    expect(summaryOf({ type: '/problems/idempotency-key-reused', status: 422 })).toBe('Something went wrong on our side while canceling your order. Reload the page and try again.')
  })

  it('no final answer (network, 5xx, 429): pressing again cancels once', () => {
    const words = 'We could not reach the shop just now. Press Cancel order again: the order is canceled once, however often you press it.'
    expect(shopperCancelProblem(failed(undefined))).toEqual({ type: 'network', summary: words })
    expect(summaryOf({ type: '/problems/service-unavailable', status: 503 })).toBe(words)
    expect(summaryOf({ type: 'about:blank', status: 429 })).toBe(words)
  })
})
