import { createHash, randomBytes } from 'node:crypto'
import { and, eq, isNull } from 'drizzle-orm'
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

/** The tenant owning an unrevoked secret key, or undefined. */
export async function findTenantBySecretKey(db: Database, secretKey: string): Promise<Tenant | undefined> {
  const [row] = await db.select({ id: tenants.id, name: tenants.name }).from(apiKeys)
    .innerJoin(tenants, eq(tenants.id, apiKeys.tenantId))
    .where(and(eq(apiKeys.keyHash, hashSecretKey(secretKey)), isNull(apiKeys.revokedAt)))
  return row
}
