import { idempotencyProblems } from 'nuxt-idempotency/core'

/**
 * Every problem type the API can answer with (RFC 9457). `type` is `/problems/<slug>`, served as a
 * short page by server/routes/problems/[slug].get.ts from the `explanation` below.
 */
export const problemCatalog = {
  // The idempotency layer's own (nuxt-idempotency), each where it is answered.
  ...idempotencyProblems,
  'validation-failed': { status: 400, title: 'Validation failed', explanation: 'The request body does not match the schema, or asks for an amount the payment provider cannot refund exactly. `errors` lists each field with what is wrong. Nothing was stored and the idempotency key stays free: fix the body and send it again.' },
  'malformed-json': { status: 400, title: 'Malformed JSON', explanation: 'The body is not valid JSON. Nothing was stored.' },
  'cart-already-ordered': { status: 409, title: 'Cart already ordered', explanation: 'An order already exists for this cart (under another idempotency key). `orderId` names it: fetch it with GET /api/orders/{orderId} instead of ordering again. A checkout session is not told of another session\'s order: it starts a new cart.' },
  'currency-not-supported': { status: 400, title: 'Currency not supported', explanation: 'The configured payment provider cannot charge this currency, or cannot charge this amount in it exactly (it would round it). Nothing was stored and the idempotency key stays free: order in a currency and amount the detail names as accepted.' },
  'insufficient-stock': { status: 409, title: 'Insufficient stock', explanation: 'A tracked item has fewer units available than the order asks for (GET /api/inventory/{sku}). `items` lists each such item with `requested` and `available`. Nothing was reserved and no order was made; the answer is stored under the key: order fewer units or other items under a new key.' },
  'stock-below-reserved': { status: 409, title: 'Stock below reserved', explanation: 'The count would go below the units that unpaid orders hold (`reserved`). `onHand` and `reserved` are the counts as they are. Count again, or wait until those orders are paid, canceled or expire.' },
  'restock-exceeds-committed': { status: 409, title: 'Restock exceeds what was sold', explanation: 'A refund can put back only units its order\'s payment took from stock and no earlier refund put back. `restockable` lists them per SKU: name at most those in `items`, under a new key.' },
  'order-not-refundable': { status: 409, title: 'Order not refundable', explanation: 'Only a paid or partially refunded order can be refunded. `orderStatus` names the order\'s state (unpaid, failed or canceled): an unpaid order is canceled instead (POST /api/orders/{id}/cancel).' },
  'refund-exceeds-remaining': { status: 409, title: 'Refund exceeds what remains', explanation: 'The refunds of this order that have not failed, with this one, would exceed the amount paid. `remaining` is what can still be refunded, in the order\'s units (0 for a refunded order): ask for at most that, under a new key.' },
  'order-not-cancelable': { status: 409, title: 'Order not cancelable', explanation: 'Only an order not yet paid can be canceled. `orderStatus` names its state: a paid order is refunded instead (POST /api/orders/{id}/refunds).' },
  'malformed-request': { status: 400, title: 'Malformed HTTP request', explanation: 'The request could not be parsed as HTTP, for example a header contains control characters. Header values such as Idempotency-Key and X-Request-Id must be visible ASCII.' },
  'headers-too-large': { status: 431, title: 'Request headers too large', explanation: 'The request headers exceed the server limit (16 KiB). Idempotency-Key is at most 255 characters and X-Request-Id at most 128.' },
  'unauthorized': { status: 401, title: 'Unauthorized', explanation: 'Send `Authorization: Bearer <secret key>` with a valid, unrevoked key (operators: the OPS_TOKEN).' },
  'not-found': { status: 404, title: 'Not found', explanation: 'Nothing exists at this address for your credentials.' },
  'method-not-allowed': { status: 405, title: 'Method not allowed', explanation: 'This route does not accept that HTTP method.' },
  'payload-too-large': { status: 413, title: 'Payload too large', explanation: 'Request bodies are limited to 64 KiB.' },
  'unsupported-media-type': { status: 415, title: 'Unsupported media type', explanation: 'Send the body as JSON with `Content-Type: application/json`.' },
  'payload-invalid': { status: 400, title: 'Webhook payload invalid', explanation: 'The signature is valid but the event is not one this provider integration understands.' },
  'job-not-retryable': { status: 409, title: 'Job is not a dead letter', explanation: 'Only a job in `dead_letter` can be redriven. A queued, failed or running job will run by itself; a completed job is done; a dismissed job stays dismissed. `jobStatus` names its current state.' },
  'job-not-dismissable': { status: 409, title: 'Job is not a dead letter', explanation: 'Only a job in `dead_letter` can be dismissed. A queued, failed or running job will still run; a completed job is done; a dismissed job was dismissed already (its reason stays). `jobStatus` names its current state.' },
  'event-not-resendable': { status: 409, title: 'Event cannot be resent', explanation: 'A resend goes to enabled webhook endpoints of the event\'s tenant subscribed to its type: the endpoint named is disabled or not subscribed, or (no endpoint named) none is. Nothing was enqueued. The tenant enables or subscribes an endpoint (PATCH /api/webhook-endpoints/{id}); then resend.' },
  'discrepancy-not-open': { status: 409, title: 'Discrepancy is not open', explanation: 'Only an open ledger discrepancy can be resolved. This one was resolved already, by an operator (`resolvedBy`, with their note) or by a later ledger check that found both ledgers agreeing; if the ledgers differ again, the check opens a new one.' },
  'payment-state-conflict': { status: 409, title: 'Payment intent is in another state', explanation: 'The simulated provider (mockpay) cannot make this transition from the intent\'s current state: only a pending or failed intent can be confirmed, only a pending one failed, only a succeeded one refunded. `intentStatus` names its state.' },
  'internal-error': { status: 500, title: 'Internal error', explanation: 'An unexpected error; nothing was committed and the idempotency key was released. Retry with the same key.' },
} as const satisfies Record<string, { status: number, title: string, explanation: string }>

export type ProblemSlug = keyof typeof problemCatalog
