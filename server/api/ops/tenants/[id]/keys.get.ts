import { useDatabaseHandle } from '../../../../db'
import { opsList } from '../../../../ops/list'
import { listApiKeys, tenantIdParam } from '../../../../tenants/service'
import type { OpsApiKey, OpsList } from '../../../../../shared/ops-api'

export default defineEventHandler(async (event) => {
  const tenantId = tenantIdParam(getRouterParam(event, 'id'))
  return opsList(await listApiKeys(useDatabaseHandle().db, tenantId)) satisfies OpsList<OpsApiKey<Date>>
})
