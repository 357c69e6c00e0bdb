import { createHash, randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { midtransProvider } from '../../server/webhooks/providers/midtrans'
import type { Parsed, WebhookDelivery } from '../../server/webhooks/types'

/**
 * Midtrans signs only order_id + status_code + gross_amount. Every case here starts from a
 * notification signed the way Midtrans signs it (SHA-512 computed here, not by the code under test),
 * changes one unsigned field, and checks that the signature still verifies and that the change is
 * refused or changes nothing: the unsigned fields never decide a payment state on their own.
 */

const SERVER_KEY = `SB-Mid-server-${randomBytes(12).toString('base64url')}`
const ORDER_ID = 'ord_midtrans_attack'
const GROSS_AMOUNT = '150000.00'

const sha512Signature = (orderId: string, statusCode: string, grossAmount: string) =>
  createHash('sha512').update(orderId + statusCode + grossAmount + SERVER_KEY).digest('hex')

interface Signed { status_code: string, transaction_status: string, fraud_status?: string, transaction_id?: string, currency?: string }

/** A notification Midtrans signed for (ORDER_ID, status_code, GROSS_AMOUNT). */
function signedNotification(fields: Signed): Record<string, string> {
  return {
    transaction_time: '2026-11-29 10:00:00',
    status_message: 'midtrans payment notification',
    payment_type: 'credit_card',
    order_id: ORDER_ID,
    gross_amount: GROSS_AMOUNT,
    transaction_id: '9aed5972-5b6a-401e-894b-a32c91ed1a3a',
    currency: 'IDR',
    ...fields,
    signature_key: sha512Signature(ORDER_ID, fields.status_code, GROSS_AMOUNT),
  } as Record<string, string>
}

/** The same notification with unsigned fields changed after signing, as an attacker replays it. */
const relabelled = (notification: Record<string, string>, changes: Record<string, string | undefined>) => {
  const copy: Record<string, string | undefined> = { ...notification, ...changes }
  for (const [name, value] of Object.entries(copy)) if (value === undefined) Reflect.deleteProperty(copy, name)
  return copy as Record<string, string>
}

function receive(json: Record<string, string>): Parsed {
  const body = Buffer.from(JSON.stringify(json))
  const delivery: WebhookDelivery = { body, header: () => undefined, nowSeconds: 0 }
  // The signature still holds: only unsigned fields were changed.
  expect(midtransProvider.verify(delivery, SERVER_KEY)).toEqual({ ok: true })
  return midtransProvider.parse(json, delivery)
}

const eventIdOf = (parsed: Parsed) => {
  expect(parsed.ok, JSON.stringify(parsed)).toBe(true)
  return parsed.ok ? parsed.event.eventId : undefined
}

describe('Midtrans: status_code bound to transaction_status', () => {
  const pending = signedNotification({ status_code: '201', transaction_status: 'pending', fraud_status: 'accept' })
  const settlement = signedNotification({ status_code: '200', transaction_status: 'settlement', fraud_status: 'accept' })

  it('refuses a signed pending (201) replayed as settlement, saying which status_code settlement needs', () => {
    expect(receive(relabelled(pending, { transaction_status: 'settlement' }))).toEqual({
      ok: false,
      reason: 'transaction_status "settlement" does not go with status_code "201" (settlement needs 200)',
    })
    expect(receive(relabelled(pending, { transaction_status: 'capture' }))).toEqual({
      ok: false,
      reason: 'transaction_status "capture" with fraud_status "accept" does not go with status_code "201" (capture needs 200 with fraud_status accept or 201 with fraud_status challenge)',
    })
  })

  it('refuses a success or a failure under a code that says otherwise, and an unknown status', () => {
    for (const [notification, status] of [[pending, 'deny'], [settlement, 'expire'], [settlement, 'pending'], [pending, 'refund']] as const) {
      const parsed = receive(relabelled(notification, { transaction_status: status }))
      expect(parsed.ok, `${status} under ${notification.status_code}`).toBe(false)
      expect(!parsed.ok && parsed.reason).toMatch(new RegExp(`^transaction_status "${status}" does not go with status_code "${notification.status_code}"`))
    }
    const denied = signedNotification({ status_code: '202', transaction_status: 'deny' })
    expect(receive(relabelled(denied, { transaction_status: 'settlement' })).ok).toBe(false)
    expect(receive(relabelled(settlement, { transaction_status: 'paid' }))).toEqual({
      ok: false,
      reason: 'transaction_status "paid" is not a Midtrans status this integration knows',
    })
    expect(receive(signedNotification({ status_code: '407', transaction_status: 'expire' }))).toEqual({
      ok: false,
      reason: 'transaction_status "expire" does not go with status_code "407" (expire needs 202)',
    })
  })

  it('refuses a 200 capture whose fraud_status is challenge, deny or missing; 201 + challenge is informational', () => {
    const capture = signedNotification({ status_code: '200', transaction_status: 'capture', fraud_status: 'accept' })
    expect(receive(capture)).toMatchObject({ ok: true, event: { type: 'payment.succeeded' } })
    for (const fraud of ['challenge', 'deny', undefined]) {
      const parsed = receive(relabelled(capture, { fraud_status: fraud }))
      expect(parsed.ok, `fraud_status ${fraud}`).toBe(false)
      expect(!parsed.ok && parsed.reason).toMatch(/^transaction_status "capture" (with fraud_status "\w+"|without fraud_status) does not go with status_code "200"/)
    }
    const review = signedNotification({ status_code: '201', transaction_status: 'capture', fraud_status: 'challenge' })
    expect(receive(review)).toMatchObject({ ok: true, event: { type: 'payment.updated' } })
    // The review accepted by an attacker's pen instead of Midtrans' is not a payment.
    expect(receive(relabelled(review, { fraud_status: 'accept' })).ok).toBe(false)
  })

  it('records a signed settlement relabelled refund (or chargeback) as informational: no payment.refunded', () => {
    for (const status of ['refund', 'partial_refund', 'chargeback', 'partial_chargeback', 'authorize', 'cancel']) {
      expect(receive(relabelled(settlement, { transaction_status: status })), status).toMatchObject({ ok: true, event: { type: 'payment.updated' } })
    }
  })

  it('keys the event by the signed triple and the status: a changed transaction_id or fraud_status mints no new event id', () => {
    const id = eventIdOf(receive(settlement))
    expect(id).toBe(`${ORDER_ID}:200:${GROSS_AMOUNT}:settlement`)
    for (let n = 0; n < 5; n++) {
      expect(eventIdOf(receive(relabelled(settlement, { transaction_id: randomBytes(16).toString('hex') })))).toBe(id)
    }
    expect(eventIdOf(receive(relabelled(settlement, { fraud_status: undefined })))).toBe(id)
    // Nor a new fingerprint: the unsigned transaction id is no part of the event.
    const parsed = receive(relabelled(settlement, { transaction_id: 'another-transaction' }))
    expect(parsed.ok && parsed.event).toEqual({ eventId: id, type: 'payment.succeeded', orderId: ORDER_ID, amount: 150000, currency: 'IDR' })
  })

  it('refuses a body currency other than IDR, and keeps IDR when the body names none', () => {
    expect(receive(relabelled(settlement, { currency: 'USD' }))).toEqual({
      ok: false,
      reason: 'currency "USD": Midtrans charges in IDR, and currency is not covered by signature_key',
    })
    expect(receive(relabelled(settlement, { currency: undefined }))).toMatchObject({ ok: true, event: { currency: 'IDR', amount: 150000 } })
  })
})
