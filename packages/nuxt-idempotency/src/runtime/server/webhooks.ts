import { defineEventHandler, type EventHandler, type EventHandlerRequest, getHeader, type H3Event } from 'h3'
import { checkIdempotencyKey } from '../core/key'
import { midtransNotificationId, midtransNotificationIdentity, parseJsonBody, standardWebhookHeader, type Verification, verifyMidtransSignature, verifyStandardWebhook, verifyStripeSignature, type WebhookDelivery } from '../webhooks'
import { readBodyWithin, reportOutcome, runIdempotentRoute } from './handler'
import { useIdempotencyOptions } from './services'
import { idempotencyProblem, sendFailure } from '../core/problems'
import type { Database } from '@idempotent-checkout/db-kit'

/**
 * An app's own signed webhooks, deduplicated by the same layer as its API: the provider's event id
 * is the key (scope `provider:<name>`), its signature is checked on the raw bytes before anything else.
 */

export interface WebhookProviderDefinition {
  /** Part of the scope: two providers' event ids never meet. */
  name: string
  /** Checks the signature (and timestamp) on the raw bytes, in constant time. */
  verify: (delivery: WebhookDelivery) => Verification
  /** The provider's id for the event, stable across redeliveries; only called once verified. */
  eventId: (delivery: WebhookDelivery) => string | undefined
  /**
   * What a delivery under an event id must repeat to be the same event (the idempotency
   * fingerprint): another value under the same id is answered 422. Default: the body as signed.
   * A provider whose id is derived from the body gives what it is derived from, so that fields the
   * id ignores cannot turn a redelivery into a 422.
   */
  fingerprinted?: (delivery: WebhookDelivery) => unknown
}

export const defineWebhookProvider = (provider: WebhookProviderDefinition): WebhookProviderDefinition => provider

/** Standard Webhooks, and Svix (the same scheme under `svix-*` headers). `secret`: `whsec_…`. */
export const standardWebhooksProvider = (secret: string, name = 'standard') => defineWebhookProvider({
  name,
  verify: delivery => verifyStandardWebhook(delivery, secret),
  eventId: delivery => standardWebhookHeader(delivery, 'id'),
})

/** Stripe's `Stripe-Signature`; the event's `id` (`evt_…`) is the key. `secret`: the endpoint's `whsec_…`. */
export const stripeWebhookProvider = (secret: string, name = 'stripe') => defineWebhookProvider({
  name,
  verify: delivery => verifyStripeSignature(delivery, secret),
  eventId: (delivery) => {
    const id = (parseJsonBody(delivery.body) as { id?: unknown } | undefined)?.id
    return typeof id === 'string' ? id : undefined
  },
})

/**
 * Midtrans' `signature_key` in the body. The key is `order_id:status_code:gross_amount:transaction_status`,
 * and for a refund or partial_refund its `refund_amount` too (`midtransNotificationIdentity`): a
 * settlement and a later refund of one order (one signed triple) are two events, as are two partial
 * refunds; a redelivery is the same one. Those fields are also all the fingerprint covers. Only the
 * triple is signed: confirm any state with Midtrans' status API before acting on it.
 */
export const midtransWebhookProvider = (serverKey: string, name = 'midtrans') => {
  const identityOf = (delivery: WebhookDelivery) => {
    const read = midtransNotificationIdentity(parseJsonBody(delivery.body))
    return read.ok ? read.identity : undefined
  }
  return defineWebhookProvider({
    name,
    verify: delivery => verifyMidtransSignature(delivery, serverKey),
    eventId: (delivery) => {
      const identity = identityOf(delivery)
      return identity && midtransNotificationId(identity)
    },
    fingerprinted: identityOf,
  })
}

export interface WebhookHandlerContext {
  eventId: string
  /** The body as sent (verified), and parsed when it is JSON. */
  rawBody: string
  body: unknown
}

/** The atomic handler's context: `tx` is the transaction that also stores the answer under the event id. */
export interface AtomicWebhookHandlerContext extends WebhookHandlerContext {
  tx: Database
}

