import { createHash, randomBytes } from 'node:crypto'
import { and, desc, eq, isNull, sql } from 'drizzle-orm'
import { ExpiringMap } from '@idempotent-checkout/db-kit/expiring-map'
import type { Database } from '@idempotent-checkout/db-kit'
import { newId } from '../db/ids'
import { apiKeys, tenants } from '../db/schema'
import { log } from '../observability/logger'
import { type OperatorOrigin, recordOperatorAction } from '../ops/operator-actions'
import { problem } from '../problems'
import { ApiKeyIdSchema, TenantIdSchema } from './schema'

export interface Tenant { id: string, name: string }

export function hashSecretKey(secretKey: string): string {
  return createHash('sha256').update(secretKey).digest('hex')
}

/** A new secret key and what is stored of it: its hash and its first characters (to recognise it in listings). */
function newSecretKey(): { secretKey: string, keyHash: string, keyPrefix: string } {
  const secretKey = `sk_${randomBytes(24).toString('base64url')}`
  return { secretKey, keyHash: hashSecretKey(secretKey), keyPrefix: secretKey.slice(0, 10) }
}

/** Creates a tenant and its first secret key. The key is returned once; only its hash is stored. */
export async function createTenant(db: Database, name: string, origin: OperatorOrigin): Promise<{ tenant: Tenant, secretKey: string }> {
  const tenant = { id: newId('ten'), name }
  const { secretKey, keyHash, keyPrefix } = newSecretKey()
  await db.transaction(async (tx) => {
    await tx.insert(tenants).values(tenant)
    await tx.insert(apiKeys).values({ id: newId('key'), tenantId: tenant.id, keyHash, keyPrefix })
    await recordOperatorAction(tx, origin, { action: 'tenant.created', tenantId: tenant.id, subjectId: tenant.id, detail: { keyPrefix } })
  })
  return { tenant, secretKey }
}

function tenantNotFound(detail: string) {
  return problem('not-found', `${detail} Tenant ids (ten_…) are returned as tenant.id by POST /api/ops/tenants, which creates a tenant from {"name": "…"}.`)
}

/** The tenant id of a route parameter; 404 for anything that cannot be one. */
export function tenantIdParam(raw: string | undefined): string {
  const parsed = TenantIdSchema.safeParse(raw)
  if (!parsed.success) throw tenantNotFound('The path does not name a tenant: a tenant id is ten_ followed by 1–64 letters, digits, _ or -.')
  return parsed.data
}

/** The key id of a route parameter; 404 for anything that cannot be one. */
export function apiKeyIdParam(tenantId: string, raw: string | undefined): string {
  const parsed = ApiKeyIdSchema.safeParse(raw)
  if (!parsed.success) throw apiKeyNotFound(tenantId, 'The path does not name a key: a key id is key_ followed by 1–64 letters, digits, _ or -.')
  return parsed.data
}

function apiKeyNotFound(tenantId: string, detail: string) {
  return problem('not-found', `${detail} List the keys of tenant ${tenantId} with GET /api/ops/tenants/${tenantId}/keys.`)
}

async function requireTenantRow(db: Database, tenantId: string): Promise<void> {
  const [row] = await db.select({ id: tenants.id }).from(tenants).where(eq(tenants.id, tenantId))
  if (!row) throw tenantNotFound(`No tenant "${tenantId}".`)
}

/** Issues another secret key for a tenant: older keys stay valid until revoked, so clients can rotate. */
export async function issueApiKey(db: Database, tenantId: string, origin: OperatorOrigin) {
  const { secretKey, keyHash, keyPrefix } = newSecretKey()
  return db.transaction(async (tx) => {
    await requireTenantRow(tx, tenantId)
    const [key] = await tx.insert(apiKeys).values({ id: newId('key'), tenantId, keyHash, keyPrefix })
      .returning({ id: apiKeys.id, createdAt: apiKeys.createdAt })
    await recordOperatorAction(tx, origin, { action: 'api_key.created', tenantId, subjectId: key!.id, detail: { keyPrefix } })
    return { object: 'api_key' as const, keyId: key!.id, secretKey, createdAt: key!.createdAt.toISOString() }
  })
}

