import { useDatabaseHandle } from '../../../../db'
import { readOptionalValidatedJson } from '../../../../http/body'
import { IssueKeySchema } from '../../../../tenants/schema'
import { issueApiKey, tenantIdParam } from '../../../../tenants/service'
import type { OpsIssuedApiKey } from '../../../../../shared/ops-api'

/** Issues another secret key (shown once); the tenant's other keys keep working until revoked. */
export default defineEventHandler(async (event) => {
  const tenantId = tenantIdParam(getRouterParam(event, 'id'))
  await readOptionalValidatedJson(event, IssueKeySchema)
  const issued = await issueApiKey(useDatabaseHandle().db, tenantId, { requestId: event.context.requestId })
  setResponseStatus(event, 201)
  setResponseHeader(event, 'Cache-Control', 'no-store')
  return issued satisfies OpsIssuedApiKey
})
