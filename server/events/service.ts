import { and, asc, eq, gt, lt, sql } from 'drizzle-orm'
import type { Database } from '@idempotent-checkout/db-kit'
import { events } from '../db/schema'
import { problem } from '../problems'
import type { EventView } from '../../shared/events'
import type { EventListQuery } from './schema'
import { serializeEvent } from './serialize'

/**
 * The first sequence a transaction still running may yet commit an event with (drizzle/0017): the
 * oldest running transaction's id, shifted as `sequence` is. Events below it are all committed (or
 * never will be), so a page ends there and the next page, after its last id, misses none.
 */
const listableBelow = sql<number>`(pg_snapshot_xmin(pg_current_snapshot())::text::bigint << 12)`

/** A page of the tenant's events, oldest first, after the event `after` (docs/events.md#catch-up-get-apievents). */
export async function listEvents(db: Database, tenantId: string, query: EventListQuery): Promise<{ data: EventView[], hasMore: boolean }> {
  let afterSequence: number | undefined
  if (query.after !== undefined) {
    const [cursor] = await db.select({ sequence: events.sequence }).from(events).where(and(eq(events.tenantId, tenantId), eq(events.id, query.after)))
    if (!cursor) {
      throw problem('validation-failed', `No event "${query.after}" exists for your tenant. Pass the id of the last event of a page you were given, or leave out \`after\` to start from the oldest event.`, {
        extensions: { errors: [{ path: 'after', message: 'unknown event id' }] },
      })
    }
    afterSequence = cursor.sequence
  }
  const rows = await db.select().from(events)
    .where(and(
      eq(events.tenantId, tenantId),
      afterSequence === undefined ? undefined : gt(events.sequence, afterSequence),
      query.type === undefined ? undefined : eq(events.type, query.type),
      lt(events.sequence, listableBelow),
    ))
    .orderBy(asc(events.sequence)).limit(query.limit + 1)
  return { data: rows.slice(0, query.limit).map(serializeEvent), hasMore: rows.length > query.limit }
}