/** A tenant's keys, newest first: what identifies each, never its secret or hash. */
export async function listApiKeys(db: Database, tenantId: string) {
  await requireTenantRow(db, tenantId)
  return db.select({
    keyId: apiKeys.id,
    keyPrefix: apiKeys.keyPrefix,
    createdAt: apiKeys.createdAt,
    lastUsedAt: apiKeys.lastUsedAt,
    revokedAt: apiKeys.revokedAt,
  }).from(apiKeys).where(eq(apiKeys.tenantId, tenantId)).orderBy(desc(apiKeys.createdAt), desc(apiKeys.id))
}

/**
 * Revokes a tenant's key. Revoking it again changes nothing (its first revocation time stays, no
 * second action is recorded); another tenant's key is not found.
 */
export async function revokeApiKey(db: Database, tenantId: string, keyId: string, origin: OperatorOrigin): Promise<void> {
  const revokedHash = await db.transaction(async (tx) => {
    await requireTenantRow(tx, tenantId)
    const [revoked] = await tx.update(apiKeys).set({ revokedAt: sql`now()` })
      .where(and(eq(apiKeys.id, keyId), eq(apiKeys.tenantId, tenantId), isNull(apiKeys.revokedAt)))
      .returning({ keyHash: apiKeys.keyHash, keyPrefix: apiKeys.keyPrefix })
    if (revoked) {
      await recordOperatorAction(tx, origin, { action: 'api_key.revoked', tenantId, subjectId: keyId, detail: { keyPrefix: revoked.keyPrefix } })
      return revoked.keyHash
    }
    const [existing] = await tx.select({ id: apiKeys.id }).from(apiKeys).where(and(eq(apiKeys.id, keyId), eq(apiKeys.tenantId, tenantId)))
    if (!existing) throw apiKeyNotFound(tenantId, `Tenant ${tenantId} has no key "${keyId}".`)
    return undefined
  })
  // Other instances forget the key when their cache entry expires; this one at once.
  if (revokedHash) knownKeys.delete(revokedHash)
}

/**
 * Known keys are remembered for a few seconds per instance: authentication is on every request's
 * hot path. A key revoked in the database (`api_keys.revoked_at`) stops working within that time.
 * Unknown keys are never remembered, so a new key works at once.
 */
export const SECRET_KEY_CACHE_MS = 10_000
const knownKeys = new ExpiringMap<Tenant>(10_000)

/**
 * The tenant owning an unrevoked secret key, or undefined. A key read from the database (not the
 * cache) has its `last_used_at` refreshed in the background: at most one write per key per cache
 * period per instance, and never one the request waits for.
 */
export async function findTenantBySecretKey(db: Database, secretKey: string): Promise<Tenant | undefined> {
  const keyHash = hashSecretKey(secretKey)
  const known = knownKeys.get(keyHash)
  if (known) return known
  const [row] = await db.select({ keyId: apiKeys.id, id: tenants.id, name: tenants.name }).from(apiKeys)
    .innerJoin(tenants, eq(tenants.id, apiKeys.tenantId))
    .where(and(eq(apiKeys.keyHash, keyHash), isNull(apiKeys.revokedAt)))
  if (!row) return undefined
  const tenant = { id: row.id, name: row.name }
  knownKeys.set(keyHash, tenant, Date.now() + SECRET_KEY_CACHE_MS)
  refreshLastUsed(db, row.keyId)
  return tenant
}

function refreshLastUsed(db: Database, keyId: string): void {
  db.update(apiKeys).set({ lastUsedAt: sql`now()` }).where(eq(apiKeys.id, keyId))
    .catch((error: unknown) => log.warn('api key last_used_at not refreshed', { keyId, error }))
}
