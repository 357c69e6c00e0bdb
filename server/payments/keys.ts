/** The key the provider dedupes the payment's creation by: one per order, whichever run asks. */
export const paymentIdempotencyKey = (orderId: string) => `order:${orderId}:payment`

/** The key the provider dedupes a refund by: one per refund, whichever run asks. */
export const refundIdempotencyKey = (refundId: string) => `refund:${refundId}`
