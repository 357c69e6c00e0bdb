import { createDocument, type oas31, type ZodOpenApiOperationObject, type ZodOpenApiPathsObject, type ZodOpenApiResponseObject, type ZodOpenApiResponsesObject } from 'zod-openapi'
import { paymentStatusPrecedence } from '../orders/payment-state'
import { paymentMethods } from '../orders/schema'
import { problemCatalog, type ProblemSlug } from '../problems'
import { headerComponents, parameterComponents, parameterRef, responseHeaders } from './headers'
import { type ApiOperation, apiOperations, type SecurityName, type SuccessResponse } from './operations'
import { PROBLEM_MEDIA_TYPE, problemContent, sharedResponseComponents, sharedResponseFor, storedProblemSlugs } from './problems'

/**
 * The OpenAPI 3.1 document of every /api route, built from the registry (./operations.ts) with
 * zod-openapi. GET /api/openapi.json serves it; `npm run openapi:write` writes it to a file.
 */

/** Problems any request can meet: Node's parser, an unexpected error. Every route but liveness also waits for the database (503). */
const universalProblems: ProblemSlug[] = ['malformed-request', 'headers-too-large', 'internal-error']
const LIVENESS_PATH = '/api/health'

const securitySchemes: Record<SecurityName, oas31.SecuritySchemeObject> = {
  secretKey: { type: 'http', scheme: 'bearer', description: 'A tenant\'s secret key (`sk_…`), issued by `POST /api/ops/tenants` or `/api/ops/tenants/{id}/keys` and shown once. Missing, unknown or revoked: 401.' },
  checkoutSession: { type: 'apiKey', in: 'cookie', name: 'ic_checkout', description: 'The checkout page\'s sealed session (from `GET /api/checkout/session`), bound to the demo tenant; used only when no `Authorization` header is sent.' },
  opsToken: { type: 'http', scheme: 'bearer', description: 'The operators\' `OPS_TOKEN`: every `/api/ops/**` path and `/api/metrics`.' },
  standardWebhookSignature: { type: 'apiKey', in: 'header', name: 'webhook-signature', description: 'Standard Webhooks: `v1,<base64 HMAC-SHA256 of "webhook-id.webhook-timestamp.body">` keyed by `WEBHOOK_STANDARD_SECRET`, several space-separated during a key rotation.' },
  mockpayWebhookSignature: { type: 'apiKey', in: 'header', name: 'webhook-signature', description: 'Standard Webhooks signed with mockpay\'s own `MOCKPAY_WEBHOOK_SECRET`.' },
  stripeSignature: { type: 'apiKey', in: 'header', name: 'Stripe-Signature', description: '`t=<unix>,v1=<hex HMAC-SHA256 of "t.body">` keyed by `WEBHOOK_STRIPE_SECRET`.' },
}

const tags: oas31.TagObject[] = [
  { name: 'Orders', description: 'Orders, created exactly once per `Idempotency-Key`.' },
  { name: 'Refunds', description: 'Refunds of paid orders: never more than was paid, each asked of the provider once.' },
  { name: 'Inventory', description: 'Stock counts per SKU: orders reserve them, payments take them, cancels, expiries and refunds give them back.' },
  { name: 'Events', description: 'What changed, oldest first: the events webhook endpoints receive, to catch up on.' },
  { name: 'Webhook endpoints', description: 'Where the shop\'s systems are sent its events, signed (Standard Webhooks), retried until delivered.' },
  { name: 'Webhooks', description: 'What payment providers call: verified on the raw bytes, stored once per event id, processed asynchronously.' },
  { name: 'Checkout', description: 'The demo store\'s session.' },
  { name: 'Mockpay', description: 'The simulated payment provider (embedded and development mode only).' },
  { name: 'Health', description: 'Liveness and readiness probes.' },
  { name: 'Meta', description: 'This description.' },
  { name: 'Ops', description: 'Operators: `Authorization: Bearer <OPS_TOKEN>`.' },
  { name: 'Ops: tenants', description: 'Tenants and their secret keys.' },
  { name: 'Ops: jobs', description: 'The outbox worker\'s jobs and maintenance tasks.' },
  { name: 'Ops: orders', description: 'Any tenant\'s orders, and operators\' refunds.' },
  { name: 'Ops: inventory', description: 'Every tenant\'s tracked stock, with its ledger and the orders holding it.' },
  { name: 'Ops: events', description: 'Our events of every tenant with their deliveries, a resend under the same id, and each webhook endpoint\'s health.' },
  { name: 'Ops: evidence', description: 'The evidence locker, the duplicates audit, idempotency records and the dev mailbox.' },
]

