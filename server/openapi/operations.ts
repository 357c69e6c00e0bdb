import { z } from 'zod'
import type { oas31 } from 'zod-openapi'
import {
  CanceledOrderResponseSchema, CheckoutSessionSchema, CreatedOrderResponseSchema, DuplicatesAuditSchema, EvidenceSchema, HealthSchema,
  MockpayActionResultSchema, MockpayIntentSchema, OpsApiKeyListSchema, OpsCreatedTenantSchema, OpsIdempotencyRecordListSchema,
  OpsIssuedApiKeySchema, OpsJobListSchema, OpsJobSchema, OpsMailboxMessageListSchema, OpsOrderSchema, OpsTaskRunSchema,
  OpsEventDetailSchema, OpsEventListSchema, OpsInventorySchema, OpsLedgerDiscrepancyListSchema, OpsLedgerDiscrepancySchema, OpsResendSchema, OpsStockListSchema,
  OpsWebhookEndpointListSchema, OrderSchema, ReadinessSchema, RefundResponseSchema, RefundSchema,
  StockListSchema, StockSchema, StockWithIdempotencySchema, WebhookReceivedSchema, EventListSchema, OrderListSchema,
  DeletedWebhookEndpointSchema, WebhookEndpointListSchema, WebhookEndpointSchema, WebhookEndpointSecretResponseSchema,
} from '../../shared/api-schemas'
import { EventListQuery } from '../events/schema'
import { webhookProviderNames } from '../config'
import { ConfirmIntentSchema, RefundIntentSchema } from '../payments/mockpay/service'
import { CreateOrderSchema, OrderIdSchema, OrderListQuery, exampleOrder } from '../orders/schema'
import type { ProblemSlug } from '../problems'
import { CreateRefundSchema, RefundIdSchema } from '../refunds/schema'
import { AdjustStockSchema, SetStockSchema, SkuSchema, StockListQuery } from '../stock/schema'
import { CreateWebhookEndpointSchema, UpdateWebhookEndpointSchema, WebhookEndpointIdSchema, WebhookEndpointListQuery } from '../webhook-endpoints/schema'
import type { ResponseHeaderOptions, parameterComponents } from './headers'
import {
  ApiKeyIdParam, AuditQuery, CreateTenantBody, DiscrepanciesQuery, DismissJobBody, EventIdParam, EventsListQuery, EvidenceQuery, InventoryListQuery, InventoryPathParams, IssueKeyBody, JobsQuery,
  MailboxQuery, RecordsQuery, ResendEventBody, ResolveDiscrepancyBody, TaskNameParam, TenantIdParam, WebhookEndpointsListQuery,
} from './route-inputs'
import { MidtransNotification, StandardWebhookEvent, StripeWebhookEvent } from './webhook-payloads'

/**
 * Every route under server/api, described once: what it takes (built from the zod schemas the
 * route validates with), who may call it, and every answer it can give. server/openapi/document.ts
 * turns this into the OpenAPI document; tests/unit/openapi.test.ts holds it to the route files.
 */

export type SecurityName = 'secretKey' | 'checkoutSession' | 'opsToken' | 'standardWebhookSignature' | 'mockpayWebhookSignature' | 'stripeSignature'

/** An answer that is not a problem (a success, or the readiness report's 503). */
export interface SuccessResponse {
  status: number
  description: string
  schema?: z.ZodType
  /** application/json unless said. */
  mediaType?: string
  headers?: ResponseHeaderOptions
  examples?: Record<string, oas31.ExampleObject>
}

export interface ApiOperation {
  method: 'get' | 'put' | 'post' | 'patch' | 'delete'
  /** The OpenAPI path: `{id}` where the route file has `[id]`; a fixed segment where one file serves several documented paths (webhooks). */
  path: string
  operationId: string
  summary: string
  description?: string
  tag: string
  /** Alternatives: any one of them authenticates. Empty: the route takes no credentials. An empty-array alternative: credentials optional. */
  security: SecurityName[][]
  pathParams?: z.ZodObject
  query?: z.ZodObject
  /** The route requires an Idempotency-Key (and honours `Prefer: wait`). */
  idempotent?: boolean
  /** Header parameters besides Idempotency-Key and Prefer. */
  headerParams?: Array<keyof typeof parameterComponents>
  body?: { schema: z.ZodType, required: boolean, description?: string, examples?: Record<string, oas31.ExampleObject> }
  /** Empty only where the operation documents a refusal (a webhook provider that does not exist). */
  success: SuccessResponse[]
  /** Route-specific problems; those every route can answer are added by the document. */
  problems: ProblemSlug[]
  /** Answers besides the success and the problems (a readiness report with 503). */
  others?: SuccessResponse[]
}

const id = { id: OrderIdSchema.meta({ description: 'An order id, `ord_…`; any other value is 404.', example: 'ord_8cf2b5a4d0e1' }) }
const orderPath = z.object(id)

const jsonBody = ['unsupported-media-type', 'payload-too-large', 'malformed-json', 'validation-failed'] as const satisfies ProblemSlug[]
const keyed = ['idempotency-key-missing', 'idempotency-key-invalid', 'idempotency-key-reused', 'request-in-progress'] as const satisfies ProblemSlug[]
const keyedAnswer: ResponseHeaderOptions = { replayed: true, preferenceApplied: true }
const tenantOrSession: SecurityName[][] = [['secretKey'], ['checkoutSession']]
const ops: SecurityName[][] = [['opsToken']]

const idempotencyExample = { key: '5f0c8a52-3f0e-4c7e-9a59-0c1c6f1f6b1e', replayed: false }
const createdOrderExample = { id: 'ord_8cf2b5a4d0e1', object: 'order', status: 'pending_payment', ...exampleOrder, createdAt: '2026-12-01T09:14:03.120Z', idempotency: idempotencyExample }
const skuPath = z.object({
  // `.` and `..` match the pattern, but a path cannot name them: URL parsers resolve such a segment, and the server answers 404 for one.
  sku: SkuSchema.meta({
    description: 'The SKU as orders name it: 1–64 letters, digits or `- . _ ~ : @ ! $ & \' ( ) * + , ; =`, sent as it is (no character of it needs encoding), but not `.` or `..`. Any other value, and a SKU with no count set, is 404.',
    example: 'SKU-1',
    override: { not: { enum: ['.', '..'] } },
  }),
})
const stockExample = { object: 'stock', sku: 'SKU-1', onHand: 40, reserved: 2, available: 38, updatedAt: '2026-12-01T09:14:03.120Z' }
const refundExample = {
  id: 're_51b0c3e2a9f4', object: 'refund', orderId: 'ord_8cf2b5a4d0e1', amount: 60000, currency: 'IDR', status: 'pending',
  reason: 'requested_by_customer', source: 'api', createdAt: '2026-12-01T10:02:11.480Z',
}

