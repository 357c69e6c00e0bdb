import type { events } from '../db/schema'

type EventRow = typeof events.$inferSelect

/** An event as GET /api/events lists it and as a webhook delivers it (docs/events.md). */
export interface EventView {
  id: string
  object: 'event'
  type: EventRow['type']
  /** Unix seconds. */
  created: number
  sequence: number
  data: { object: Record<string, unknown> }
}

export function serializeEvent(row: Pick<EventRow, 'id' | 'type' | 'createdAt' | 'sequence' | 'data'>): EventView {
  return { id: row.id, object: 'event', type: row.type, created: Math.floor(row.createdAt.getTime() / 1000), sequence: row.sequence, data: { object: row.data } }
}
