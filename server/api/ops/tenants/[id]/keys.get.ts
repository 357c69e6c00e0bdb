import { useDatabaseHandle } from '../../../../db'
import { listApiKeys, tenantIdParam } from '../../../../tenants/service'

export default defineEventHandler(async (event) => {
  requireOps(event)
  const tenantId = tenantIdParam(getRouterParam(event, 'id'))
  return { object: 'list', data: await listApiKeys(useDatabaseHandle().db, tenantId) }
})
