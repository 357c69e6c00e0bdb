/**
 * The details of the refund route's 409s: each names the order, says only what is true of it, and
 * what to do next. Pure, so that every case is tested without a database.
 */

export interface RefusedOrder {
  id: string
  status: string
  /** What was paid, in the order's currency and units. */
  amount: number
  currency: string
}

/** 409 order-not-refundable: the order was never paid (unpaid, failed or canceled). */
export function notRefundableDetail(order: RefusedOrder): string {
  return `Order ${order.id} is ${order.status}; only a paid or partially refunded order can be refunded. An unpaid order is canceled instead: POST /api/orders/${order.id}/cancel.`
}

/**
 * 409 refund-exceeds-remaining. `held` is Σ of the order's refunds that have not failed (pending
 * or succeeded); `asked` the amount asked for, undefined for "all that remains". What holds the
 * rest is named only when a refund does: a first refund of more than was paid is simply too much.
 */
export function exceedsRemainingDetail(order: RefusedOrder, held: number, asked: number | undefined): string {
  const remaining = Math.max(0, order.amount - held)
  const paid = `${order.amount} ${order.currency}`
  if (remaining <= 0) {
    return `Order ${order.id} has nothing left to refund: its refunds that have not failed (pending or succeeded) hold all ${paid} that was paid. `
      + 'Only a refund that fails frees its amount again; then ask under a new Idempotency-Key.'
  }
  const askedPart = asked === undefined ? '' : `; ${asked} was asked`
  if (held <= 0) {
    return `Order ${order.id} was paid ${paid}, and a refund cannot exceed that${askedPart}. Ask for at most ${order.amount} (or leave amount out to refund it all), under a new Idempotency-Key.`
  }
  return `Order ${order.id} has ${remaining} ${order.currency} left to refund of the ${paid} paid: its refunds that have not failed (pending or succeeded) hold the other ${held}${askedPart}. `
    + `Ask for at most ${remaining} (or leave amount out to refund all of it), under a new Idempotency-Key.`
}
