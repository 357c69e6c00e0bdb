import { useDatabaseHandle } from '../../../../db'
import { listApiKeys, tenantIdParam } from '../../../../tenants/service'
import type { OpsApiKey, OpsList } from '../../../../../shared/ops-api'

export default defineEventHandler(async (event) => {
  requireOps(event)
  const tenantId = tenantIdParam(getRouterParam(event, 'id'))
  return { object: 'list', data: await listApiKeys(useDatabaseHandle().db, tenantId) } satisfies OpsList<OpsApiKey<Date>>
})