export interface WebhookHandlerOptions {
  /** How long event ids are remembered, in seconds (default: the module's `ttl`). */
  ttl?: number
  /** A larger delivery is refused with a 413 before its signature is checked; default the module's `maxBodyBytes` (1 MiB). */
  maxBodyBytes?: number
}

/** Concurrent copies of one delivery wait for the first one's answer instead of a 409 (providers do not send Prefer). */
const DUPLICATE_WAIT_MS = 5000

/**
 * Verifies each delivery, then runs `handler` once per event id; a redelivery is answered with the
 * first answer. A bad signature is 401 and runs nothing. Leased by default (no transaction open: a
 * receiver that dies after its work and before the answer is stored runs it again on the
 * redelivery); with `atomic: true` the handler writes in `tx`, the transaction that stores the
 * answer, so its writes happen exactly once however the receiver dies.
 */
export function defineIdempotentWebhookHandler<Result>(
  provider: WebhookProviderDefinition,
  handler: (event: H3Event, context: WebhookHandlerContext) => Result | Promise<Result>,
  options?: WebhookHandlerOptions & { atomic?: false },
): EventHandler<EventHandlerRequest, Promise<Result>>
export function defineIdempotentWebhookHandler<Result>(
  provider: WebhookProviderDefinition,
  handler: (event: H3Event, context: AtomicWebhookHandlerContext) => Result | Promise<Result>,
  options: WebhookHandlerOptions & { atomic: true },
): EventHandler<EventHandlerRequest, Promise<Result>>
export function defineIdempotentWebhookHandler<Result>(
  provider: WebhookProviderDefinition,
  handler: (event: H3Event, context: AtomicWebhookHandlerContext) => Result | Promise<Result>,
  options: WebhookHandlerOptions & { atomic?: boolean } = {},
): EventHandler<EventHandlerRequest, Promise<Result>> {
  return defineEventHandler(async (event): Promise<Result> => {
    try {
      const route = `POST ${event.context.matchedRoute?.path ?? event.path.split('?')[0]}`
      const body = Buffer.from(await readBodyWithin(event, options.maxBodyBytes ?? useIdempotencyOptions().maxBodyBytes, route) ?? [])
      const delivery: WebhookDelivery = { body, header: name => getHeader(event, name), nowSeconds: Math.floor(Date.now() / 1000) }
      const verification = provider.verify(delivery)
      const eventId = verification.ok ? provider.eventId(delivery) : undefined
      if (!verification.ok || !eventId || !checkIdempotencyKey(eventId).ok) {
        reportOutcome({ event, route, scope: `provider:${provider.name}`, outcome: 'signature_invalid' })
        throw idempotencyProblem('webhook-signature-invalid', `Signature rejected: ${verification.ok ? 'the event has no usable id' : verification.reason}. Nothing was stored. Check the endpoint's signing secret and the sender's clock (±300 s).`)
      }
      const rawBody = body.toString('utf8')
      const json = parseJsonBody(body)
      const request = {
        scope: `provider:${provider.name}`,
        route,
        key: eventId,
        // The body as signed (or what the provider derives the id from): a redelivery (same id, new timestamp and signature) is the same request.
        payload: provider.fingerprinted?.(delivery) ?? json ?? rawBody,
        ttlSeconds: options.ttl,
        defaultWaitMs: DUPLICATE_WAIT_MS,
      }
      const answer = async (tx?: Database) => ({ status: 200, body: (await handler(event, { eventId, rawBody, body: json, tx: tx! }) ?? { received: true }) as Record<string, unknown> })
      const reply = options.atomic
        ? await runIdempotentRoute(event, { ...request, mode: 'atomic', execute: answer })
        : await runIdempotentRoute(event, { ...request, mode: 'leased', execute: () => answer() })
      return reply.body as Result
    }
    catch (error) {
      // A problem or an unreachable database is the answer; its body is not the handler's Result (errors are not in the route's type).
      return sendFailure(event, error) as Promise<unknown> as Promise<Result>
    }
  })
}
