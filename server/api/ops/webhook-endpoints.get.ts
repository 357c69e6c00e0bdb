import { useDatabaseHandle } from '../../db'
import { readValidatedQuery } from '../../http/body'
import { listWebhookEndpoints } from '../../ops/events'
import { opsList } from '../../ops/list'
import { WebhookEndpointsQuery } from '../../ops/schemas'
import type { OpsList, OpsWebhookEndpoint } from '../../../shared/ops-api'

/** Webhook endpoints of every tenant (or one), newest first, with their health; never a secret. */
export default defineEventHandler(async (event) => {
  const filter = readValidatedQuery(event, WebhookEndpointsQuery)
  return opsList(await listWebhookEndpoints(useDatabaseHandle().db, filter)) satisfies OpsList<OpsWebhookEndpoint<Date>>
})
