import { defineEventHandler, type EventHandler, type EventHandlerRequest, getHeader, type H3Event, readRawBody } from 'h3'
import { checkIdempotencyKey } from '../core/key'
import { midtransSignedFields, parseJsonBody, standardWebhookHeader, type Verification, verifyMidtransSignature, verifyStandardWebhook, verifyStripeSignature, type WebhookDelivery } from '../webhooks'
import { reportOutcome, runIdempotent } from './handler'
import { idempotencyProblem, problemOf, sendProblem } from '../core/problems'

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
 * Midtrans' `signature_key` in the body. The key is the signed triple (order, status code, amount):
 * only signed fields may tell one notification from another.
 */
export const midtransWebhookProvider = (serverKey: string, name = 'midtrans') => defineWebhookProvider({
  name,
  verify: delivery => verifyMidtransSignature(delivery, serverKey),
  eventId: (delivery) => {
    const signed = midtransSignedFields(parseJsonBody(delivery.body))
    return signed && `${signed.order_id}:${signed.status_code}:${signed.gross_amount}`
  },
})

export interface WebhookHandlerContext {
  eventId: string
  /** The body as sent (verified), and parsed when it is JSON. */
  rawBody: string
  body: unknown
}

/** Concurrent copies of one delivery wait for the first one's answer instead of a 409 (providers do not send Prefer). */
const DUPLICATE_WAIT_MS = 5000

/**
 * Verifies each delivery, then runs `handler` once per event id (leased mode: no transaction open);
 * a redelivery is answered with the first answer. A bad signature is 401 and runs nothing.
 */
export function defineIdempotentWebhookHandler<Result>(
  provider: WebhookProviderDefinition,
  handler: (event: H3Event, context: WebhookHandlerContext) => Result | Promise<Result>,
  options: { ttl?: number } = {},
): EventHandler<EventHandlerRequest, Promise<unknown>> {
  return defineEventHandler(async (event) => {
    try {
      const body = Buffer.from(await readRawBody(event, false) ?? [])
      const delivery: WebhookDelivery = { body, header: name => getHeader(event, name), nowSeconds: Math.floor(Date.now() / 1000) }
      const route = `POST ${event.context.matchedRoute?.path ?? event.path.split('?')[0]}`
      const verification = provider.verify(delivery)
      const eventId = verification.ok ? provider.eventId(delivery) : undefined
      if (!verification.ok || !eventId || !checkIdempotencyKey(eventId).ok) {
        reportOutcome({ event, route, scope: `provider:${provider.name}`, outcome: 'signature_invalid' })
        throw idempotencyProblem('webhook-signature-invalid', `Signature rejected: ${verification.ok ? 'the event has no usable id' : verification.reason}. Nothing was stored. Check the endpoint's signing secret and the sender's clock (±300 s).`)
      }
      const rawBody = body.toString('utf8')
      const json = parseJsonBody(body)
      const reply = await runIdempotent(event, {
        mode: 'leased',
        scope: `provider:${provider.name}`,
        route,
        key: eventId,
        // The body as signed: a redelivery (same id, new timestamp and signature) is the same request.
        payload: json ?? rawBody,
        ttlSeconds: options.ttl,
        defaultWaitMs: DUPLICATE_WAIT_MS,
        execute: async () => ({ status: 200, body: (await handler(event, { eventId, rawBody, body: json }) ?? { received: true }) as Record<string, unknown> }),
      })
      return reply.body
    }
    catch (error) {
      const problem = problemOf(error)
      if (!problem) throw error
      return sendProblem(event, problem)
    }
  })
}
