import { getCookie, getRequestURL, type H3Event, useSession } from 'h3'
import { useConfig } from '../config'
import { problem } from '../problems'
import type { Tenant } from '../tenants/service'
import { DEMO_TENANT } from './demo-store'

/**
 * The checkout page's credentials: a sealed, HttpOnly, SameSite=Strict cookie bound to the demo
 * tenant, so the page never holds a secret key. It can name no other tenant. Cross-site requests
 * cannot use it: the cookie is not sent cross-site, and the API's custom headers (Idempotency-Key)
 * and JSON bodies would need a CORS preflight that is never granted.
 */

const SESSION_COOKIE = 'ic_checkout'

interface CheckoutSession { tenantId?: string }

function sessionConfig(event: H3Event) {
  return {
    name: SESSION_COOKIE,
    password: useConfig().SESSION_PASSWORD,
    maxAge: 60 * 60 * 24,
    cookie: { httpOnly: true, sameSite: 'strict' as const, secure: getRequestURL(event).protocol === 'https:', path: '/' },
  }
}

/** 404 unless the demo store is enabled (CHECKOUT_DEMO_ENABLED). */
export function requireCheckoutDemo(): void {
  if (!useConfig().CHECKOUT_DEMO_ENABLED) {
    throw problem('not-found', 'The demo checkout is off here. Set CHECKOUT_DEMO_ENABLED=true (it is on by default only in embedded and development mode), or call the API with a secret key.')
  }
}

/** Starts (or renews) the page's session for the demo tenant. */
export async function startCheckoutSession(event: H3Event): Promise<void> {
  const session = await useSession<CheckoutSession>(event, sessionConfig(event))
  if (session.data.tenantId !== DEMO_TENANT.id) await session.update({ tenantId: DEMO_TENANT.id })
}

/** The demo tenant when the request carries a valid checkout session cookie, else undefined. */
export async function tenantOfCheckoutSession(event: H3Event): Promise<Tenant | undefined> {
  if (!useConfig().CHECKOUT_DEMO_ENABLED || !getCookie(event, SESSION_COOKIE)) return undefined
  const session = await useSession<CheckoutSession>(event, sessionConfig(event))
  return session.data.tenantId === DEMO_TENANT.id ? DEMO_TENANT : undefined
}
