import { createHash, randomBytes } from 'node:crypto'
import { and, eq, isNull } from 'drizzle-orm'
import { ExpiringMap } from '../cache/expiring-map'
import type { Database } from '../db/client'
import { newId } from '../db/ids'
import { apiKeys, tenants } from '../db/schema'

export interface Tenant { id: string, name: string }

export function hashSecretKey(secretKey: string): string {
  return createHash('sha256').update(secretKey).digest('hex')
}

/** Creates a tenant and its first secret key. The key is returned once; only its hash is stored. */
export async function createTenant(db: Database, name: string): Promise<{ tenant: Tenant, secretKey: string }> {
  const tenant = { id: newId('ten'), name }
  const secretKey = `sk_${randomBytes(24).toString('base64url')}`
  await db.transaction(async (tx) => {
    await tx.insert(tenants).values(tenant)
    await tx.insert(apiKeys).values({ id: newId('key'), tenantId: tenant.id, keyHash: hashSecretKey(secretKey), keyPrefix: secretKey.slice(0, 10) })
  })
  return { tenant, secretKey }
}

/**
 * Known keys are remembered for a few seconds per instance: authentication is on every request's
 * hot path. A key revoked in the database (`api_keys.revoked_at`) stops working within that time.
 * Unknown keys are never remembered, so a new key works at once.
 */
export const SECRET_KEY_CACHE_MS = 10_000
const knownKeys = new ExpiringMap<Tenant>(10_000)

/** The tenant owning an unrevoked secret key, or undefined. */
export async function findTenantBySecretKey(db: Database, secretKey: string): Promise<Tenant | undefined> {
  const keyHash = hashSecretKey(secretKey)
  const known = knownKeys.get(keyHash)
  if (known) return known
  const [row] = await db.select({ id: tenants.id, name: tenants.name }).from(apiKeys)
    .innerJoin(tenants, eq(tenants.id, apiKeys.tenantId))
    .where(and(eq(apiKeys.keyHash, keyHash), isNull(apiKeys.revokedAt)))
  if (row) knownKeys.set(keyHash, row, Date.now() + SECRET_KEY_CACHE_MS)
  return row
}
