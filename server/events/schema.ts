import { z } from 'zod'
import { eventTypes } from '../../shared/statuses'

export const EventIdSchema = z.string().regex(/^evt_[\w-]{1,64}$/, 'must be an event id (evt_…)')

/** GET /api/events (docs/events.md#catch-up-get-apievents). */
export const EventListQuery = z.object({
  after: EventIdSchema.optional(),
  type: z.enum(eventTypes).optional(),
  limit: z.coerce.number().int('must be an integer').min(1, 'must be 1 or more').max(100, 'must be at most 100').default(20),
}).strict()
export type EventListQuery = z.output<typeof EventListQuery>
