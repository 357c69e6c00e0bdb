import { useDatabaseHandle } from '../../db'
import { readValidatedQuery } from '../../http/body'
import { listEvents } from '../../ops/events'
import { opsList } from '../../ops/list'
import { EventsQuery } from '../../ops/schemas'
import type { OpsEvent, OpsList } from '../../../shared/ops-api'

/** Our events of every tenant (or one), newest first, each with where it was delivered. */
export default defineEventHandler(async (event) => {
  const filter = readValidatedQuery(event, EventsQuery)
  return opsList(await listEvents(useDatabaseHandle().db, filter)) satisfies OpsList<OpsEvent<Date>>
})
