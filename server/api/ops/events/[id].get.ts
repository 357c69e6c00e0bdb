import { useDatabaseHandle } from '../../../db'
import { readEvent } from '../../../ops/events'
import type { OpsEventDetail } from '../../../../shared/ops-api'

/** One event, and per endpoint its delivery jobs and every attempt. */
export default defineEventHandler(async (event) => {
  return (await readEvent(useDatabaseHandle().db, getRouterParam(event, 'id') ?? '')) satisfies OpsEventDetail<Date>
})
