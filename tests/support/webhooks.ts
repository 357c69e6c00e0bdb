import { randomUUID } from 'node:crypto'
import type postgres from 'postgres'
import { toStripeAmount } from '../../server/payments/currencies'
import { hmacSha256, midtransSignature, signStandardWebhook } from 'nuxt-idempotency/core'
import { testSecrets } from './app'
import { request, type TestResponse } from './http'

/**
 * Signed deliveries for each provider, built the way the provider builds them, with the test
 * secrets every test app gets (support/app.ts). `at` (Unix seconds) defaults to now; tests move it
 * to cross the ±300 s tolerance.
 */

export interface SignedDelivery {
  path: string
  headers: Record<string, string>
  body: string
}

export type StandardEventType = 'payment.succeeded' | 'payment.failed' | 'payment.refunded'

export interface StandardEventData { orderId: string, paymentId: string, amount: number, currency: string }

export const nowSeconds = () => Math.floor(Date.now() / 1000)
export const newWebhookId = () => `msg_${randomUUID().replaceAll('-', '')}`

export function standardBody(type: StandardEventType, data: StandardEventData, timestamp = '2026-11-29T10:00:00.000Z'): string {
  return JSON.stringify({ type, timestamp, data })
}

/** A Standard Webhooks delivery of `body` under `webhookId`; a redelivery is the same call with a later `at`. */
export function standardDelivery(webhookId: string, body: string, options: { at?: number, secret?: string, extraSignatures?: string[] } = {}): SignedDelivery {
  const at = options.at ?? nowSeconds()
  const signature = signStandardWebhook(options.secret ?? testSecrets.webhookStandardSecret, webhookId, at, body)
  return {
    path: '/api/webhooks/standard',
    headers: {
      'content-type': 'application/json',
      'webhook-id': webhookId,
      'webhook-timestamp': String(at),
      'webhook-signature': [...(options.extraSignatures ?? []), signature].join(' '),
    },
    body,
  }
}

export type StripeEventType = 'payment_intent.succeeded' | 'payment_intent.payment_failed' | 'charge.refunded'

/**
 * A Stripe event for amounts in the app's units (converted to Stripe's, e.g. IDR in hundredths); a
 * charge.refunded refunds all of `orderAmount` unless `orderAmountRefunded` says less.
 */
export function stripeBody(eventId: string, type: StripeEventType, orderId: string, orderAmount: number, currency = 'usd', orderAmountRefunded = orderAmount): string {
  const amount = toStripeAmount(orderAmount, currency)
  const amountRefunded = toStripeAmount(orderAmountRefunded, currency)
  const object = type === 'charge.refunded'
    ? { id: `ch_${eventId}`, object: 'charge', amount, amount_refunded: amountRefunded, refunded: amountRefunded === amount, currency, payment_intent: `pi_${orderId}`, metadata: { order_id: orderId } }
    : { id: `pi_${orderId}`, object: 'payment_intent', amount, amount_received: type === 'payment_intent.succeeded' ? amount : 0, currency, metadata: { order_id: orderId } }
  return JSON.stringify({ id: eventId, object: 'event', type, created: nowSeconds(), data: { object } })
}

/** Stripe-Signature `t=…,v1=…` (plus any extra parts, e.g. `v1=bad` or `v0=…`). */
export function stripeDelivery(body: string, options: { at?: number, secret?: string, extraParts?: string[] } = {}): SignedDelivery {
  const at = options.at ?? nowSeconds()
  const v1 = hmacSha256(options.secret ?? testSecrets.webhookStripeSecret, `${at}.`, body).toString('hex')
  return {
    path: '/api/webhooks/stripe',
    headers: { 'content-type': 'application/json', 'stripe-signature': [`t=${at}`, ...(options.extraParts ?? []), `v1=${v1}`].join(',') },
    body,
  }
}

export interface MidtransNotification {
  orderId: string
  transactionId: string
  transactionStatus: string
  grossAmount: string
  statusCode?: string
  fraudStatus?: string
  currency?: string
}

/** The status_code Midtrans sends a status with (the pairs server/webhooks/providers/midtrans.ts accepts). */
export function midtransStatusCode(transactionStatus: string, fraudStatus?: string): string {
  if (transactionStatus === 'pending' || (transactionStatus === 'capture' && fraudStatus === 'challenge')) return '201'
  if (['deny', 'cancel', 'expire', 'failure'].includes(transactionStatus)) return '202'
  return '200'
}

/** A Midtrans HTTP notification with its body-borne signature_key, under its status's status_code unless told. */
export function midtransDelivery(n: MidtransNotification, options: { serverKey?: string } = {}): SignedDelivery {
  const statusCode = n.statusCode ?? midtransStatusCode(n.transactionStatus, n.fraudStatus)
  const body = JSON.stringify({
    transaction_time: '2026-11-29 10:00:00',
    transaction_status: n.transactionStatus,
    transaction_id: n.transactionId,
    status_message: 'midtrans payment notification',
    status_code: statusCode,
    signature_key: midtransSignature(options.serverKey ?? testSecrets.midtransServerKey, n.orderId, statusCode, n.grossAmount),
    payment_type: 'credit_card',
    order_id: n.orderId,
    gross_amount: n.grossAmount,
    currency: n.currency ?? 'IDR',
    ...(n.fraudStatus && { fraud_status: n.fraudStatus }),
  })
  return { path: '/api/webhooks/midtrans', headers: { 'content-type': 'application/json' }, body }
}

export function deliver(baseUrl: string, delivery: SignedDelivery): Promise<TestResponse> {
  return request(baseUrl, delivery.path, { method: 'POST', headers: delivery.headers, body: delivery.body })
}

export interface WebhookRowCounts { webhookEvents: number, idempotencyRecords: number, jobs: number, history: number }

/** Everything a delivery may write: a rejected one must leave all four unchanged. */
export async function webhookRowCounts(sql: postgres.Sql): Promise<WebhookRowCounts> {
  const [row] = await sql<[WebhookRowCounts]>`
    select (select count(*)::int from webhook_events) as "webhookEvents",
           (select count(*)::int from idempotency_records) as "idempotencyRecords",
           (select count(*)::int from jobs) as jobs,
           (select count(*)::int from order_status_history) as history`
  return row
}
