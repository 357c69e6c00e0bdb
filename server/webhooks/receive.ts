import { and, eq } from 'drizzle-orm'
import { getHeader, type H3Event } from 'h3'
import { useDatabaseHandle } from '../db'
import { orders } from '../db/schema'
import { readLimitedRawBody, strictUtf8 } from '../http/body'
import type { IdempotentReply } from 'nuxt-idempotency/server'
import { checkIdempotencyKey } from 'nuxt-idempotency/core'
import { log } from '../observability/logger'
import { metrics } from '../observability/metrics'
import { problem, problemOf } from '../problems'
import type { RegisteredProvider } from './registry'
import type { WebhookEventSource } from '../db/schema'
import type { PaymentEvent } from './types'
import { providerScope } from '../../shared/resources'

export interface VerifiedDelivery {
  event: PaymentEvent
  /** The body exactly as signed (valid UTF-8, checked) and the headers that carry its signature. */
  rawBody: string
  signatureHeaders: Record<string, string>
  /** Absent: a signed delivery. reconciliation: the provider's API answer (rawBody), read because no webhook came. */
  source?: WebhookEventSource
}

/**
 * Reads the raw bytes, verifies the signature on them before anything else, then parses. A rejected
 * signature is counted and logged with the event id it claimed, and never stored.
 */
export async function readVerifiedDelivery(event: H3Event, provider: RegisteredProvider): Promise<VerifiedDelivery> {
  const body = await readLimitedRawBody(event)
  const delivery = { body, header: (name: string) => getHeader(event, name), nowSeconds: Math.floor(Date.now() / 1000) }
  const verification = provider.verify(delivery, provider.secret)
  if (!verification.ok) {
    metrics.webhookResults.inc({ provider: provider.name, result: 'signature_invalid' })
    log.warn('webhook signature rejected', { provider: provider.name, reason: verification.reason, claimedEventId: verification.claimedEventId, requestId: event.context.requestId })
    // The request log keeps the rejection under the claimed id, so an event's evidence shows forgeries too.
    if (verification.claimedEventId && checkIdempotencyKey(verification.claimedEventId).ok) {
      event.context.idempotency = { scope: providerScope(provider.name), key: verification.claimedEventId }
    }
    event.context.idempotencyOutcome = 'signature_invalid'
    throw problem('webhook-signature-invalid', `Signature rejected: ${verification.reason}. Nothing was stored. Check that the endpoint's signing secret matches the provider's and that the sender's clock is within 300 s.`)
  }
  event.context.authenticatedBy = 'webhook_signature'
  const invalid = (reason: string) => {
    metrics.webhookResults.inc({ provider: provider.name, result: 'payload_invalid' })
    return problem('payload-invalid', `The signature is valid but the event is not understood: ${reason}. Nothing was stored.`)
  }
  let rawBody: string
  let json: unknown
  try {
    rawBody = strictUtf8.decode(body)
    json = JSON.parse(rawBody)
  }
  catch {
    throw invalid('the body is not UTF-8 JSON')
  }
  const parsed = provider.parse(json, delivery)
  if (!parsed.ok) throw invalid(parsed.reason)
  if (!parsed.event.orderId) {
    const orderId = parsed.event.paymentId && await orderOfPayment(provider.name, parsed.event.paymentId)
    if (!orderId) throw invalid(`no order has payment "${parsed.event.paymentId}" at ${provider.name}, and the event names none`)
    parsed.event.orderId = orderId
  }
  if (!checkIdempotencyKey(parsed.event.eventId).ok) throw invalid('the event id must be 1–255 visible ASCII characters')
  // The headers the delivery was verified by, as sent (a Svix sender's svix-* names included).
  const signatureHeaders = Object.fromEntries(provider.signatureHeaders.flatMap(name => delivery.header(name) ? [[name, delivery.header(name)!]] : []))
  return { event: parsed.event, rawBody, signatureHeaders }
}

/** The order whose payment this is at the provider (orders.payment_intent_id). */
async function orderOfPayment(provider: string, paymentId: string): Promise<string | undefined> {
  const [order] = await useDatabaseHandle().db.select({ id: orders.id }).from(orders)
    .where(and(eq(orders.paymentIntentId, paymentId), eq(orders.paymentProvider, provider))).limit(1)
  return order?.id
}

const resultOf: Record<string, string> = { miss: 'accepted', replay: 'duplicate' }
const resultOfProblem: Record<string, string> = { '/problems/idempotency-key-reused': 'conflict', '/problems/request-in-progress': 'in_progress' }

/** Counts what the idempotency layer made of a verified delivery: accepted, duplicate, conflict… */
export async function countWebhookResult(provider: string, handling: Promise<IdempotentReply>): Promise<IdempotentReply> {
  try {
    const reply = await handling
    metrics.webhookResults.inc({ provider, result: resultOf[reply.outcome] ?? 'error' })
    return reply
  }
  catch (error) {
    metrics.webhookResults.inc({ provider, result: resultOfProblem[problemOf(error)?.body.type ?? ''] ?? 'error' })
    throw error
  }
}