const endpointPath = z.object({ id: WebhookEndpointIdSchema.meta({ description: 'A webhook endpoint id, `we_…`; any other value is 404.', example: 'we_3kQ9xYb2Lm0pRt7v' }) })
const webhookEndpointExample = {
  id: 'we_3kQ9xYb2Lm0pRt7v', object: 'webhook_endpoint', url: 'https://shop.example/webhooks/checkout', events: ['order.paid', 'order.canceled', 'refund.succeeded'],
  description: 'ERP sync', status: 'enabled', disabledReason: null, failingSince: null, lastSuccessAt: null, lastFailureAt: null, previousSecretExpiresAt: null,
  createdAt: '2026-12-01T09:14:03.120Z', updatedAt: '2026-12-01T09:14:03.120Z',
}
const webhookSecretExample = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'
const urlRule = 'The `url` must be `https:` and resolve only to public addresses; with `WEBHOOK_ENDPOINTS_ALLOW_PRIVATE=true` (the default embedded and in development) `http:` and private, loopback and link-local addresses are allowed too. Any other is 400 `validation-failed` saying why.'

const webhookSuccess: SuccessResponse = {
  status: 200,
  description: 'Stored with its processing job (`replayed: false`), or a redelivery of an event already stored (`replayed: true`, `Idempotent-Replayed: true`), days later too: never processed twice.',
  schema: WebhookReceivedSchema,
  headers: { replayed: true },
  examples: { received: { value: { received: true, eventId: 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W', idempotency: { key: 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W', replayed: false } } } },
}
const webhookProblems: ProblemSlug[] = ['not-found', 'payload-too-large', 'webhook-signature-invalid', 'payload-invalid', 'idempotency-key-reused', 'request-in-progress']
const webhookDescription = (provider: string, signature: string) =>
  `What ${provider} calls. ${signature} The raw body is verified before anything is read; a new event is stored with its \`webhook.apply\` job in one transaction and answered at once, a redelivery is answered as stored. `
  + 'Concurrent copies of one delivery wait (up to 5 s) for the first one\'s answer. 404 where this provider is off (its secret is not set).'

