import type { IdempotencyOutcome } from 'nuxt-idempotency/server'
import type { Tenant } from './tenants/service'
import type { AuthenticationMethod } from './utils/auth'

declare module 'h3' {
  interface H3EventContext {
    /** The server's own id for the request (`req_<uuid>`), never one a client chose: what every record stores. */
    requestId: string
    /** The client's X-Request-Id when valid (1–128 visible ASCII): its correlation id, proof of nothing. */
    clientRequestId?: string
    /** How the request proved who sent it; unset when it did not (its evidence reads as unverified). */
    authenticatedBy?: AuthenticationMethod
    startedAt: number
    /** From a valid W3C `traceparent` header: the caller's trace, logged with the request. */
    trace?: { traceId: string, parentId: string, sampled: boolean }
    tenant?: Tenant
    /** The checkout page's session id, when the request authenticated with it. */
    checkoutSessionId?: string
    /**
     * The idempotent operation: scope and key; route and the fingerprint's first characters once
     * the idempotency layer ran (a webhook rejected before it has only the key it claimed).
     */
    idempotency?: { scope: string, key: string, route?: string, fingerprintPrefix?: string }
    idempotencyOutcome?: IdempotencyOutcome
    /** Resolves once the handler answered or failed (the request log waits for it after a disconnect). */
    markHandled?: () => void
  }
}

export {}
