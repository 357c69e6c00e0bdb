// nuxt-idempotency/server: the server utils the module auto-imports into Nitro, for explicit imports
// (and their types). Each name is documented in README.md#server-utils; test/exports.test.ts pins the list.
export {
  type AtomicIdempotentHandlerContext, type AtomicIdempotentHandlerOptions, defineIdempotentEventHandler, type IdempotencyFingerprint, type IdempotencyOutcome,
  type IdempotencyOutcomeReport, type IdempotencyRouteRules, type IdempotentHandlerContext, type IdempotentHandlerOptions, type IdempotentHandlerSettings,
  type IdempotentReply, type IdempotentRoute, type LeasedIdempotentHandlerOptions, requireIdempotencyKey, runIdempotentRoute,
} from './handler'
export { IdempotencyInProgressError, runOnce, type RunOnceOptions } from './run-once'
export { idempotencyReady, type IdempotencyServices, provideIdempotency, useIdempotencyDatabase } from './services'
export {
  type AtomicWebhookHandlerContext, defineIdempotentWebhookHandler, defineWebhookProvider, midtransWebhookProvider, standardWebhooksProvider, stripeWebhookProvider,
  type WebhookHandlerContext, type WebhookHandlerOptions, type WebhookProviderDefinition,
} from './webhooks'
