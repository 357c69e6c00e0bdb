import type { IdempotencyOutcome } from './idempotency/handler'
import type { Tenant } from './tenants/service'

declare module 'h3' {
  interface H3EventContext {
    /** The client's X-Request-Id when valid, else a generated one; echoed on every response. */
    requestId: string
    startedAt: number
    tenant?: Tenant
    idempotency?: { scope: string, key: string }
    idempotencyOutcome?: IdempotencyOutcome
    /** Resolves once the handler answered or failed (the request log waits for it after a disconnect). */
    markHandled?: () => void
  }
}

export {}
