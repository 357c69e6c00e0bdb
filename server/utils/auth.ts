import { timingSafeEqual } from 'node:crypto'
import { getHeader, type H3Event } from 'h3'
import { useConfig } from '../config'
import { useDatabaseHandle } from '../db'
import { problem } from '../problems'
import { checkoutSessionOf } from '../checkout/session'
import { findTenantBySecretKey, type Tenant } from '../tenants/service'

/** How a request proved who sent it, as the request log records it. */
export type AuthenticationMethod = 'tenant_key' | 'checkout_session' | 'ops_token' | 'webhook_signature'

function bearerToken(event: H3Event): string | undefined {
  const match = /^Bearer ([\x21-\x7E]{1,512})$/.exec(getHeader(event, 'authorization') ?? '')
  return match?.[1]
}

/**
 * The tenant of the request's secret key, or of the demo checkout's session cookie when no key is
 * sent; 401 when neither identifies one.
 */
export async function requireTenant(event: H3Event): Promise<Tenant> {
  const token = bearerToken(event)
  const session = token ? undefined : await checkoutSessionOf(event)
  const tenant = token ? await findTenantBySecretKey(useDatabaseHandle().db, token) : session?.tenant
  if (!tenant) {
    throw problem('unauthorized', token
      ? 'The secret key is unknown or revoked. Use a current key from your tenant (POST /api/ops/tenants issues one).'
      : 'Send your secret key as "Authorization: Bearer sk_…".')
  }
  event.context.tenant = tenant
  event.context.authenticatedBy = token ? 'tenant_key' : 'checkout_session'
  event.context.checkoutSessionId = session?.sessionId
  return tenant
}

/** A merchant's act (a refund): the tenant's secret key only, never the shopper's checkout session. */
export async function requireTenantKey(event: H3Event): Promise<Tenant> {
  if (!bearerToken(event)) throw problem('unauthorized', 'This is the shop\'s act: send your secret key as "Authorization: Bearer sk_…" (the checkout page\'s session cannot do it).')
  return requireTenant(event)
}

/** Whether the request carries the ops token, compared in constant time (for answers that say more to operators). */
export function hasOpsToken(event: H3Event): boolean {
  const token = Buffer.from(bearerToken(event) ?? '')
  const expected = Buffer.from(useConfig().OPS_TOKEN)
  return token.length === expected.length && timingSafeEqual(token, expected)
}

/** Operators only: `Authorization: Bearer <OPS_TOKEN>`. */
export function requireOps(event: H3Event): void {
  if (!hasOpsToken(event)) {
    throw problem('unauthorized', 'This is an operator route: send "Authorization: Bearer <OPS_TOKEN>".')
  }
  event.context.authenticatedBy = 'ops_token'
}
