import { z } from 'zod'
import type { ZodOpenApiMediaTypeObject, ZodOpenApiResponseObject } from 'zod-openapi'
import { IdempotencySchema, OrderStatusSchema } from '../../shared/api-schemas'
import { jobStatuses } from '../../shared/statuses'
import { problemCatalog, type ProblemSlug } from '../problems'
import { responseHeaders } from './headers'

/**
 * RFC 9457 problems, one schema per slug of the catalogue (server/problems/catalog.ts): its `type`,
 * `title` and `status` are constants, `detail` is free text, and the extension members a slug
 * carries are listed here. A route's responses group its slugs by status.
 */

export const PROBLEM_MEDIA_TYPE = 'application/problem+json'

/** The members a slug adds to the standard four. Business refusals are stored and replayed under the key: they carry `idempotency`. */
const problemExtensions: Partial<Record<ProblemSlug, z.ZodRawShape>> = {
  'validation-failed': {
    errors: z.array(z.object({
      path: z.string().meta({ description: 'The field, dotted (`items.0.quantity`), or `(body)` / `(query)` for the whole.' }),
      message: z.string(),
    })).min(1),
  },
  'cart-already-ordered': { orderId: z.string().meta({ description: 'The order this cart already has.' }), idempotency: IdempotencySchema },
  'insufficient-stock': {
    items: z.array(z.object({ sku: z.string(), requested: z.number().int().min(1), available: z.number().int().min(0) })).min(1)
      .meta({ description: 'Each tracked item short of units (its quantities summed), with what is available now.' }),
    idempotency: IdempotencySchema,
  },
  'stock-below-reserved': { onHand: z.number().int().min(0), reserved: z.number().int().min(0), idempotency: IdempotencySchema.optional() },
  'restock-exceeds-committed': {
    restockable: z.array(z.object({ sku: z.string(), quantity: z.number().int().min(1) })).meta({ description: 'Per SKU, the units the refund may still put back.' }),
    idempotency: IdempotencySchema,
  },
  'order-not-refundable': { orderStatus: OrderStatusSchema, idempotency: IdempotencySchema },
  'refund-exceeds-remaining': { remaining: z.number().int().min(0).meta({ description: 'What can still be refunded, in the order\'s units.' }), idempotency: IdempotencySchema },
  'order-not-cancelable': { orderStatus: OrderStatusSchema, idempotency: IdempotencySchema },
  // An idempotent route's 404 found inside its transaction (the order vanished from the tenant's view) is stored too.
  'not-found': { idempotency: IdempotencySchema.optional() },
  'job-not-retryable': { jobStatus: z.enum(jobStatuses) },
  'job-not-dismissable': { jobStatus: z.enum(jobStatuses) },
  'payment-state-conflict': {
    intentStatus: z.string().meta({ description: 'The intent\'s current state.' }),
    remaining: z.number().int().min(0).optional().meta({ description: 'A refund for more than remains: what remains.' }),
  },
}

/** Slugs whose answer is stored under the key and replayed (with `Idempotent-Replayed: true`). */
export const storedProblemSlugs: readonly ProblemSlug[] = ['cart-already-ordered', 'insufficient-stock', 'stock-below-reserved', 'restock-exceeds-committed', 'order-not-refundable', 'refund-exceeds-remaining', 'order-not-cancelable', 'not-found']

const componentName = (slug: string) => `${slug.replace(/(^|-)(\w)/g, (_, _dash, letter: string) => letter.toUpperCase())}Problem`

function problemSchema(slug: ProblemSlug): z.ZodType {
  const { status, title, explanation } = problemCatalog[slug]
  return z.looseObject({
    type: z.literal(`/problems/${slug}`).meta({ description: 'Resolves (relative to the API\'s origin) to a short page about this problem.' }),
    title: z.literal(title),
    status: z.literal(status),
    detail: z.string().meta({ description: 'What happened to this request, and what to do.' }),
    ...problemExtensions[slug],
  }).meta({ id: componentName(slug), title, description: explanation })
}

export const problemSchemas = Object.fromEntries((Object.keys(problemCatalog) as ProblemSlug[]).map(slug => [slug, problemSchema(slug)])) as Record<ProblemSlug, z.ZodType>

/** One status's problems: each slug's schema, any of them. */
export function problemContent(slugs: readonly ProblemSlug[]): Record<string, ZodOpenApiMediaTypeObject> {
  const schemas = slugs.map(slug => problemSchemas[slug])
  return { [PROBLEM_MEDIA_TYPE]: { schema: schemas.length === 1 ? schemas[0]! : z.union(schemas) } }
}

/** Problems every route (or every route of a kind) can answer, shared as components.responses. */
export const sharedProblemResponses = {
  MalformedRequest: { slugs: ['malformed-request'], description: 'Node\'s HTTP parser rejected the request (a control character in a header).' },
  Unauthorized: { slugs: ['unauthorized'], description: 'Missing, unknown or revoked credentials.' },
  NotFound: { slugs: ['not-found'], description: 'Nothing exists at this address for your credentials.' },
  PayloadTooLarge: { slugs: ['payload-too-large'], description: 'The body is over 64 KiB.' },
  UnsupportedMediaType: { slugs: ['unsupported-media-type'], description: 'The body is not sent as JSON.' },
  HeadersTooLarge: { slugs: ['headers-too-large'], description: 'The request headers are over 16 KiB.' },
  InternalError: { slugs: ['internal-error'], description: 'An unexpected error: nothing was committed and the key was released; retry with the same key.' },
  ServiceUnavailable: { slugs: ['service-unavailable'], description: 'The database is unreachable or not ready yet: nothing was executed. Retry after `Retry-After` seconds, with the same key.', headers: ['Retry-After'] },
} satisfies Record<string, { slugs: ProblemSlug[], description: string, headers?: string[] }>

export function sharedResponseComponents(): Record<string, ZodOpenApiResponseObject> {
  return Object.fromEntries(Object.entries(sharedProblemResponses).map(([name, shared]) => [name, {
    description: shared.description,
    headers: responseHeaders({ retryAfter: 'headers' in shared }),
    content: problemContent(shared.slugs),
  }]))
}

/** The shared response that answers exactly these slugs, if there is one. */
export function sharedResponseFor(slugs: readonly ProblemSlug[]): string | undefined {
  return Object.entries(sharedProblemResponses).find(([, shared]) => shared.slugs.length === slugs.length && shared.slugs.every(slug => slugs.includes(slug)))?.[0]
}
