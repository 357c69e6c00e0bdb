import { AuditQuery, DiscrepanciesQuery, DismissSchema, EventsQuery, EvidenceQuery, InventoryPath, InventoryQuery, JobsQuery, MailboxQuery, RecordsQuery, ResendSchema, ResolveDiscrepancySchema, TaskNameSchema, WebhookEndpointsQuery } from '../ops/schemas'
import { ApiKeyIdSchema, CreateTenantSchema, IssueKeySchema, TenantIdSchema } from '../tenants/schema'
import { EventIdSchema } from '../events/schema'

/**
 * The ops routes' inputs as the document shows them: the very schemas the routes validate with
 * (server/ops/schemas.ts, server/tenants/schema.ts), with the document's descriptions and examples.
 */

export const TenantIdParam = TenantIdSchema.meta({ description: 'A tenant id, `ten_…`; any other value is 404.', example: 'ten_0f3a9c' })
export const ApiKeyIdParam = ApiKeyIdSchema.meta({ description: 'An API key id, `key_…`; any other value is 404.', example: 'key_5d1e7b' })
export const CreateTenantBody = CreateTenantSchema.meta({ id: 'CreateTenantRequest', example: { name: 'acme' } })
export const IssueKeyBody = IssueKeySchema.meta({ id: 'IssueApiKeyRequest', description: 'No body, or an empty object.' })
export const DismissJobBody = DismissSchema.meta({ id: 'DismissJobRequest', example: { reason: 'The order was deleted; nothing left to confirm.' } })
export const ResolveDiscrepancyBody = ResolveDiscrepancySchema.meta({ id: 'ResolveDiscrepancyRequest', example: { note: 'Refunded the shopper by hand in the dashboard; the provider confirmed the first refund failed.', operator: 'dana' } })
export { AuditQuery, DiscrepanciesQuery, EvidenceQuery, JobsQuery, MailboxQuery, RecordsQuery }
export const InventoryListQuery = InventoryQuery.extend({
  tenantId: InventoryQuery.shape.tenantId.meta({ description: 'Only this tenant\'s SKUs.', example: 'ten_demo_store' }),
  sku: InventoryQuery.shape.sku.meta({ description: 'Only this SKU (of any tenant, unless `tenantId` narrows it).', example: 'TOTE-CANVAS' }),
})
export const InventoryPathParams = InventoryPath.extend({
  tenantId: InventoryPath.shape.tenantId.meta({ description: 'The tenant whose stock it is, `ten_…`.', example: 'ten_demo_store' }),
  sku: InventoryPath.shape.sku.meta({ description: 'A SKU the tenant tracks, as it is (no encoding needed); any other value is 404.', example: 'TOTE-CANVAS' }),
})
/** Any other name is 404. */
export const TaskNameParam = TaskNameSchema
export const EventsListQuery = EventsQuery.extend({
  tenant: EventsQuery.shape.tenant.meta({ description: 'Only this tenant\'s events.', example: 'ten_demo_store' }),
  type: EventsQuery.shape.type.meta({ description: 'Only events of this type.' }),
  orderId: EventsQuery.shape.orderId.meta({ description: 'Only the events of this order (its own and its refunds\').', example: 'ord_8cf2b5a4d0e1' }),
})
export const EventIdParam = EventIdSchema.meta({ description: 'An event id, `evt_…`; any other value is 404.', example: 'evt_2q8Lr0cYt1mB6w9kN3pXaQ' })
export const ResendEventBody = ResendSchema.meta({ id: 'ResendEventRequest', description: 'No body (or `{}`): every enabled endpoint subscribed to the event\'s type. `endpointId`: that endpoint only.', example: { endpointId: 'we_4f8a2c' } })
export const WebhookEndpointsListQuery = WebhookEndpointsQuery.extend({
  tenant: WebhookEndpointsQuery.shape.tenant.meta({ description: 'Only this tenant\'s endpoints.', example: 'ten_demo_store' }),
})
