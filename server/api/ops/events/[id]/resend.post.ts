import { useDatabaseHandle } from '../../../../db'
import { readOptionalValidatedJson } from '../../../../http/body'
import { resendEvent } from '../../../../ops/events'
import { ResendSchema } from '../../../../ops/schemas'
import type { OpsResend } from '../../../../../shared/ops-api'

/** Sends an event again under its own id (server/ops/events.ts); audited in operator_actions. */
export default defineEventHandler(async (event) => {
  const { endpointId } = await readOptionalValidatedJson(event, ResendSchema)
  const resent = await resendEvent(useDatabaseHandle().db, { requestId: event.context.requestId }, getRouterParam(event, 'id') ?? '', endpointId)
  setResponseStatus(event, 202)
  return resent satisfies OpsResend
})
