import { randomUUID } from 'node:crypto'
import { clearSession, getCookie, getSession, type H3Event, unsealSession, updateSession } from 'h3'
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
const SESSION_MAX_AGE_SECONDS = 60 * 60 * 24

/** `id` tells one page's session from another's: an order placed with it may be canceled only with it. */
interface CheckoutSession { tenantId?: string, id?: string }

function sessionConfig() {
  return {
    name: SESSION_COOKIE,
    password: useConfig().SESSION_PASSWORD,
    maxAge: SESSION_MAX_AGE_SECONDS,
    // The cookie only: h3 would also take the sealed session from an `x-ic_checkout-session` header.
    sessionHeader: false as const,
    // Secure outside `nuxt dev`, whatever the request's protocol looks like here: behind a proxy that
    // terminates TLS and sends no X-Forwarded-Proto the request reads as http, and the cookie must
    // still never travel in clear. Browsers keep Secure cookies from http://localhost and 127.0.0.1
    // (secure contexts), so the embedded app works without TLS.
    cookie: { httpOnly: true, sameSite: 'strict' as const, secure: !import.meta.dev, path: '/' },
  }
}

/** 404 unless the demo store is enabled (CHECKOUT_DEMO_ENABLED). */
export function requireCheckoutDemo(): void {
  if (!useConfig().CHECKOUT_DEMO_ENABLED) {
    throw problem('not-found', 'The demo checkout is off here. Set CHECKOUT_DEMO_ENABLED=true (it is on by default only in embedded and development mode), or call the API with a secret key.')
  }
}

/**
 * Starts the page's session for the demo tenant, or renews one past half its life (a session
 * expires a fixed time after it was created), so an open page keeps working.
 */
export async function startCheckoutSession(event: H3Event): Promise<void> {
  const config = sessionConfig()
  const current = await getSession<CheckoutSession>(event, config)
  if (current.data.tenantId === DEMO_TENANT.id && current.data.id && Date.now() - current.createdAt < SESSION_MAX_AGE_SECONDS * 500) return
  await clearSession(event, config)
  // A renewed session keeps its id: the orders it placed stay its own.
  await updateSession<CheckoutSession>(event, config, { tenantId: DEMO_TENANT.id, id: current.data.id ?? randomUUID() })
}

/**
 * The demo tenant and the session's id when the request carries a valid, unexpired checkout session
 * cookie, else undefined. Only reads: a request with a bad cookie gets no new one.
 */
export async function checkoutSessionOf(event: H3Event): Promise<{ tenant: Tenant, sessionId: string } | undefined> {
  const sealed = getCookie(event, SESSION_COOKIE)
  if (!useConfig().CHECKOUT_DEMO_ENABLED || !sealed) return undefined
  try {
    const session = (await unsealSession(event, sessionConfig(), sealed)).data as CheckoutSession | undefined
    return session?.tenantId === DEMO_TENANT.id && session.id ? { tenant: DEMO_TENANT, sessionId: session.id } : undefined
  }
  catch {
    // Tampered, sealed with another password, or expired.
    return undefined
  }
}

/**
 * The checkout session a request was authenticated by (requireTenant sets it), else undefined: a
 * session reads and cancels only the orders it placed; a tenant's key, all of the tenant's.
 */
export function checkoutSessionIdOf(event: H3Event): string | undefined {
  return event.context.authenticatedBy === 'checkout_session' ? event.context.checkoutSessionId : undefined
}
