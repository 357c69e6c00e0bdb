import { describe, expect, it } from 'vitest'
import { exceedsRemainingDetail, notRefundableDetail, type RefusedOrder } from '../../server/refunds/refusals'

/**
 * The details of a refused refund (409) are read by people: each says only what is true of the
 * order, names its real id, and what to do next.
 */

const order: RefusedOrder = { id: 'ord_01JPAID', status: 'paid', amount: 250_000, currency: 'IDR' }

describe('refund-exceeds-remaining', () => {
  it('a first refund of more than was paid (120 %): too much, with no other refund to blame', () => {
    const detail = exceedsRemainingDetail(order, 0, 300_000)
    expect(detail).toBe('Order ord_01JPAID was paid 250000 IDR, and a refund cannot exceed that; 300000 was asked. '
      + 'Ask for at most 250000 (or leave amount out to refund it all), under a new Idempotency-Key.')
    expect(detail).not.toMatch(/hold/)
  })

  it('more than its refunds left: names what they hold and what remains', () => {
    expect(exceedsRemainingDetail({ ...order, status: 'partially_refunded' }, 150_000, 200_000)).toBe(
      'Order ord_01JPAID has 100000 IDR left to refund of the 250000 IDR paid: its refunds that have not failed (pending or succeeded) hold the other 150000; 200000 was asked. '
      + 'Ask for at most 100000 (or leave amount out to refund all of it), under a new Idempotency-Key.')
  })

  it('nothing left (a refunded order, or one whose refunds are still pending): says so, and what could change it', () => {
    const expected = 'Order ord_01JPAID has nothing left to refund: its refunds that have not failed (pending or succeeded) hold all 250000 IDR that was paid. '
      + 'Only a refund that fails frees its amount again; then ask under a new Idempotency-Key.'
    expect(exceedsRemainingDetail({ ...order, status: 'refunded' }, 250_000, 1)).toBe(expected)
    // "All that remains" of nothing.
    expect(exceedsRemainingDetail(order, 250_000, undefined)).toBe(expected)
  })
})

describe('order-not-refundable', () => {
  it('points at the order\'s own cancel route, not a placeholder', () => {
    const detail = notRefundableDetail({ ...order, id: 'ord_01JUNPAID', status: 'pending_payment' })
    expect(detail).toBe('Order ord_01JUNPAID is pending_payment; only a paid or partially refunded order can be refunded. An unpaid order is canceled instead: POST /api/orders/ord_01JUNPAID/cancel.')
    expect(detail).not.toMatch(/\{\w+\}/)
  })
})
