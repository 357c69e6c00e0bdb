import { z } from 'zod'
import { eventTypes } from '../../shared/statuses'

/** A webhook endpoint id (`we_…`), as the routes take it from their path. */
export const WebhookEndpointIdSchema = z.string().regex(/^we_[\w-]{1,64}$/)

const MAX_URL_LENGTH = 2048
const MAX_DESCRIPTION_LENGTH = 500
/** Every type, or `*` for all of them, including types added later. */
const subscribable = [...eventTypes, '*'] as const

const EndpointUrlSchema = z.string()
  .max(MAX_URL_LENGTH, `must be at most ${MAX_URL_LENGTH} characters`)
  .refine(value => URL.canParse(value) && ['https:', 'http:'].includes(new URL(value).protocol) && new URL(value).hostname !== '', 'must be an absolute https: URL, e.g. https://shop.example/webhooks')
  .refine(value => !URL.canParse(value) || new URL(value).hash === '', 'must not have a #fragment: it is never sent')

const EventsSchema = z.array(z.enum(subscribable, { error: `must be one of ${subscribable.map(type => `"${type}"`).join(', ')} ("*": every type)` }))
  .min(1, 'must name at least one event type, or "*" for all')
  .max(subscribable.length, `must name at most ${subscribable.length} types`)
  .refine(types => new Set(types).size === types.length, 'must not name a type twice')

const DescriptionSchema = z.string().max(MAX_DESCRIPTION_LENGTH, `must be at most ${MAX_DESCRIPTION_LENGTH} characters`)

/** POST /api/webhook-endpoints (docs/events.md#create-an-endpoint). */
export const CreateWebhookEndpointSchema = z.object({
  url: EndpointUrlSchema,
  events: EventsSchema,
  description: DescriptionSchema.optional(),
}).strict()
export type CreateWebhookEndpointInput = z.output<typeof CreateWebhookEndpointSchema>

/** PATCH /api/webhook-endpoints/:id: what is sent changes; `description: null` removes it. */
export const UpdateWebhookEndpointSchema = z.object({
  url: EndpointUrlSchema.optional(),
  events: EventsSchema.optional(),
  description: DescriptionSchema.nullable().optional(),
  status: z.enum(['enabled', 'disabled'], { error: 'must be "enabled" or "disabled"' }).optional(),
}).strict().refine(update => Object.keys(update).length > 0, 'must change something: send at least one of url, events, description, status')
export type UpdateWebhookEndpointInput = z.output<typeof UpdateWebhookEndpointSchema>

/** GET /api/webhook-endpoints: newest first, a page after `startingAfter`. */
export const WebhookEndpointListQuery = z.object({
  limit: z.coerce.number().int('must be an integer').min(1, 'must be 1 or more').max(100, 'must be at most 100').default(20),
  startingAfter: WebhookEndpointIdSchema.optional(),
}).strict()