const description = `An order, inventory, refund and payment-webhook API that executes each request **exactly once**, however often a client, proxy or provider repeats it.

- **Idempotency.** Every state-changing route takes an \`Idempotency-Key\` header (1–255 visible ASCII characters, or one RFC 8941 string: \`"abc"\` is the key \`abc\`). The same key and body answer the first request's status and body again, with \`Idempotent-Replayed: true\`; another body under the key is 422 \`idempotency-key-reused\`; a duplicate of a request still running is 409 \`request-in-progress\` with \`Retry-After\`, or waits for it with \`Prefer: wait=N\`. Webhooks are keyed by the provider's event id.
- **Errors** are RFC 9457 \`application/problem+json\` with \`type\` \`/problems/<slug>\` (a short page at that address). Bodies over 64 KiB are 413, non-JSON 415, malformed JSON 400 \`malformed-json\`; a request Node's HTTP parser rejects is 400 \`malformed-request\`, headers over 16 KiB 431; a method a path does not serve is 405 \`method-not-allowed\`; the database unreachable is 503 with \`Retry-After\`.
- **Request ids.** Every response carries \`X-Request-Id\` (yours when valid) and \`X-Server-Request-Id\`.
- **Test faults.** With \`FAULTS_ENABLED=true\` only, the \`X-Fault\` header injects \`delay-before-commit=<ms>\`, \`delay-after-commit=<ms>\`, \`drop-after-commit\`, \`crash-after-commit\`, \`fail-before-commit\`.`

/** Example values of the members a problem adds, so each problem response shows a valid example. */
const problemExampleMembers: Partial<Record<ProblemSlug, Record<string, unknown>>> = {
  'validation-failed': { errors: [{ path: 'amount', message: 'must equal the sum of quantity × unitPrice over items (150000)' }] },
  'cart-already-ordered': { orderId: 'ord_8cf2b5a4d0e1', idempotency: { key: '7d1e0b9a-2f1c-4c55-9e3a-1b2c3d4e5f60', replayed: false } },
  'insufficient-stock': { items: [{ sku: 'SKU-1', requested: 2, available: 1 }], idempotency: { key: '5f0c8a52-3f0e-4c7e-9a59-0c1c6f1f6b1e', replayed: false } },
  'stock-below-reserved': { onHand: 3, reserved: 2 },
  'restock-exceeds-committed': { restockable: [{ sku: 'SKU-1', quantity: 1 }], idempotency: { key: '9a1e4c1b-7c0e-4a55-8d0b-5a3f0e2b9c11', replayed: false } },
  'order-not-refundable': { orderStatus: 'pending_payment', idempotency: { key: '9a1e4c1b-7c0e-4a55-8d0b-5a3f0e2b9c11', replayed: false } },
  'refund-exceeds-remaining': { remaining: 40000, idempotency: { key: '9a1e4c1b-7c0e-4a55-8d0b-5a3f0e2b9c11', replayed: false } },
  'order-not-cancelable': { orderStatus: 'paid', idempotency: { key: '2c9e8f7a-6b5d-4c3b-a291-8f7e6d5c4b3a', replayed: false } },
  'job-not-retryable': { jobStatus: 'completed' },
  'job-not-dismissable': { jobStatus: 'completed' },
  'payment-state-conflict': { intentStatus: 'succeeded' },
}

function problemExamples(slugs: readonly ProblemSlug[]): Record<string, oas31.ExampleObject> {
  return Object.fromEntries(slugs.map((slug) => {
    const { status, title, explanation } = problemCatalog[slug]
    return [slug, { summary: title, value: { type: `/problems/${slug}`, title, status, detail: explanation, ...problemExampleMembers[slug] } }]
  }))
}

function answerResponse(answer: SuccessResponse): ZodOpenApiResponseObject {
  return {
    description: answer.description,
    headers: responseHeaders(answer.headers),
    ...(answer.schema && { content: { [answer.mediaType ?? 'application/json']: { schema: answer.schema, ...(answer.examples && { examples: answer.examples }) } } }),
  }
}

