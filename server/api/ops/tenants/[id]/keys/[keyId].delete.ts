import { useDatabaseHandle } from '../../../../../db'
import { apiKeyIdParam, revokeApiKey, tenantIdParam } from '../../../../../tenants/service'

/** Revokes a key: 204, again 204 for a key already revoked. */
export default defineEventHandler(async (event) => {
  const tenantId = tenantIdParam(getRouterParam(event, 'id'))
  const keyId = apiKeyIdParam(tenantId, getRouterParam(event, 'keyId'))
  await revokeApiKey(useDatabaseHandle().db, tenantId, keyId, { requestId: event.context.requestId })
  return sendNoContent(event)
})
