import type { H3Event } from 'h3'
import { useDatabaseHandle } from '../db'
import { readValidatedQuery } from '../http/body'
import { EventListQuery } from './schema'
import { listEvents } from './service'

/** GET /api/events */
export async function readEventList(event: H3Event, tenantId: string) {
  const query = readValidatedQuery(event, EventListQuery)
  return { object: 'list' as const, ...await listEvents(useDatabaseHandle().db, tenantId, query) }
}