function responsesOf(operation: ApiOperation): ZodOpenApiResponsesObject {
  const responses: Record<string, ZodOpenApiResponseObject | oas31.ReferenceObject> = {}
  for (const answer of [...operation.success, ...operation.others ?? []]) responses[answer.status] = answerResponse(answer)

  const slugs = [...operation.problems, ...universalProblems, ...(operation.path === LIVENESS_PATH ? [] : ['service-unavailable' as const])]
  const byStatus = new Map<number, ProblemSlug[]>()
  for (const slug of new Set(slugs)) {
    const status = problemCatalog[slug].status
    byStatus.set(status, [...byStatus.get(status) ?? [], slug])
  }
  for (const [status, statusSlugs] of [...byStatus].sort(([a], [b]) => a - b)) {
    const stored = operation.idempotent === true && statusSlugs.some(slug => storedProblemSlugs.includes(slug))
    const shared = sharedResponseFor(statusSlugs)
    const existing = responses[status]
    if (shared && !stored && !existing) {
      responses[status] = { $ref: `#/components/responses/${shared}` }
      continue
    }
    const content = problemContent(statusSlugs)
    content[PROBLEM_MEDIA_TYPE]!.examples = problemExamples(statusSlugs)
    if (existing && !('$ref' in existing)) {
      // The readiness report's 503 and the database-not-ready problem share the status.
      existing.content = { ...existing.content, ...content }
      existing.description += ` Or a problem: ${statusSlugs.map(slug => `\`${slug}\``).join(', ')}.`
      continue
    }
    responses[status] = {
      description: statusSlugs.map(slug => `\`${slug}\`: ${problemCatalog[slug].title}.`).join(' '),
      headers: responseHeaders({
        retryAfter: statusSlugs.includes('request-in-progress') || statusSlugs.includes('service-unavailable'),
        replayed: stored,
        preferenceApplied: operation.idempotent,
      }),
      content,
    }
  }
  return responses as ZodOpenApiResponsesObject
}

function operationObject(operation: ApiOperation): ZodOpenApiOperationObject {
  const headerParameters = [
    ...(operation.idempotent ? [parameterRef('IdempotencyKey'), parameterRef('Prefer')] : []),
    ...(operation.headerParams ?? []).map(parameterRef),
    parameterRef('RequestId'),
  ]
  return {
    operationId: operation.operationId,
    summary: operation.summary,
    ...(operation.description && { description: operation.description }),
    tags: [operation.tag],
    security: operation.security.map(alternative => Object.fromEntries(alternative.map(name => [name, []]))),
    requestParams: { ...(operation.pathParams && { path: operation.pathParams }), ...(operation.query && { query: operation.query }) },
    parameters: headerParameters,
    ...(operation.body && {
      requestBody: {
        required: operation.body.required,
        ...(operation.body.description && { description: operation.body.description }),
        content: { 'application/json': { schema: operation.body.schema, ...(operation.body.examples && { examples: operation.body.examples }) } },
      },
    }),
    responses: responsesOf(operation),
  }
}

/** Enumerations the shared response schemas leave to the server (the client bundle does not carry them). */
function addServerEnums(document: oas31.OpenAPIObject): void {
  const schemas = document.components?.schemas as Record<string, oas31.SchemaObject> | undefined
  if (schemas?.OrderStatus) schemas.OrderStatus.enum = [...paymentStatusPrecedence]
  if (schemas?.PaymentMethod) schemas.PaymentMethod.enum = [...paymentMethods]
}

export function buildOpenApiDocument(): oas31.OpenAPIObject {
  const paths: ZodOpenApiPathsObject = {}
  for (const operation of apiOperations) {
    paths[operation.path] = { ...paths[operation.path], [operation.method]: operationObject(operation) }
  }
  const document = createDocument({
    openapi: '3.1.0',
    info: { title: 'Idempotent Checkout API', version: '1.0.0', description },
    servers: [{ url: '/', description: 'This server' }],
    tags,
    paths,
    components: {
      securitySchemes,
      parameters: parameterComponents,
      headers: headerComponents,
      responses: sharedResponseComponents(),
    },
  }) as oas31.OpenAPIObject
  addServerEnums(document)
  return document
}

let built: oas31.OpenAPIObject | undefined

/** Built once per process: the routes cannot change while it runs. */
export function openApiDocument(): oas31.OpenAPIObject {
  built ??= buildOpenApiDocument()
  return built
}
