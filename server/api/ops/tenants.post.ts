import { useDatabaseHandle } from '../../db'
import { readValidatedJson } from '../../http/body'
import { CreateTenantSchema } from '../../tenants/schema'
import { createTenant } from '../../tenants/service'
import type { OpsCreatedTenant } from '../../../shared/ops-api'

export default defineEventHandler(async (event) => {
  const { name } = await readValidatedJson(event, CreateTenantSchema)
  const created = await createTenant(useDatabaseHandle().db, name, { requestId: event.context.requestId })
  setResponseStatus(event, 201)
  setResponseHeader(event, 'Cache-Control', 'no-store')
  return created satisfies OpsCreatedTenant
})
