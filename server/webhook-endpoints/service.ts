import { and, desc, eq, lt, or, sql } from 'drizzle-orm'
import type { z } from 'zod'
import type { Database } from '@idempotent-checkout/db-kit'
import { newSigningSecret } from '../config'
import { newId } from '../db/ids'
import { webhookEndpoints } from '../db/schema'
import { problem } from '../problems'
import type { DeletedWebhookEndpointSchema, WebhookEndpointSchema, WebhookEndpointWithSecretSchema } from '../../shared/api-schemas'
import type { CreateWebhookEndpointInput, UpdateWebhookEndpointInput } from './schema'

export type WebhookEndpointRow = typeof webhookEndpoints.$inferSelect
export type WebhookEndpointView = z.output<typeof WebhookEndpointSchema>
export type WebhookEndpointWithSecretView = z.output<typeof WebhookEndpointWithSecretSchema>
export type DeletedWebhookEndpointView = z.output<typeof DeletedWebhookEndpointSchema>
export type DisabledReason = NonNullable<WebhookEndpointView['disabledReason']>

/** How long the secret before a rotation keeps signing, so receivers can switch without losing an event. */
export const PREVIOUS_SECRET_SIGNS_FOR_MS = 24 * 60 * 60 * 1000

const isoOrNull = (time: Date | null) => time?.toISOString() ?? null

export function serializeEndpoint(row: WebhookEndpointRow): WebhookEndpointView {
  return {
    id: row.id,
    object: 'webhook_endpoint',
    url: row.url,
    events: row.events,
    description: row.description,
    status: row.status,
    disabledReason: row.disabledReason as DisabledReason | null,
    failingSince: isoOrNull(row.failingSince),
    lastSuccessAt: isoOrNull(row.lastSuccessAt),
    lastFailureAt: isoOrNull(row.lastFailureAt),
    // Past its expiry the previous secret signs nothing: not worth showing.
    previousSecretExpiresAt: row.previousSecretExpiresAt && row.previousSecretExpiresAt > new Date() ? row.previousSecretExpiresAt.toISOString() : null,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  }
}

export const withSecret = (row: WebhookEndpointRow): WebhookEndpointWithSecretView => ({ ...serializeEndpoint(row), secret: row.secret })

export const unknownEndpointProblem = (id: string) =>
  problem('not-found', `No webhook endpoint "${id}" exists for your key. List yours with GET /api/webhook-endpoints.`)

const owned = (tenantId: string, id: string) => and(eq(webhookEndpoints.tenantId, tenantId), eq(webhookEndpoints.id, id))

export async function createEndpoint(tx: Database, tenantId: string, input: CreateWebhookEndpointInput): Promise<WebhookEndpointRow> {
  const [row] = await tx.insert(webhookEndpoints).values({
    id: newId('we'),
    tenantId,
    url: input.url,
    events: input.events,
    description: input.description ?? null,
    secret: newSigningSecret(),
  }).returning()
  return row!
}

export async function findEndpoint(db: Database, tenantId: string, id: string): Promise<WebhookEndpointRow | undefined> {
  const [row] = await db.select().from(webhookEndpoints).where(owned(tenantId, id))
  return row
}

/** Newest first, keyset-paged by (created_at, id) after the endpoint `startingAfter` names; undefined when it names none of the tenant's. */
export async function listEndpoints(db: Database, tenantId: string, page: { limit: number, startingAfter?: string }): Promise<{ data: WebhookEndpointView[], hasMore: boolean } | undefined> {
  let after: WebhookEndpointRow | undefined
  if (page.startingAfter !== undefined) {
    after = await findEndpoint(db, tenantId, page.startingAfter)
    if (!after) return undefined
  }
  const rows = await db.select().from(webhookEndpoints)
    .where(and(
      eq(webhookEndpoints.tenantId, tenantId),
      after && or(lt(webhookEndpoints.createdAt, after.createdAt), and(eq(webhookEndpoints.createdAt, after.createdAt), lt(webhookEndpoints.id, after.id))),
    ))
    .orderBy(desc(webhookEndpoints.createdAt), desc(webhookEndpoints.id))
    .limit(page.limit + 1)
  return { data: rows.slice(0, page.limit).map(serializeEndpoint), hasMore: rows.length > page.limit }
}

/**
 * Changes what is sent; enabling clears the failure streak and why it was disabled (its next
 * failure starts a new streak), disabling by request says so.
 */
export async function updateEndpoint(db: Database, tenantId: string, id: string, update: UpdateWebhookEndpointInput): Promise<WebhookEndpointRow | undefined> {
  const status = update.status === undefined
    ? {}
    : update.status === 'enabled'
      ? { status: 'enabled' as const, disabledReason: null, failingSince: null }
      : { status: 'disabled' as const, disabledReason: 'requested' satisfies DisabledReason }
  const [row] = await db.update(webhookEndpoints).set({
    ...(update.url !== undefined && { url: update.url }),
    ...(update.events !== undefined && { events: update.events }),
    ...(update.description !== undefined && { description: update.description }),
    ...status,
    updatedAt: sql`now()`,
  }).where(owned(tenantId, id)).returning()
  return row
}

/** Deleted for good; its queued deliveries find it gone and complete without sending. */
export async function deleteEndpoint(db: Database, tenantId: string, id: string): Promise<boolean> {
  const deleted = await db.delete(webhookEndpoints).where(owned(tenantId, id)).returning({ id: webhookEndpoints.id })
  return deleted.length === 1
}

/** A new secret signs from now on; the one it replaces signs too for PREVIOUS_SECRET_SIGNS_FOR_MS. */
export async function rotateSecret(tx: Database, tenantId: string, id: string): Promise<WebhookEndpointRow | undefined> {
  const [row] = await tx.update(webhookEndpoints).set({
    previousSecret: sql`${webhookEndpoints.secret}`,
    previousSecretExpiresAt: sql`now() + ${PREVIOUS_SECRET_SIGNS_FOR_MS}::int * interval '1 millisecond'`,
    secret: newSigningSecret(),
    updatedAt: sql`now()`,
  }).where(owned(tenantId, id)).returning()
  return row
}
