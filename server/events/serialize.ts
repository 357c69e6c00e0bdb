import type { events } from '../db/schema'
import type { EventView } from '../../shared/events'

type EventRow = typeof events.$inferSelect

/** An event as GET /api/events lists it and as a webhook endpoint receives it (Stripe's shape, docs/events.md). */
export function serializeEvent(row: Pick<EventRow, 'id' | 'type' | 'createdAt' | 'sequence' | 'data'>): EventView {
  return { id: row.id, object: 'event', type: row.type, created: Math.floor(row.createdAt.getTime() / 1000), sequence: row.sequence, data: { object: row.data } }
}
