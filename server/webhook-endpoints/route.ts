import { getRouterParam, type H3Event } from 'h3'
import { requireIdempotencyKey } from 'nuxt-idempotency/server'
import { useConfig } from '../config'
import { useDatabaseHandle } from '../db'
import { readValidatedJson, readValidatedQuery } from '../http/body'
import { runCheckoutIdempotent } from '../http/idempotent'
import { problem } from '../problems'
import { tenantScope } from '../../shared/resources'
import { endpointUrlRefusal } from './address-guard'
import { CreateWebhookEndpointSchema, UpdateWebhookEndpointSchema, WebhookEndpointIdSchema, WebhookEndpointListQuery } from './schema'
import {
  createEndpoint, deleteEndpoint, type DeletedWebhookEndpointView, findEndpoint, listEndpoints, rotateSecret, serializeEndpoint,
  unknownEndpointProblem, updateEndpoint, type WebhookEndpointView, withSecret,
} from './service'

/** The webhook endpoint routes (docs/events.md#webhook-endpoints): the id from the path, the body, the service. */

function endpointIdOf(event: H3Event): string {
  const id = WebhookEndpointIdSchema.safeParse(getRouterParam(event, 'id'))
  if (!id.success) throw unknownEndpointProblem(String(getRouterParam(event, 'id')))
  return id.data
}

/** 400 unless the URL may receive events (address-guard.ts): nothing is stored, the key stays free. */
async function assertDeliverableUrl(url: string): Promise<void> {
  const refusal = await endpointUrlRefusal(new URL(url), useConfig().WEBHOOK_ENDPOINTS_ALLOW_PRIVATE)
  if (!refusal) return
  throw problem('validation-failed', `The url cannot receive events: it ${refusal}. Nothing was stored: send a public https: URL.`, {
    extensions: { errors: [{ path: 'url', message: refusal }] },
  })
}

/** POST /api/webhook-endpoints: one endpoint per Idempotency-Key; its replay answers the same secret. */
export async function postWebhookEndpoint(event: H3Event, tenantId: string) {
  const key = requireIdempotencyKey(event)
  const input = await readValidatedJson(event, CreateWebhookEndpointSchema)
  await assertDeliverableUrl(input.url)
  const reply = await runCheckoutIdempotent(event, {
    mode: 'atomic',
    scope: tenantScope(tenantId),
    route: 'POST /api/webhook-endpoints',
    key,
    payload: input,
    ttlSeconds: useConfig().IDEMPOTENCY_TTL_SECONDS,
    execute: async (tx) => {
      const row = await createEndpoint(tx, tenantId, input)
      return { status: 201, body: withSecret(row), resourceType: 'webhook_endpoint', resourceId: row.id }
    },
  })
  return reply.body
}

/** GET /api/webhook-endpoints */
export async function readEndpointList(event: H3Event, tenantId: string) {
  const page = readValidatedQuery(event, WebhookEndpointListQuery)
  const listed = await listEndpoints(useDatabaseHandle().db, tenantId, page)
  if (!listed) {
    throw problem('validation-failed', 'The query has 1 invalid field; see errors. Fix it and send the request again.', {
      extensions: { errors: [{ path: 'startingAfter', message: 'names no webhook endpoint of yours: use the id of the last endpoint of the page before' }] },
    })
  }
  return { object: 'list' as const, ...listed }
}

/** GET /api/webhook-endpoints/:id: with its health. */
export async function readEndpoint(event: H3Event, tenantId: string): Promise<WebhookEndpointView> {
  const id = endpointIdOf(event)
  const row = await findEndpoint(useDatabaseHandle().db, tenantId, id)
  if (!row) throw unknownEndpointProblem(id)
  return serializeEndpoint(row)
}

/** PATCH /api/webhook-endpoints/:id: the same change again changes nothing, so no key. */
export async function patchEndpoint(event: H3Event, tenantId: string): Promise<WebhookEndpointView> {
  const id = endpointIdOf(event)
  const update = await readValidatedJson(event, UpdateWebhookEndpointSchema)
  const { db } = useDatabaseHandle()
  if (!await findEndpoint(db, tenantId, id)) throw unknownEndpointProblem(id)
  if (update.url !== undefined) await assertDeliverableUrl(update.url)
  const row = await updateEndpoint(db, tenantId, id, update)
  if (!row) throw unknownEndpointProblem(id)
  return serializeEndpoint(row)
}

/** DELETE /api/webhook-endpoints/:id */
export async function removeEndpoint(event: H3Event, tenantId: string): Promise<DeletedWebhookEndpointView> {
  const id = endpointIdOf(event)
  if (!await deleteEndpoint(useDatabaseHandle().db, tenantId, id)) throw unknownEndpointProblem(id)
  return { id, object: 'webhook_endpoint', deleted: true }
}

/** POST /api/webhook-endpoints/:id/rotate-secret: one rotation per Idempotency-Key; its replay answers the same secret. */
export async function postRotateSecret(event: H3Event, tenantId: string) {
  const id = endpointIdOf(event)
  const key = requireIdempotencyKey(event)
  const reply = await runCheckoutIdempotent(event, {
    mode: 'atomic',
    scope: tenantScope(tenantId),
    route: 'POST /api/webhook-endpoints/:id/rotate-secret',
    key,
    payload: { id },
    ttlSeconds: useConfig().IDEMPOTENCY_TTL_SECONDS,
    execute: async (tx) => {
      const row = await rotateSecret(tx, tenantId, id)
      if (!row) throw unknownEndpointProblem(id)
      return { status: 200, body: withSecret(row), resourceType: 'webhook_endpoint', resourceId: row.id }
    },
  })
  return reply.body
}