export const apiOperations: ApiOperation[] = [
  // ---------------------------------------------------------------------------------------------
  // orders and refunds
  // ---------------------------------------------------------------------------------------------
  {
    method: 'post',
    path: '/api/orders',
    operationId: 'createOrder',
    summary: 'Create an order, exactly once per Idempotency-Key',
    description: 'The order, its idempotency record and its `payment.create_intent` job commit in one transaction. '
      + 'The same key and body again — a retry after a timeout, a double click, another instance — answers the **same** status and body with `idempotency.replayed: true` and `Idempotent-Replayed: true`. '
      + 'Key order, whitespace and unknown fields do not change the request\'s fingerprint. A body that fails validation stores nothing: the key stays free for the corrected order. '
      + 'Items whose SKU has a count (`PUT /api/inventory/{sku}`) are reserved in the same transaction, all or none: a SKU short of units is 409 `insufficient-stock` with `items` (`requested`, `available`), nothing reserved and no order made, stored and replayed under the key. Items of SKUs with no count are not tracked.',
    tag: 'Orders',
    security: tenantOrSession,
    idempotent: true,
    body: {
      schema: CreateOrderSchema,
      required: true,
      description: 'Amounts are integers in the currency\'s minor unit (IDR: whole rupiah); `amount` must equal Σ quantity × unitPrice. Unknown fields are ignored.',
      examples: { bankTransfer: { summary: 'Two items, paid by bank transfer', value: exampleOrder } },
    },
    success: [{
      status: 201,
      description: 'Created — or the replay of the order this key created.',
      schema: CreatedOrderResponseSchema,
      headers: { location: true, ...keyedAnswer },
      examples: { created: { value: createdOrderExample }, replayed: { summary: 'The same request again', value: { ...createdOrderExample, idempotency: { ...idempotencyExample, replayed: true } } } },
    }],
    problems: ['unauthorized', ...keyed, ...jsonBody, 'currency-not-supported', 'cart-already-ordered', 'insufficient-stock'],
  },
  {
    method: 'get',
    path: '/api/orders',
    operationId: 'listOrders',
    summary: 'List the tenant\'s orders, newest first',
    description: 'Stripe\'s list parameters: `limit` (1–100, default 20), `starting_after` (the last order id of the previous page), `status`, and `created_gte` / `created_lt` (an ISO 8601 date-time or Unix seconds, in the years 0001–9999). '
      + 'Each order as GET /api/orders/{id} answers it. Keyset-paged on (createdAt, id): an order placed while a client pages is newer than the cursor and moves nothing, so the pages have no gaps and no repeats. The shop\'s secret key only.',
    tag: 'Orders',
    security: [['secretKey']],
    query: OrderListQuery,
    success: [{ status: 200, description: 'A page of orders.', schema: OrderListSchema }],
    problems: ['unauthorized', 'validation-failed'],
  },
  {
    method: 'get',
    path: '/api/orders/{id}',
    operationId: 'getOrder',
    summary: 'Read an order with its payment and refunds',
    description: 'The payment appears once the worker asked the provider for it; `refunds` are oldest first. `reservations` lists the stock the order holds per tracked SKU and how it was settled '
      + '(`reserved`, then `committed` by the payment or `released` by a cancel, an expiry or a refused payment); `cancelReason` says why a canceled order was canceled (`requested` or `expired`). '
      + 'Another tenant\'s order is 404, and so is, for a checkout session, an order another session placed.',
    tag: 'Orders',
    security: tenantOrSession,
    pathParams: orderPath,
    success: [{ status: 200, description: 'The order.', schema: OrderSchema }],
    problems: ['unauthorized', 'not-found'],
  },
  {
    method: 'post',
    path: '/api/orders/{id}/cancel',
    operationId: 'cancelOrder',
    summary: 'Cancel an unpaid order',
    description: 'By the shop\'s key or by the checkout session that placed the order. Its stock reservations are released (`cancelReason: requested`). The provider\'s payment is canceled through the outbox; a payment that still arrives is refunded automatically. '
      + 'Canceling a canceled order answers it as it is; a paid or refunded order is 409 `order-not-cancelable`, stored and replayed under the key. Takes no body.',
    tag: 'Orders',
    security: tenantOrSession,
    pathParams: orderPath,
    idempotent: true,
    success: [{ status: 200, description: 'The order as the cancel left it (`status: canceled`) — or the replay of that answer.', schema: CanceledOrderResponseSchema, headers: keyedAnswer }],
    problems: ['unauthorized', 'not-found', ...keyed, 'order-not-cancelable'],
  },
  {
    method: 'post',
    path: '/api/orders/{id}/refunds',
    operationId: 'createRefund',
    summary: 'Refund (part of) a paid order, exactly once per Idempotency-Key',
    description: 'The shop\'s act: the secret key only (the checkout session is 401). Admitted under the order\'s row lock, so the refunds that have not failed never exceed what was paid, across instances. '
      + 'Refusals (`order-not-refundable` for an unpaid, failed or canceled order; `refund-exceeds-remaining` with `remaining`, 0 for a refunded order) are stored and replayed under the key. '
      + 'An amount the provider cannot refund exactly (Stripe: whole units of a zero-decimal currency such as MGA, a last digit of 0 in a three-decimal one such as KWD) is 400 `validation-failed` naming the step and what to ask instead; nothing is stored and the key stays free. '
      + 'The provider is asked once, under a key derived from the refund. '
      + 'With `restock: true` the refund also puts units back on sale, once: the `items` named, or all that the payment took from tracked stock and no earlier refund put back; more is 409 `restock-exceeds-committed` with `restockable`, stored and replayed.',
    tag: 'Refunds',
    security: [['secretKey']],
    pathParams: orderPath,
    idempotent: true,
    body: {
      schema: CreateRefundSchema,
      required: false,
      description: '`amount` defaults to all that remains. No body (or `{}`) refunds everything that remains. `restock: true` puts back the `items` named (with `restock` only), or all the payment took from stock.',
      examples: {
        partial: { value: { amount: 60000, reason: 'requested_by_customer' } },
        everything: { value: {} },
        restockPart: { summary: 'Refund everything, one unit back on sale', value: { restock: true, items: [{ sku: 'SKU-1', quantity: 1 }] } },
      },
    },
    success: [{
      status: 201,
      description: 'Admitted (`status: pending` until the provider settles it) — or the replay of the refund this key made.',
      schema: RefundResponseSchema,
      headers: { location: true, ...keyedAnswer },
      examples: { admitted: { value: { ...refundExample, idempotency: { key: '9a1e4c1b-7c0e-4a55-8d0b-5a3f0e2b9c11', replayed: false } } } },
    }],
    problems: ['unauthorized', 'not-found', ...keyed, ...jsonBody, 'order-not-refundable', 'refund-exceeds-remaining', 'restock-exceeds-committed'],
  },
  {
    method: 'get',
    path: '/api/orders/{id}/refunds/{refundId}',
    operationId: 'getRefund',
    summary: 'Read one refund of an order',
    description: 'Another tenant\'s refund is 404, and so is, for a checkout session, a refund of an order another session placed.',
    tag: 'Refunds',
    security: tenantOrSession,
    pathParams: z.object({ ...id, refundId: RefundIdSchema.meta({ description: 'A refund id, `re_…`; any other value is 404.', example: 're_51b0c3e2a9f4' }) }),
    success: [{ status: 200, description: 'The refund.', schema: RefundSchema, examples: { pending: { value: refundExample } } }],
    problems: ['unauthorized', 'not-found'],
  },

  // ---------------------------------------------------------------------------------------------
  // events
  // ---------------------------------------------------------------------------------------------
  {
    method: 'get',
    path: '/api/events',
    operationId: 'listEvents',
    summary: 'Catch up on the tenant\'s events, oldest first',
    description: 'Every change of an order (`order.created`, `order.paid`, `order.payment_failed`, `order.canceled`), a refund (`refund.created`, `refund.succeeded`, `refund.failed`) or a stock count (`stock.updated`) is one event, written in the change\'s transaction. '
      + 'Pass the last id you have as `after` (unknown: 400 `validation-failed`); `type` filters; `limit` 1–100 (default 20); `hasMore` says whether to ask again at once. '
      + 'A page ends before any event a still-running transaction may yet commit, so a cursor never passes an event that commits late: paging until `hasMore` is false and asking again later misses none and repeats none. The shop\'s secret key only.',
    tag: 'Events',
    security: [['secretKey']],
    query: EventListQuery,
    success: [{ status: 200, description: 'A page of events.', schema: EventListSchema }],
    problems: ['unauthorized', 'validation-failed'],
  },

  // ---------------------------------------------------------------------------------------------
  // inventory
  // ---------------------------------------------------------------------------------------------
  {
    method: 'get',
    path: '/api/inventory',
    operationId: 'listStock',
    summary: 'List the tracked SKUs with their counts',
    description: 'By SKU, `limit` at a time (default 100); the next page starts after the last SKU of this one (`startingAfter`) while `hasMore` is true. The checkout session reads the demo store\'s.',
    tag: 'Inventory',
    security: tenantOrSession,
    query: StockListQuery,
    success: [{ status: 200, description: 'A page of SKUs.', schema: StockListSchema, examples: { page: { value: { object: 'list', data: [stockExample], hasMore: false } } } }],
    problems: ['unauthorized', 'validation-failed'],
  },
  {
    method: 'get',
    path: '/api/inventory/{sku}',
    operationId: 'getStock',
    summary: 'Read a SKU\'s counts',
    description: '`available` (onHand − reserved) is what a new order can take. A SKU with no count set is 404, and so is another tenant\'s. The checkout session reads the demo store\'s.',
    tag: 'Inventory',
    security: tenantOrSession,
    pathParams: skuPath,
    success: [{ status: 200, description: 'The counts.', schema: StockSchema, examples: { stock: { value: stockExample } } }],
    problems: ['unauthorized', 'not-found'],
  },
  {
    method: 'put',
    path: '/api/inventory/{sku}',
    operationId: 'setStock',
    summary: 'Set a SKU\'s count (a stocktake)',
    description: 'The shop\'s act: the secret key only (the checkout session is 401). Tracks the SKU from now on when it was not; the same count again changes nothing, so it takes no Idempotency-Key. '
      + 'The difference is written to the stock ledger. A count below what unpaid orders hold is 409 `stock-below-reserved` with `onHand` and `reserved` as they are.',
    tag: 'Inventory',
    security: [['secretKey']],
    pathParams: skuPath,
    body: { schema: SetStockSchema, required: true, examples: { count: { value: { onHand: 40 } } } },
    success: [{ status: 200, description: 'The counts after the stocktake.', schema: StockSchema, examples: { stock: { value: stockExample } } }],
    problems: ['unauthorized', 'not-found', ...jsonBody, 'stock-below-reserved'],
  },
  {
    method: 'post',
    path: '/api/inventory/{sku}/adjustments',
    operationId: 'adjustStock',
    summary: 'Add or remove units, exactly once per Idempotency-Key',
    description: 'The shop\'s act: the secret key only. `delta` units received (positive) or lost (negative), counted once however often the request is repeated: the same key and body answer the stored result with `Idempotent-Replayed: true`. '
      + 'A SKU with no count set is 404 and an adjustment taking onHand below `reserved` is 409 `stock-below-reserved`, both stored and replayed under the key.',
    tag: 'Inventory',
    security: [['secretKey']],
    pathParams: skuPath,
    idempotent: true,
    body: { schema: AdjustStockSchema, required: true, examples: { received: { value: { delta: 12, reason: 'received' } }, damaged: { value: { delta: -1, reason: 'damaged' } } } },
    success: [{
      status: 201,
      description: 'Counted — or the replay of the adjustment this key made.',
      schema: StockWithIdempotencySchema,
      headers: keyedAnswer,
      examples: { counted: { value: { ...stockExample, idempotency: { key: '3b6f1d2e-8a4c-4e1f-9b7a-2c5d8e0f1a3b', replayed: false } } } },
    }],
    problems: ['unauthorized', 'not-found', ...keyed, ...jsonBody, 'stock-below-reserved'],
  },

  // ---------------------------------------------------------------------------------------------
  // webhook endpoints: where the tenant's events are sent
  // ---------------------------------------------------------------------------------------------
  {
    method: 'post',
    path: '/api/webhook-endpoints',
    operationId: 'createWebhookEndpoint',
    summary: 'Add a webhook endpoint, exactly once per Idempotency-Key',
    description: 'The shop\'s act: the secret key only. Every event of the listed types (`*`: all) is POSTed to `url`, signed with the `secret` of this answer (Standard Webhooks), from the next change on. '
      + 'The secret is shown only here and on rotation; the same key and body answer the same endpoint and secret with `Idempotent-Replayed: true`. '
      + `${urlRule} An unknown event type is 400 \`validation-failed\` naming the known ones.`,
    tag: 'Webhook endpoints',
    security: [['secretKey']],
    idempotent: true,
    body: { schema: CreateWebhookEndpointSchema, required: true, examples: { orders: { value: { url: webhookEndpointExample.url, events: ['order.paid', 'order.canceled', 'refund.succeeded'], description: 'ERP sync' } } } },
    success: [{
      status: 201,
      description: 'Created, with its signing secret — or the replay of the endpoint this key made.',
      schema: WebhookEndpointSecretResponseSchema,
      headers: keyedAnswer,
      examples: { created: { value: { ...webhookEndpointExample, secret: webhookSecretExample, idempotency: idempotencyExample } } },
    }],
    problems: ['unauthorized', ...keyed, ...jsonBody],
  },
  {
    method: 'get',
    path: '/api/webhook-endpoints',
    operationId: 'listWebhookEndpoints',
    summary: 'List the webhook endpoints',
    description: 'Newest first, `limit` at a time (default 20); the next page starts after the last id of this one (`startingAfter`) while `hasMore` is true. Secrets are never listed.',
    tag: 'Webhook endpoints',
    security: [['secretKey']],
    query: WebhookEndpointListQuery,
    success: [{ status: 200, description: 'A page of endpoints.', schema: WebhookEndpointListSchema, examples: { page: { value: { object: 'list', data: [webhookEndpointExample], hasMore: false } } } }],
    problems: ['unauthorized', 'validation-failed'],
  },
  {
    method: 'get',
    path: '/api/webhook-endpoints/{id}',
    operationId: 'getWebhookEndpoint',
    summary: 'Read a webhook endpoint and its health',
    description: '`failingSince`, `lastSuccessAt`, `lastFailureAt` and `disabledReason` say how its deliveries go. Another tenant\'s endpoint is 404.',
    tag: 'Webhook endpoints',
    security: [['secretKey']],
    pathParams: endpointPath,
    success: [{ status: 200, description: 'The endpoint.', schema: WebhookEndpointSchema, examples: { endpoint: { value: webhookEndpointExample } } }],
    problems: ['unauthorized', 'not-found'],
  },
  {
    method: 'patch',
    path: '/api/webhook-endpoints/{id}',
    operationId: 'updateWebhookEndpoint',
    summary: 'Change a webhook endpoint, or enable or disable it',
    description: 'The fields sent change; the same change again changes nothing, so it takes no Idempotency-Key. `status: "disabled"` stops deliveries (`disabledReason: "requested"`); `"enabled"` starts them again for new events and clears `failingSince`. '
      + `A new \`url\` follows the same rule as at creation: ${urlRule}`,
    tag: 'Webhook endpoints',
    security: [['secretKey']],
    pathParams: endpointPath,
    body: { schema: UpdateWebhookEndpointSchema, required: true, examples: { disable: { value: { status: 'disabled' } }, types: { value: { events: ['*'] } } } },
    success: [{ status: 200, description: 'The endpoint after the change.', schema: WebhookEndpointSchema, examples: { endpoint: { value: webhookEndpointExample } } }],
    problems: ['unauthorized', 'not-found', ...jsonBody],
  },
  {
    method: 'delete',
    path: '/api/webhook-endpoints/{id}',
    operationId: 'deleteWebhookEndpoint',
    summary: 'Delete a webhook endpoint',
    description: 'For good: deliveries still queued for it are dropped unsent. Its recorded attempts stay. A second DELETE is 404.',
    tag: 'Webhook endpoints',
    security: [['secretKey']],
    pathParams: endpointPath,
    success: [{ status: 200, description: 'Deleted.', schema: DeletedWebhookEndpointSchema, examples: { deleted: { value: { id: webhookEndpointExample.id, object: 'webhook_endpoint', deleted: true } } } }],
    problems: ['unauthorized', 'not-found'],
  },
  {
    method: 'post',
    path: '/api/webhook-endpoints/{id}/rotate-secret',
    operationId: 'rotateWebhookEndpointSecret',
    summary: 'Rotate a webhook endpoint\'s signing secret, once per Idempotency-Key',
    description: 'A new secret signs every delivery from now on; the one it replaces signs too for 24 hours (a second `v1,` signature in `webhook-signature`, until `previousSecretExpiresAt`), so the receiver can switch without a failed delivery. '
      + 'The same key answers the same new secret with `Idempotent-Replayed: true`. Another tenant\'s endpoint is 404.',
    tag: 'Webhook endpoints',
    security: [['secretKey']],
    pathParams: endpointPath,
    idempotent: true,
    success: [{
      status: 200,
      description: 'Rotated, with the new secret — or the replay of the rotation this key made.',
      schema: WebhookEndpointSecretResponseSchema,
      headers: keyedAnswer,
      examples: { rotated: { value: { ...webhookEndpointExample, previousSecretExpiresAt: '2026-12-02T09:14:03.120Z', secret: webhookSecretExample, idempotency: idempotencyExample } } },
    }],
    problems: ['unauthorized', 'not-found', ...keyed],
  },

  // ---------------------------------------------------------------------------------------------
  // webhooks: one file serves every provider; each is its own path here
  // ---------------------------------------------------------------------------------------------
  {
    method: 'post',
    path: '/api/webhooks/standard',
    operationId: 'receiveStandardWebhook',
    summary: 'Receive a Standard Webhooks event',
    description: webhookDescription('A provider speaking Standard Webhooks', '`webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">` (space-separated during a key rotation), keyed by `WEBHOOK_STANDARD_SECRET`; the event id is `webhook-id`.'),
    tag: 'Webhooks',
    security: [['standardWebhookSignature']],
    headerParams: ['WebhookId', 'WebhookTimestamp'],
    body: { schema: StandardWebhookEvent, required: true },
    success: [webhookSuccess],
    problems: webhookProblems,
  },
  {
    method: 'post',
    path: '/api/webhooks/mockpay',
    operationId: 'receiveMockpayWebhook',
    summary: 'Receive a mockpay event (Standard Webhooks, mockpay\'s own key)',
    description: webhookDescription('The simulated provider', 'Standard Webhooks signed with `MOCKPAY_WEBHOOK_SECRET`, never the standard endpoint\'s key: a standard-signed delivery is 401 here.'),
    tag: 'Webhooks',
    security: [['mockpayWebhookSignature']],
    headerParams: ['WebhookId', 'WebhookTimestamp'],
    body: { schema: StandardWebhookEvent, required: true },
    success: [webhookSuccess],
    problems: webhookProblems,
  },
  {
    method: 'post',
    path: '/api/webhooks/stripe',
    operationId: 'receiveStripeWebhook',
    summary: 'Receive a Stripe event',
    description: webhookDescription('Stripe', '`Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "t.body">` keyed by `WEBHOOK_STRIPE_SECRET`; any v1 may match, v0 never counts; a timestamp more than 300 s old or in the future is 401. The event id is `id`.'),
    tag: 'Webhooks',
    security: [['stripeSignature']],
    body: { schema: StripeWebhookEvent, required: true },
    success: [webhookSuccess],
    problems: webhookProblems,
  },
  {
    method: 'post',
    path: '/api/webhooks/midtrans',
    operationId: 'receiveMidtransNotification',
    summary: 'Receive a Midtrans notification',
    description: `${webhookDescription('Midtrans', 'The signature is in the body: `signature_key` = hex SHA-512(order_id + status_code + gross_amount + `MIDTRANS_SERVER_KEY`); a wrong one is 401. The event id is `order_id:status_code:gross_amount:transaction_status`, and `:<refund_amount>` (whole rupiah refunded so far) for `refund` and `partial_refund`.')} `
      + 'Served only with `PAYMENT_PROVIDER=midtrans`: Midtrans signs too little of a notification, so only a Midtrans deployment, which confirms each one with the status API, takes them in.',
    tag: 'Webhooks',
    security: [],
    body: { schema: MidtransNotification, required: true },
    success: [webhookSuccess],
    problems: webhookProblems,
  },

  {
    method: 'post',
    path: '/api/webhooks/{provider}',
    operationId: 'rejectUnknownWebhookProvider',
    summary: 'Any other provider: 404',
    description: 'The providers above are the only ones: any other name is 404 `not-found`, before the body is read.',
    tag: 'Webhooks',
    security: [],
    pathParams: z.object({
      provider: z.string().meta({ description: 'Not one of the providers above.', example: 'paypal', override: { not: { enum: [...webhookProviderNames] } } }),
    }),
    // A sender delivers its event as it would to a real provider: whatever it is, it is not read.
    body: { schema: z.unknown(), required: false, description: 'Not read.' },
    success: [],
    problems: ['not-found'],
  },

  // ---------------------------------------------------------------------------------------------
  // checkout page, mockpay, health
  // ---------------------------------------------------------------------------------------------
  {
    method: 'get',
    path: '/api/checkout/session',
    operationId: 'startCheckoutSession',
    summary: 'Start the demo store\'s checkout session',
    description: 'Sets the sealed session cookie the checkout page pays with (no secret key in the page). Only where `CHECKOUT_DEMO_ENABLED`; 404 elsewhere.',
    tag: 'Checkout',
    security: [],
    success: [{ status: 200, description: 'The demo store; the session in `Set-Cookie`.', schema: CheckoutSessionSchema, headers: { setCookie: true } }],
    problems: ['not-found'],
  },
  {
    method: 'get',
    path: '/api/mockpay/intents/{id}',
    operationId: 'getMockpayIntent',
    summary: 'Read a payment intent at the simulated provider',
    description: 'Only where mockpay is enabled (404 elsewhere). Unauthenticated: it plays the provider\'s page.',
    tag: 'Mockpay',
    security: [],
    pathParams: z.object({ id: z.string().meta({ description: 'The intent id: the order\'s `paymentIntentId`.', example: 'pi_3b9f0e1c2d4a' }) }),
    success: [{ status: 200, description: 'The intent.', schema: MockpayIntentSchema }],
    problems: ['not-found'],
  },
  {
    method: 'post',
    path: '/api/mockpay/intents/{id}/confirm',
    operationId: 'confirmMockpayIntent',
    summary: 'Pay (or fail) an intent, as the shopper on the provider\'s page',
    description: 'Each transition is one event delivered to `/api/webhooks/mockpay` with the chaos a real provider shows (copies, delays, earlier events again). The same button twice changes nothing; an impossible transition is 409 `payment-state-conflict`.',
    tag: 'Mockpay',
    security: [],
    pathParams: z.object({ id: z.string().meta({ description: 'The intent id.', example: 'pi_3b9f0e1c2d4a' }) }),
    body: { schema: ConfirmIntentSchema, required: true, examples: { succeed: { value: { outcome: 'succeed', chaos: { duplicates: 3, maxDelayMs: 500, reorder: true } } } } },
    success: [{ status: 200, description: 'The intent after the transition.', schema: MockpayActionResultSchema }],
    problems: ['not-found', ...jsonBody, 'payment-state-conflict'],
  },
  {
    method: 'post',
    path: '/api/mockpay/intents/{id}/refund',
    operationId: 'refundMockpayIntent',
    summary: 'Refund an intent in the simulated provider\'s dashboard',
    description: 'The merchant\'s refund at the provider: the app learns of it from the webhook, as a refund of `source: provider`. `amount` defaults to all that remains; more than remains is 409 `payment-state-conflict` with `remaining`.',
    tag: 'Mockpay',
    security: [],
    pathParams: z.object({ id: z.string().meta({ description: 'The intent id.', example: 'pi_3b9f0e1c2d4a' }) }),
    body: { schema: RefundIntentSchema, required: false, examples: { part: { value: { amount: 50000 } } } },
    success: [{ status: 200, description: 'The intent after the refund, with the refund made.', schema: MockpayActionResultSchema }],
    problems: ['not-found', ...jsonBody, 'payment-state-conflict'],
  },
  {
    method: 'get',
    path: '/api/health',
    operationId: 'health',
    summary: 'Liveness',
    description: 'Answers while the process runs, before and regardless of the database.',
    tag: 'Health',
    security: [],
    success: [{ status: 200, description: 'The process is up.', schema: HealthSchema }],
    problems: [],
  },
  {
    method: 'get',
    path: '/api/ready',
    operationId: 'ready',
    summary: 'Readiness: Postgres and the lock backend answer',
    description: 'Each check is bounded to 2 s. With the ops token the report adds `payments`, whether the payment provider is failing (never a reason to be unready).',
    tag: 'Health',
    security: [[], ['opsToken']],
    success: [{ status: 200, description: 'Ready.', schema: ReadinessSchema }],
    others: [{ status: 503, description: 'A check failed (`ok: false`), with `Retry-After`.', schema: ReadinessSchema, headers: { retryAfter: true } }],
    problems: [],
  },
  {
    method: 'get',
    path: '/api/metrics',
    operationId: 'metrics',
    summary: 'Prometheus metrics of this process',
    description: 'Prometheus text exposition (`text/plain; version=0.0.4`), never cached. Each process counts its own: scrape every instance.',
    tag: 'Ops',
    security: ops,
    success: [{ status: 200, description: 'The metrics.', schema: z.string(), mediaType: 'text/plain', headers: { cacheControl: true } }],
    problems: ['unauthorized'],
  },
  {
    method: 'get',
    path: '/api/openapi.json',
    operationId: 'openApiDocument',
    summary: 'This description',
    description: 'The OpenAPI 3.1 document of every `/api` route, generated from the schemas the routes validate with. Rendered at `/docs`.',
    tag: 'Meta',
    security: [],
    success: [{
      status: 200,
      description: 'The document.',
      schema: z.looseObject({ openapi: z.literal('3.1.0'), info: z.looseObject({ title: z.string(), version: z.string() }), paths: z.record(z.string(), z.unknown()) }),
    }],
    problems: [],
  },

  // ---------------------------------------------------------------------------------------------
  // ops: every /api/ops path needs the ops token (server/middleware/01.ops-guard.ts)
  // ---------------------------------------------------------------------------------------------
  {
    method: 'post',
    path: '/api/ops/tenants',
    operationId: 'createTenant',
    summary: 'Create a tenant and its first secret key',
    description: 'The secret key is shown this once (stored hashed). Kept in `operator_actions` as `tenant.created`.',
    tag: 'Ops: tenants',
    security: ops,
    body: { schema: CreateTenantBody, required: true },
    success: [{
      status: 201,
      description: 'Created.',
      schema: OpsCreatedTenantSchema,
      headers: { cacheControl: true },
      examples: { created: { value: { tenant: { id: 'ten_0f3a9c', name: 'acme' }, secretKey: 'sk_Zl3kq9Xw2mP0vTn8RcY4aB' } } },
    }],
    problems: ['unauthorized', ...jsonBody],
  },
  {
    method: 'get',
    path: '/api/ops/tenants/{id}/keys',
    operationId: 'listApiKeys',
    summary: 'List a tenant\'s secret keys (never the secrets)',
    tag: 'Ops: tenants',
    security: ops,
    pathParams: z.object({ id: TenantIdParam }),
    success: [{ status: 200, description: 'Newest first.', schema: OpsApiKeyListSchema }],
    problems: ['unauthorized', 'not-found'],
  },
  {
    method: 'post',
    path: '/api/ops/tenants/{id}/keys',
    operationId: 'issueApiKey',
    summary: 'Issue another secret key (rotation)',
    description: 'The tenant\'s other keys keep working until revoked. Takes no body, or `{}`.',
    tag: 'Ops: tenants',
    security: ops,
    pathParams: z.object({ id: TenantIdParam }),
    body: { schema: IssueKeyBody, required: false },
    success: [{ status: 201, description: 'Issued: the secret is shown this once.', schema: OpsIssuedApiKeySchema, headers: { cacheControl: true } }],
    problems: ['unauthorized', 'not-found', ...jsonBody],
  },
  {
    method: 'delete',
    path: '/api/ops/tenants/{id}/keys/{keyId}',
    operationId: 'revokeApiKey',
    summary: 'Revoke a secret key',
    description: '401 at once on the instance that revoked it, within 10 s on the others. Revoking a revoked key is 204 again.',
    tag: 'Ops: tenants',
    security: ops,
    pathParams: z.object({ id: TenantIdParam, keyId: ApiKeyIdParam }),
    success: [{ status: 204, description: 'Revoked (or already).' }],
    problems: ['unauthorized', 'not-found'],
  },
  {
    method: 'get',
    path: '/api/ops/jobs',
    operationId: 'listJobs',
    summary: 'List outbox jobs',
    tag: 'Ops: jobs',
    security: ops,
    query: JobsQuery,
    success: [{ status: 200, description: 'Newest first.', schema: OpsJobListSchema }],
    problems: ['unauthorized', 'validation-failed'],
  },
  {
    method: 'post',
    path: '/api/ops/jobs/{id}/retry',
    operationId: 'redriveJob',
    summary: 'Redrive a dead letter',
    description: 'Queued now with a fresh set of attempts, its error history kept. Any other status is 409 `job-not-retryable`.',
    tag: 'Ops: jobs',
    security: ops,
    pathParams: z.object({ id: z.string().meta({ description: 'A job id, `job_…`.' }) }),
    success: [{ status: 200, description: 'The job, queued again.', schema: OpsJobSchema }],
    problems: ['unauthorized', 'not-found', 'job-not-retryable'],
  },
  {
    method: 'post',
    path: '/api/ops/jobs/{id}/dismiss',
    operationId: 'dismissJob',
    summary: 'Dismiss a dead letter that can never succeed',
    description: 'Final: never claimed, rescued or redriven again. Kept in `operator_actions` as `job.dismissed` with the reason.',
    tag: 'Ops: jobs',
    security: ops,
    pathParams: z.object({ id: z.string().meta({ description: 'A job id, `job_…`.' }) }),
    body: { schema: DismissJobBody, required: true },
    success: [{ status: 200, description: 'The job, now `dismissed`.', schema: OpsJobSchema }],
    problems: ['unauthorized', ...jsonBody, 'not-found', 'job-not-dismissable'],
  },
  {
    method: 'post',
    path: '/api/ops/tasks/{name}',
    operationId: 'runTask',
    summary: 'Run a maintenance task now',
    description: 'They also run on their schedule; each takes a lock, so it is safe with many instances.',
    tag: 'Ops: jobs',
    security: ops,
    pathParams: z.object({ name: TaskNameParam }),
    success: [{ status: 200, description: 'What the task reported.', schema: OpsTaskRunSchema }],
    problems: ['unauthorized', 'not-found'],
  },
  {
    method: 'get',
    path: '/api/ops/ledger/discrepancies',
    operationId: 'listLedgerDiscrepancies',
    summary: 'List the ledger check\'s discrepancies',
    description: 'What the ledger check (`payments:ledger-check`) found differing between an order\'s ledger and its provider\'s and could not heal, with both ledgers as last seen; newest first.',
    tag: 'Ops: orders',
    security: ops,
    query: DiscrepanciesQuery,
    success: [{ status: 200, description: 'The discrepancies.', schema: OpsLedgerDiscrepancyListSchema }],
    problems: ['unauthorized', 'validation-failed'],
  },
  {
    method: 'post',
    path: '/api/ops/ledger/discrepancies/{id}/resolve',
    operationId: 'resolveLedgerDiscrepancy',
    summary: 'Resolve a ledger discrepancy',
    description: 'Closes an open discrepancy with what was done about it; the ledgers are not touched. Kept in `operator_actions` as `ledger_discrepancy.resolved` with the note and the operator. A later check does not open it again while both ledgers stay as they were; any change opens it anew.',
    tag: 'Ops: orders',
    security: ops,
    pathParams: z.object({ id: z.string().meta({ description: 'A discrepancy id, `ldg_…`.' }) }),
    body: { schema: ResolveDiscrepancyBody, required: true },
    success: [{ status: 200, description: 'The discrepancy, now `resolved`.', schema: OpsLedgerDiscrepancySchema }],
    problems: ['unauthorized', ...jsonBody, 'not-found', 'discrepancy-not-open'],
  },
  {
    method: 'get',
    path: '/api/ops/orders/{id}',
    operationId: 'getOpsOrder',
    summary: 'Read any tenant\'s order',
    tag: 'Ops: orders',
    security: ops,
    pathParams: orderPath,
    success: [{ status: 200, description: 'The order as its tenant reads it, with the tenant.', schema: OpsOrderSchema }],
    problems: ['unauthorized', 'not-found'],
  },
  {
    method: 'post',
    path: '/api/ops/orders/{id}/refunds',
    operationId: 'createOpsRefund',
    summary: 'Refund an order as an operator, exactly once per Idempotency-Key',
    description: 'The same refund as the shop\'s, under the operators\' own key scope, kept in `operator_actions` as `refund.created`.',
    tag: 'Ops: orders',
    security: ops,
    pathParams: orderPath,
    idempotent: true,
    body: { schema: CreateRefundSchema, required: false, examples: { partial: { value: { amount: 60000, reason: 'requested_by_customer' } } } },
    success: [{ status: 201, description: 'Admitted — or the replay of the refund this key made.', schema: RefundResponseSchema, headers: { location: true, ...keyedAnswer } }],
    problems: ['unauthorized', 'not-found', ...keyed, ...jsonBody, 'order-not-refundable', 'refund-exceeds-remaining', 'restock-exceeds-committed'],
  },
  {
    method: 'get',
    path: '/api/ops/inventory',
    operationId: 'listOpsInventory',
    summary: 'List tracked SKUs of every tenant',
    description: 'Each tracked SKU\'s counts with its tenant, the most recently moved first (docs/inventory.md#read-stock), at most 100.',
    tag: 'Ops: inventory',
    security: ops,
    query: InventoryListQuery,
    success: [{ status: 200, description: 'The tracked SKUs.', schema: OpsStockListSchema }],
    problems: ['unauthorized', 'validation-failed'],
  },
  {
    method: 'get',
    path: '/api/ops/inventory/{tenantId}/{sku}',
    operationId: 'getOpsInventory',
    summary: 'A SKU\'s counts, stock ledger and holding orders',
    description: 'The counts, the latest 100 ledger rows (docs/inventory.md#the-stock-ledger), the orders holding a reservation, and the ledger\'s sums, which equal the counts.',
    tag: 'Ops: inventory',
    security: ops,
    pathParams: InventoryPathParams,
    success: [{ status: 200, description: 'The SKU\'s inventory.', schema: OpsInventorySchema }],
    problems: ['unauthorized', 'not-found'],
  },
  {
    method: 'get',
    path: '/api/ops/events',
    operationId: 'listOpsEvents',
    summary: 'List events of every tenant, with their deliveries',
    description: 'Our events (docs/events.md), newest first, each with its deliveries: per endpoint, the status of its latest `webhook.deliver` job, how many jobs and attempts it took, the last HTTP status, and whether any attempt was delivered (a 2xx).',
    tag: 'Ops: events',
    security: ops,
    query: EventsListQuery,
    success: [{ status: 200, description: 'Newest first.', schema: OpsEventListSchema }],
    problems: ['unauthorized', 'validation-failed'],
  },
  {
    method: 'get',
    path: '/api/ops/events/{id}',
    operationId: 'getOpsEvent',
    summary: 'An event, and every attempt to deliver it',
    description: 'The event with its data and, per endpoint, its delivery jobs (the first and each resend) and every attempt: HTTP status, latency, the start of the answer, the error when there was no answer.',
    tag: 'Ops: events',
    security: ops,
    pathParams: z.object({ id: EventIdParam }),
    success: [{ status: 200, description: 'The event and its deliveries.', schema: OpsEventDetailSchema }],
    problems: ['unauthorized', 'not-found'],
  },
  {
    method: 'post',
    path: '/api/ops/events/{id}/resend',
    operationId: 'resendOpsEvent',
    summary: 'Send an event again, under the same webhook-id',
    description: 'Enqueues one new `webhook.deliver` job per endpoint (the one named, or every enabled endpoint of the tenant subscribed to the event\'s type), with the payload of the first delivery: the receiver sees the same `webhook-id` (the event id) and can drop it if it has it. '
      + 'Kept in `operator_actions` as `event.resent`. An endpoint of another tenant is 404; a disabled or unsubscribed one (or none at all) is 409 `event-not-resendable`, nothing enqueued.',
    tag: 'Ops: events',
    security: ops,
    pathParams: z.object({ id: EventIdParam }),
    body: { schema: ResendEventBody, required: false },
    success: [{ status: 202, description: 'Enqueued: the new job per endpoint.', schema: OpsResendSchema }],
    problems: ['unauthorized', 'not-found', ...jsonBody, 'event-not-resendable'],
  },
  {
    method: 'get',
    path: '/api/ops/webhook-endpoints',
    operationId: 'listOpsWebhookEndpoints',
    summary: 'List webhook endpoints of every tenant, with their health',
    description: 'Newest first: status (and why disabled), since when it has been failing, its last success and failure, and its attempts of the last 24 hours (count, delivered, success rate, median latency). Never a secret.',
    tag: 'Ops: events',
    security: ops,
    query: WebhookEndpointsListQuery,
    success: [{ status: 200, description: 'Newest first.', schema: OpsWebhookEndpointListSchema }],
    problems: ['unauthorized', 'validation-failed'],
  },
  {
    method: 'get',
    path: '/api/ops/evidence',
    operationId: 'getEvidence',
    summary: 'The evidence timeline of a key, order, event, request or API key',
    description: 'Exactly one of `key`, `orderId`, `eventId`, `requestId`, `keyId` (`scope` narrows `key`); anything else is 400 `validation-failed`. `eventId` finds a payment provider\'s event and one of ours (`evt_…`, with its delivery attempts) alike.',
    tag: 'Ops: evidence',
    security: ops,
    query: EvidenceQuery,
    success: [{ status: 200, description: 'One chronological timeline.', schema: EvidenceSchema }],
    problems: ['unauthorized', 'validation-failed'],
  },
  {
    method: 'get',
    path: '/api/ops/audit/duplicates',
    operationId: 'auditDuplicates',
    summary: 'Exactly-once violations and suspects',
    tag: 'Ops: evidence',
    security: ops,
    query: AuditQuery,
    success: [{ status: 200, description: 'The audit.', schema: DuplicatesAuditSchema }],
    problems: ['unauthorized', 'validation-failed'],
  },
  {
    method: 'get',
    path: '/api/ops/idempotency',
    operationId: 'listIdempotencyRecords',
    summary: 'List idempotency records',
    tag: 'Ops: evidence',
    security: ops,
    query: RecordsQuery,
    success: [{ status: 200, description: 'Newest first.', schema: OpsIdempotencyRecordListSchema }],
    problems: ['unauthorized', 'validation-failed'],
  },
  {
    method: 'get',
    path: '/api/ops/mailbox',
    operationId: 'listMailbox',
    summary: 'The dev mailbox',
    tag: 'Ops: evidence',
    security: ops,
    query: MailboxQuery,
    success: [{ status: 200, description: 'Newest first.', schema: OpsMailboxMessageListSchema }],
    problems: ['unauthorized', 'validation-failed'],
  },
]
