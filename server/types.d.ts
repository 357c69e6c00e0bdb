import type { IdempotencyOutcome } from './idempotency/handler'
import type { Tenant } from './tenants/service'

declare module 'h3' {
  interface H3EventContext {
    /** The client's X-Request-Id when valid, else a generated one; echoed on every response. */
    requestId: string
    startedAt: number
    /** From a valid W3C `traceparent` header: the caller's trace, logged with the request. */
    trace?: { traceId: string, parentId: string, sampled: boolean }
    tenant?: Tenant
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
