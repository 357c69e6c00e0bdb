import { describe, expect, it } from 'vitest'
import { refundAmountProblem } from '../../server/payments/currencies'

/**
 * A refund is admitted only in an amount the order's provider can pay back exactly
 * (docs.stripe.com/currencies: zero-decimal currencies in whole units, three-decimal ones with a
 * last digit of 0); the refusal names the step and what to ask for instead.
 */

describe('refund amounts the provider can take', () => {
  it('Stripe, MGA (zero-decimal at Stripe, hundredths here): whole ariary only', () => {
    expect(refundAmountProblem('stripe', 150, 'MGA', { rest: false })).toBe(
      'Stripe refunds MGA to whole units, so 150 (1.50 MGA) cannot be refunded exactly. Ask for a multiple of 100, such as 100 or 200, under the same Idempotency-Key.')
    expect(refundAmountProblem('stripe', 50, 'mga', { rest: false })).toBe(
      'Stripe refunds MGA to whole units, so 50 (0.50 MGA) cannot be refunded exactly. Ask for a multiple of 100, such as 100, under the same Idempotency-Key.')
    expect(refundAmountProblem('stripe', 200, 'MGA', { rest: false })).toBeUndefined()
  })

  it('Stripe, three-decimal currencies: the last digit must be 0', () => {
    for (const code of ['KWD', 'BHD', 'JOD', 'OMR', 'TND']) {
      expect(refundAmountProblem('stripe', 1_230, code, { rest: false }), code).toBeUndefined()
      expect(refundAmountProblem('stripe', 1_235, code, { rest: false }), code).toBe(
        `Stripe refunds ${code} to 2 decimal places, so 1235 (1.235 ${code}) cannot be refunded exactly. Ask for a multiple of 10, such as 1230 or 1240, under the same Idempotency-Key.`)
    }
  })

  it('Stripe, ISK and UGX: whole units in hundredths', () => {
    expect(refundAmountProblem('stripe', 5_001, 'ISK', { rest: false })).toBeUndefined()
    expect(refundAmountProblem('stripe', 5_001, 'UGX', { rest: false })).toBeUndefined()
  })

  it('what remains, asked for without an amount, that the provider cannot take: the largest amount it can', () => {
    expect(refundAmountProblem('stripe', 9_850, 'MGA', { rest: true })).toBe(
      'What remains to refund, 9850 (98.50 MGA), cannot be refunded exactly: Stripe refunds MGA to whole units. Ask for "amount": 9800, under the same Idempotency-Key.')
    expect(refundAmountProblem('stripe', 50, 'MGA', { rest: true })).toBe(
      'What remains to refund, 50 (0.50 MGA), cannot be refunded exactly: Stripe refunds MGA to whole units. Nothing more can be refunded through Stripe; settle the rest with the shopper directly.')
    expect(refundAmountProblem('stripe', 9_800, 'MGA', { rest: true })).toBeUndefined()
  })

  it('every amount for two-decimal currencies, IDR at Midtrans, and anything at mockpay', () => {
    expect(refundAmountProblem('stripe', 1, 'USD', { rest: false })).toBeUndefined()
    expect(refundAmountProblem('stripe', 1, 'IDR', { rest: false })).toBeUndefined()
    expect(refundAmountProblem('midtrans', 1, 'IDR', { rest: false })).toBeUndefined()
    expect(refundAmountProblem('mockpay', 150, 'MGA', { rest: false })).toBeUndefined()
    // A currency the provider does not take was refused when the order was placed: nothing to add.
    expect(refundAmountProblem('midtrans', 150, 'USD', { rest: false })).toBeUndefined()
  })
})
