import { createHash, createHmac, generateKeyPairSync, randomBytes, sign } from 'node:crypto'
import fc from 'fast-check'
import { Webhook } from 'standardwebhooks'
import Stripe from 'stripe'
import { Webhook as SvixWebhook } from 'svix'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { checkTimestamp, signStandardWebhook } from 'nuxt-idempotency/core'
import { midtransProvider } from '../../server/webhooks/providers/midtrans'
import { standardProvider } from '../../server/webhooks/providers/standard'
import { stripeProvider } from '../../server/webhooks/providers/stripe'
import { unknownWebhookProviderDetail } from '../../server/webhooks/registry'
import { requestedStatusOf, TIMESTAMP_TOLERANCE_SECONDS, type WebhookDelivery } from '../../server/webhooks/types'

/**
 * Signature checks and payload mapping of the three providers, on plain buffers and header maps.
 * Signatures are cross-checked against the providers' own libraries (standardwebhooks, stripe-node)
 * and against node:crypto computed here, never against the code under test alone.
 */

/** One delivery as receive.ts builds it: raw bytes, a case-insensitive header reader, a clock. */
function delivery(body: string | Buffer, headers: Record<string, string>, nowSeconds: number): WebhookDelivery {
  const lower = new Map(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value]))
  return { body: Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8'), header: name => lower.get(name.toLowerCase()), nowSeconds }
}

const nowSeconds = () => Math.floor(Date.now() / 1000)

/** The same bytes with one bit of the byte at `index` flipped. */
function flipByte(body: Buffer, index: number): Buffer {
  const copy = Buffer.from(body)
  copy[index] = copy[index]! ^ 0x01
  return copy
}

// ---------------------------------------------------------------------------------------------
// Standard Webhooks

// The example of the Standard Webhooks specification (standard-webhooks/spec/standard-webhooks.md).
const EXAMPLE = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
}

const STANDARD_SECRET = `whsec_${randomBytes(32).toString('base64')}`
const OTHER_STANDARD_SECRET = `whsec_${randomBytes(32).toString('base64')}`

function standardHeaders(id: string, timestamp: number | string, signature: string): Record<string, string> {
  return { 'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': signature }
}

/** A delivery signed with `secret` at `signedAt`, received at `receivedAt`. */
function standardDelivery(body: string | Buffer, options: { id?: string, signedAt: number, receivedAt?: number, secret?: string }) {
  const id = options.id ?? 'msg_2LJZ4dGqJxWc0W7K8mQ9yV1aBc'
  const signature = signStandardWebhook(options.secret ?? STANDARD_SECRET, id, options.signedAt, body)
  return delivery(body, standardHeaders(id, options.signedAt, signature), options.receivedAt ?? options.signedAt)
}

/** A wrong but well-formed v1 signature: the right length, other bytes. */
const badV1 = () => `v1,${randomBytes(32).toString('base64')}`

const standardPaymentBody = JSON.stringify({
  type: 'payment.succeeded',
  timestamp: '2026-11-29T10:00:00.000Z',
  data: { orderId: 'ord_standard_1', paymentId: 'pay_standard_1', amount: 150000, currency: 'IDR' },
})

describe('Standard Webhooks signatures', () => {
  it('reproduces the signature of the published specification example', () => {
    expect(signStandardWebhook(EXAMPLE.secret, EXAMPLE.id, EXAMPLE.timestamp, EXAMPLE.body)).toBe(EXAMPLE.signature)
    expect(signStandardWebhook(EXAMPLE.secret, EXAMPLE.id, EXAMPLE.timestamp, Buffer.from(EXAMPLE.body))).toBe(EXAMPLE.signature)
  })

  it('accepts the published specification example at its own timestamp', () => {
    const example = delivery(EXAMPLE.body, standardHeaders(EXAMPLE.id, EXAMPLE.timestamp, EXAMPLE.signature), EXAMPLE.timestamp)
    expect(standardProvider.verify(example, EXAMPLE.secret)).toEqual({ ok: true })
  })

  it('signs exactly as the standardwebhooks package does, for any id, body, timestamp and key', () => {
    fc.assert(fc.property(
      fc.stringMatching(/^msg_[A-Za-z0-9]{1,40}$/),
      fc.string({ unit: 'grapheme', maxLength: 300 }),
      fc.integer({ min: 1_000_000_000, max: 4_000_000_000 }),
      fc.uint8Array({ minLength: 16, maxLength: 64 }),
      (id, body, timestamp, key) => {
        const secret = `whsec_${Buffer.from(key).toString('base64')}`
        const theirs = new Webhook(secret).sign(id, new Date(timestamp * 1000), body)
        expect(signStandardWebhook(secret, id, timestamp, body)).toBe(theirs)
        expect(signStandardWebhook(secret, id, timestamp, Buffer.from(body, 'utf8'))).toBe(theirs)
        // …and what the package signs, we accept.
        expect(standardProvider.verify(delivery(body, standardHeaders(id, timestamp, theirs), timestamp), secret)).toEqual({ ok: true })
      },
    ), { numRuns: 50 })
  })

  it('signs what the standardwebhooks package verifies', () => {
    // The package reads the clock itself, so this one is signed now.
    const at = nowSeconds()
    const id = 'msg_crosscheck_package_verify'
    const headers = standardHeaders(id, at, signStandardWebhook(STANDARD_SECRET, id, at, standardPaymentBody))
    expect(new Webhook(STANDARD_SECRET).verify(standardPaymentBody, headers)).toEqual(JSON.parse(standardPaymentBody))
    // The package refuses it under another key: the cross-check can fail.
    expect(() => new Webhook(OTHER_STANDARD_SECRET).verify(standardPaymentBody, headers)).toThrow('No matching signature found')
  })

  it('accepts a well-signed delivery', () => {
    expect(standardProvider.verify(standardDelivery(standardPaymentBody, { signedAt: 1_800_000_000 }), STANDARD_SECRET)).toEqual({ ok: true })
  })

  it('refuses a body changed in any single byte', () => {
    const signed = standardDelivery(standardPaymentBody, { id: 'msg_tampered', signedAt: 1_800_000_000 })
    for (const index of [0, 10, signed.body.length - 1]) {
      const tampered = { ...signed, body: flipByte(signed.body, index) }
      expect(standardProvider.verify(tampered, STANDARD_SECRET)).toEqual({ ok: false, reason: 'no v1 signature matches', claimedEventId: 'msg_tampered' })
    }
  })

  it('refuses a delivery signed with another secret', () => {
    const signed = standardDelivery(standardPaymentBody, { id: 'msg_other_key', signedAt: 1_800_000_000, secret: OTHER_STANDARD_SECRET })
    expect(standardProvider.verify(signed, STANDARD_SECRET)).toEqual({ ok: false, reason: 'no v1 signature matches', claimedEventId: 'msg_other_key' })
    expect(standardProvider.verify(signed, OTHER_STANDARD_SECRET)).toEqual({ ok: true })
  })

  it('refuses a delivery missing any one of the three headers', () => {
    const at = 1_800_000_000
    const full = standardHeaders('msg_headers', at, signStandardWebhook(STANDARD_SECRET, 'msg_headers', at, standardPaymentBody))
    const without = (name: string) => {
      const { [name]: _dropped, ...rest } = full
      return standardProvider.verify(delivery(standardPaymentBody, rest, at), STANDARD_SECRET)
    }
    expect(standardProvider.verify(delivery(standardPaymentBody, full, at), STANDARD_SECRET)).toEqual({ ok: true })
    expect(without('webhook-id')).toEqual({ ok: false, reason: 'webhook-id or webhook-signature header missing', claimedEventId: undefined })
    expect(without('webhook-signature')).toEqual({ ok: false, reason: 'webhook-id or webhook-signature header missing', claimedEventId: 'msg_headers' })
    expect(without('webhook-timestamp')).toEqual({ ok: false, reason: 'timestamp missing or not Unix seconds', claimedEventId: 'msg_headers' })
    // A stored delivery re-verified later carries '' for an absent header (receive.ts): also refused.
    expect(standardProvider.verify(delivery(standardPaymentBody, { ...full, 'webhook-timestamp': '' }, at), STANDARD_SECRET))
      .toEqual({ ok: false, reason: 'timestamp missing or not Unix seconds', claimedEventId: 'msg_headers' })
  })

  it('accepts a timestamp exactly 300 s old or 300 s ahead', () => {
    const signedAt = 1_800_000_000
    expect(TIMESTAMP_TOLERANCE_SECONDS).toBe(300)
    expect(standardProvider.verify(standardDelivery(standardPaymentBody, { signedAt, receivedAt: signedAt + 300 }), STANDARD_SECRET)).toEqual({ ok: true })
    expect(standardProvider.verify(standardDelivery(standardPaymentBody, { signedAt, receivedAt: signedAt - 300 }), STANDARD_SECRET)).toEqual({ ok: true })
  })

  it('refuses a correctly signed timestamp 301 s old or 301 s in the future', () => {
    const signedAt = 1_800_000_000
    expect(standardProvider.verify(standardDelivery(standardPaymentBody, { id: 'msg_old', signedAt, receivedAt: signedAt + 301 }), STANDARD_SECRET))
      .toEqual({ ok: false, reason: 'timestamp 301 s old (tolerance 300 s)', claimedEventId: 'msg_old' })
    expect(standardProvider.verify(standardDelivery(standardPaymentBody, { id: 'msg_future', signedAt, receivedAt: signedAt - 301 }), STANDARD_SECRET))
      .toEqual({ ok: false, reason: 'timestamp 301 s in the future (tolerance 300 s)', claimedEventId: 'msg_future' })
  })

  it('refuses a timestamp that is not Unix seconds, even when it is the one signed', () => {
    const at = 1_800_000_000
    for (const raw of ['abc', '1800000000.0', '-1800000000', '1.8e9', ' 1800000000', '2027-01-15T08:00:00Z']) {
      // Sign the literal header text so only the timestamp's format can be the reason.
      const signature = `v1,${createHmac('sha256', Buffer.from(STANDARD_SECRET.slice(6), 'base64')).update(`msg_ts.${raw}.${standardPaymentBody}`).digest('base64')}`
      expect(standardProvider.verify(delivery(standardPaymentBody, standardHeaders('msg_ts', raw, signature), at), STANDARD_SECRET), raw)
        .toEqual({ ok: false, reason: 'timestamp missing or not Unix seconds', claimedEventId: 'msg_ts' })
    }
  })

  it('accepts any matching v1 entry of a rotation list, and none when none matches', () => {
    const at = 1_800_000_000
    const good = signStandardWebhook(STANDARD_SECRET, 'msg_rotation', at, standardPaymentBody)
    const verifyWith = (signatures: string) =>
      standardProvider.verify(delivery(standardPaymentBody, standardHeaders('msg_rotation', at, signatures), at), STANDARD_SECRET)
    expect(verifyWith(`${badV1()} ${good}`)).toEqual({ ok: true })
    expect(verifyWith(`${good} ${badV1()}`)).toEqual({ ok: true })
    // The old key's signature next to the new one's, as a sender mid-rotation sends them.
    expect(verifyWith(`${signStandardWebhook(OTHER_STANDARD_SECRET, 'msg_rotation', at, standardPaymentBody)} ${good}`)).toEqual({ ok: true })
    expect(verifyWith(`${badV1()} ${badV1()}`)).toEqual({ ok: false, reason: 'no v1 signature matches', claimedEventId: 'msg_rotation' })
  })

  it('ignores signatures of any version other than v1, even with the right bytes', () => {
    const at = 1_800_000_000
    const rightBytes = signStandardWebhook(STANDARD_SECRET, 'msg_versions', at, standardPaymentBody).slice('v1,'.length)
    for (const signatures of [`v2,${rightBytes}`, `v1a,${rightBytes}`, `V1,${rightBytes}`, rightBytes, `v1,${badV1().slice(3)} v2,${rightBytes}`]) {
      expect(standardProvider.verify(delivery(standardPaymentBody, standardHeaders('msg_versions', at, signatures), at), STANDARD_SECRET), signatures)
        .toEqual({ ok: false, reason: 'no v1 signature matches', claimedEventId: 'msg_versions' })
    }
  })

  it('skips a v1a (asymmetric) entry of a rotation list and accepts its matching v1, in either order; v1a alone matches nothing', () => {
    const at = nowSeconds()
    const good = signStandardWebhook(STANDARD_SECRET, 'msg_v1a', at, standardPaymentBody)
    // A real ed25519 signature over the signed content, as a sender with an asymmetric key adds it.
    const { privateKey } = generateKeyPairSync('ed25519')
    const v1a = `v1a,${sign(null, Buffer.from(`msg_v1a.${at}.${standardPaymentBody}`), privateKey).toString('base64')}`
    const verifyWith = (signatures: string) =>
      standardProvider.verify(delivery(standardPaymentBody, standardHeaders('msg_v1a', at, signatures), at), STANDARD_SECRET)
    expect(verifyWith(`${v1a} ${good}`)).toEqual({ ok: true })
    expect(verifyWith(`${good} ${v1a}`)).toEqual({ ok: true })
    expect(verifyWith(v1a)).toEqual({ ok: false, reason: 'no v1 signature matches', claimedEventId: 'msg_v1a' })
    // Svix's verifier says the same of each.
    const svix = new SvixWebhook(STANDARD_SECRET)
    expect(svix.verify(standardPaymentBody, standardHeaders('msg_v1a', at, `${v1a} ${good}`))).toEqual(JSON.parse(standardPaymentBody))
    expect(() => svix.verify(standardPaymentBody, standardHeaders('msg_v1a', at, v1a))).toThrow('No matching signature found')
  })

  it('reads svix-id, svix-timestamp and svix-signature as the same scheme, as the svix package does', () => {
    const at = nowSeconds()
    const signature = new SvixWebhook(STANDARD_SECRET).sign('msg_svix', new Date(at * 1000), standardPaymentBody)
    const svixHeaders = { 'svix-id': 'msg_svix', 'svix-timestamp': String(at), 'svix-signature': signature }
    const received = delivery(standardPaymentBody, svixHeaders, at)
    expect(new SvixWebhook(STANDARD_SECRET).verify(standardPaymentBody, svixHeaders)).toEqual(JSON.parse(standardPaymentBody))
    expect(standardProvider.verify(received, STANDARD_SECRET)).toEqual({ ok: true })
    expect(standardProvider.verify(received, OTHER_STANDARD_SECRET)).toEqual({ ok: false, reason: 'no v1 signature matches', claimedEventId: 'msg_svix' })
    const parsed = standardProvider.parse(JSON.parse(standardPaymentBody), received)
    expect(parsed.ok && parsed.event.eventId).toBe('msg_svix')
    // Both sets: the webhook-* headers are the ones checked (and stored), so a svix-* set cannot stand in for them.
    const both = { ...svixHeaders, ...standardHeaders('msg_standard', at, badV1()) }
    expect(standardProvider.verify(delivery(standardPaymentBody, both, at), STANDARD_SECRET))
      .toEqual({ ok: false, reason: 'no v1 signature matches', claimedEventId: 'msg_standard' })
  })

  it('verifies the raw bytes: non-ASCII UTF-8 verifies, the same text in other bytes does not', () => {
    const at = 1_800_000_000
    const text = '{"note":"Pembayaran diterima — café, 東京, 🙂","amount":150000}'
    const utf8 = Buffer.from(text, 'utf8')
    expect(utf8.length).toBeGreaterThan(text.length)
    const signature = new Webhook(STANDARD_SECRET).sign('msg_utf8', new Date(at * 1000), text)
    expect(standardProvider.verify(delivery(utf8, standardHeaders('msg_utf8', at, signature), at), STANDARD_SECRET)).toEqual({ ok: true })
    // The same JSON value in other bytes (UTF-16, or re-serialised with indentation) no longer matches.
    const refusal = { ok: false, reason: 'no v1 signature matches', claimedEventId: 'msg_utf8' }
    expect(standardProvider.verify(delivery(Buffer.from(text, 'utf16le'), standardHeaders('msg_utf8', at, signature), at), STANDARD_SECRET)).toEqual(refusal)
    expect(standardProvider.verify(delivery(JSON.stringify(JSON.parse(text), null, 1), standardHeaders('msg_utf8', at, signature), at), STANDARD_SECRET)).toEqual(refusal)
  })
})

describe('timestamp tolerance against the standardwebhooks package (the specification\'s 5 minutes)', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it.each([-301, -300, 0, 300, 301])('decides a delivery signed %i s from now as the package does', (offset) => {
    const now = 1_800_000_000
    // The package reads Date.now(): fixed, so both judge the same skew.
    vi.useFakeTimers({ toFake: ['Date'], now: now * 1000 })
    const signed = standardDelivery(standardPaymentBody, { id: 'msg_edge', signedAt: now + offset, receivedAt: now })
    const headers = { 'webhook-id': 'msg_edge', 'webhook-timestamp': signed.header('webhook-timestamp')!, 'webhook-signature': signed.header('webhook-signature')! }
    let packageAccepts = true
    try {
      new Webhook(STANDARD_SECRET).verify(standardPaymentBody, headers)
    }
    catch {
      packageAccepts = false
    }
    expect(packageAccepts).toBe(Math.abs(offset) <= 300)
    expect(standardProvider.verify(signed, STANDARD_SECRET).ok).toBe(packageAccepts)
  })
})

describe('timestamp tolerance (checkTimestamp)', () => {
  it('is symmetric around now with a 300 s edge', () => {
    const now = 1_800_000_000
    expect(checkTimestamp(String(now), now)).toEqual({ ok: true, seconds: now })
    expect(checkTimestamp(String(now - 300), now)).toEqual({ ok: true, seconds: now - 300 })
    expect(checkTimestamp(String(now + 300), now)).toEqual({ ok: true, seconds: now + 300 })
    expect(checkTimestamp(String(now - 301), now)).toEqual({ ok: false, reason: 'timestamp 301 s old (tolerance 300 s)' })
    expect(checkTimestamp(String(now + 301), now)).toEqual({ ok: false, reason: 'timestamp 301 s in the future (tolerance 300 s)' })
    expect(checkTimestamp(undefined, now)).toEqual({ ok: false, reason: 'timestamp missing or not Unix seconds' })
  })
})

// ---------------------------------------------------------------------------------------------
// Stripe

const STRIPE_SECRET = `whsec_${randomBytes(24).toString('hex')}`
const stripe = new Stripe('sk_test_x')

const stripeEventBody = JSON.stringify({
  id: 'evt_1QabcDEFghiJKL',
  object: 'event',
  type: 'payment_intent.succeeded',
  created: 1_800_000_000,
  data: { object: { id: 'pi_3Qabc', object: 'payment_intent', amount: 4200, amount_received: 4200, currency: 'usd', metadata: { order_id: 'ord_stripe_1' } } },
})

/** Stripe-Signature as stripe-node's own test helper writes it. */
const stripeHeader = (payload: string, timestamp: number, secret = STRIPE_SECRET) =>
  stripe.webhooks.generateTestHeaderString({ payload, secret, timestamp })

const v1Of = (header: string) => /v1=([0-9a-f]{64})/.exec(header)![1]!

const verifyStripe = (header: string | undefined, receivedAt: number, body: string | Buffer = stripeEventBody, secret = STRIPE_SECRET) =>
  stripeProvider.verify(delivery(body, header === undefined ? {} : { 'Stripe-Signature': header }, receivedAt), secret)

/** What stripe-node's constructEvent says of the same delivery (receivedAt in ms there). */
function stripeNodeAccepts(header: string, receivedAt: number, body = stripeEventBody): boolean {
  try {
    stripe.webhooks.constructEvent(body, header, STRIPE_SECRET, 300, undefined, receivedAt * 1000)
    return true
  }
  catch {
    return false
  }
}

describe('Stripe signatures', () => {
  it('accepts headers made by stripe-node, for any body', () => {
    fc.assert(fc.property(
      fc.string({ unit: 'grapheme', minLength: 1, maxLength: 300 }),
      fc.integer({ min: 1_000_000_000, max: 4_000_000_000 }),
      (payload, at) => {
        expect(verifyStripe(stripeHeader(payload, at), at, payload)).toEqual({ ok: true })
      },
    ), { numRuns: 50 })
    const at = 1_800_000_000
    const header = stripeHeader(stripeEventBody, at)
    expect(header).toMatch(/^t=1800000000,v1=[0-9a-f]{64}$/)
    expect(verifyStripe(header, at)).toEqual({ ok: true })
    // Our HMAC is the same as node:crypto's over "t.body" with the whole whsec_… string as the key.
    expect(v1Of(header)).toBe(createHmac('sha256', STRIPE_SECRET).update(`${at}.${stripeEventBody}`).digest('hex'))
  })

  it('accepts when any v1 matches, as Stripe sends one per secret while rolling', () => {
    const at = 1_800_000_000
    const valid = v1Of(stripeHeader(stripeEventBody, at))
    const bad = randomBytes(32).toString('hex')
    expect(verifyStripe(`t=${at},v1=bad,v1=${valid}`, at)).toEqual({ ok: true })
    expect(verifyStripe(`t=${at},v1=${bad},v1=${valid}`, at)).toEqual({ ok: true })
    expect(verifyStripe(`t=${at}, v1=${bad}, v0=${bad}, v1=${valid}`, at)).toEqual({ ok: true })
    expect(verifyStripe(`t=${at},v1=${bad},v1=bad`, at)).toEqual({ ok: false, reason: 'no v1 signature matches' })
  })

  it('never counts a v0 signature, even one with the right bytes', () => {
    const at = 1_800_000_000
    const valid = v1Of(stripeHeader(stripeEventBody, at))
    expect(verifyStripe(`t=${at},v0=${valid}`, at)).toEqual({ ok: false, reason: 'no v1 signature matches' })
    expect(verifyStripe(stripe.webhooks.generateTestHeaderString({ payload: stripeEventBody, secret: STRIPE_SECRET, timestamp: at, scheme: 'v0' }), at))
      .toEqual({ ok: false, reason: 'no v1 signature matches' })
    // Upper-case hex is not how Stripe writes v1: refused rather than decoded leniently.
    expect(verifyStripe(`t=${at},v1=${valid.toUpperCase()}`, at)).toEqual({ ok: false, reason: 'no v1 signature matches' })
  })

  it('accepts exactly 300 s either way and refuses 301 s, in the future too (where stripe-node accepts)', () => {
    const at = 1_800_000_000
    const header = stripeHeader(stripeEventBody, at)
    expect(verifyStripe(header, at + 300)).toEqual({ ok: true })
    expect(verifyStripe(header, at - 300)).toEqual({ ok: true })
    expect(verifyStripe(header, at + 301)).toEqual({ ok: false, reason: 'timestamp 301 s old (tolerance 300 s)' })
    expect(verifyStripe(header, at - 301)).toEqual({ ok: false, reason: 'timestamp 301 s in the future (tolerance 300 s)' })
    expect(verifyStripe(header, at - 86_400)).toEqual({ ok: false, reason: 'timestamp 86400 s in the future (tolerance 300 s)' })
    // stripe-node agrees on the past, and checks nothing about the future: that is the difference.
    expect(stripeNodeAccepts(header, at + 300)).toBe(true)
    expect(stripeNodeAccepts(header, at + 301)).toBe(false)
    expect(stripeNodeAccepts(header, at - 86_400)).toBe(true)
  })

  it('refuses a missing header, two t= parts, no t=, a malformed t= and another secret', () => {
    const at = 1_800_000_000
    const header = stripeHeader(stripeEventBody, at)
    const valid = v1Of(header)
    expect(verifyStripe(undefined, at)).toEqual({ ok: false, reason: 'Stripe-Signature header missing' })
    expect(verifyStripe('', at)).toEqual({ ok: false, reason: 'Stripe-Signature header missing' })
    expect(verifyStripe(`t=${at},t=${at},v1=${valid}`, at)).toEqual({ ok: false, reason: 'Stripe-Signature needs exactly one t=' })
    expect(verifyStripe(`t=${at},v1=${valid},t=${at + 1}`, at)).toEqual({ ok: false, reason: 'Stripe-Signature needs exactly one t=' })
    expect(verifyStripe(`v1=${valid}`, at)).toEqual({ ok: false, reason: 'Stripe-Signature needs exactly one t=' })
    expect(verifyStripe(`t=${at}x,v1=${valid}`, at)).toEqual({ ok: false, reason: 'timestamp missing or not Unix seconds' })
    expect(verifyStripe(header, at, stripeEventBody, `whsec_${randomBytes(24).toString('hex')}`)).toEqual({ ok: false, reason: 'no v1 signature matches' })
    expect(verifyStripe(stripeHeader(stripeEventBody, at, 'whsec_another'), at)).toEqual({ ok: false, reason: 'no v1 signature matches' })
  })

  it('refuses a body changed in one byte, or signed under another timestamp', () => {
    const at = 1_800_000_000
    const header = stripeHeader(stripeEventBody, at)
    expect(verifyStripe(header, at, flipByte(Buffer.from(stripeEventBody), 20))).toEqual({ ok: false, reason: 'no v1 signature matches' })
    expect(verifyStripe(`t=${at + 1},v1=${v1Of(header)}`, at)).toEqual({ ok: false, reason: 'no v1 signature matches' })
  })
})

// ---------------------------------------------------------------------------------------------
// Midtrans

const SERVER_KEY = `SB-Mid-server-${randomBytes(12).toString('base64url')}`

/** signature_key computed here, independently: SHA-512 hex of order_id + status_code + gross_amount + server key. */
const sha512Signature = (orderId: string, statusCode: string, grossAmount: string, serverKey = SERVER_KEY) =>
  createHash('sha512').update(orderId + statusCode + grossAmount + serverKey).digest('hex')

interface MidtransFields {
  order_id: string
  status_code: string
  gross_amount: string
  transaction_id: string
  transaction_status: string
  fraud_status?: string
  currency?: string
  /** Refunded so far, on refund and partial_refund notifications. */
  refund_amount?: string
}

function midtransNotification(fields: Partial<MidtransFields> = {}, serverKey = SERVER_KEY): Record<string, string> {
  const n: MidtransFields = {
    order_id: 'ord_midtrans_1',
    status_code: '200',
    gross_amount: '150000.00',
    transaction_id: '9aed5972-5b6a-401e-894b-a32c91ed1a3a',
    transaction_status: 'settlement',
    ...fields,
  }
  return {
    transaction_time: '2026-11-29 10:00:00',
    status_message: 'midtrans payment notification',
    payment_type: 'credit_card',
    ...n,
    signature_key: sha512Signature(n.order_id, n.status_code, n.gross_amount, serverKey),
  } as Record<string, string>
}

const verifyMidtrans = (body: string | Buffer, serverKey = SERVER_KEY) => midtransProvider.verify(delivery(body, {}, 0), serverKey)

describe('Midtrans signatures', () => {
  it('accepts a body whose signature_key is SHA-512(order_id + status_code + gross_amount + server key)', () => {
    expect(verifyMidtrans(JSON.stringify(midtransNotification()))).toEqual({ ok: true })
    expect(verifyMidtrans(JSON.stringify(midtransNotification({ transaction_status: 'pending', status_code: '201', gross_amount: '99' })))).toEqual({ ok: true })
    // Hex case does not matter; the bytes do.
    const upper = midtransNotification()
    expect(verifyMidtrans(JSON.stringify({ ...upper, signature_key: upper.signature_key!.toUpperCase() }))).toEqual({ ok: true })
  })

  it('has no timestamp: an old notification still verifies (replays only repeat a state)', () => {
    expect(midtransProvider.verify(delivery(JSON.stringify(midtransNotification()), {}, 4_000_000_000), SERVER_KEY)).toEqual({ ok: true })
    expect(midtransProvider.signatureHeaders).toEqual([])
  })

  it('refuses a forged amount, order or status, and a body signed with another server key', () => {
    const signed = midtransNotification()
    const refusal = { ok: false, reason: 'signature_key does not match' }
    expect(verifyMidtrans(JSON.stringify({ ...signed, gross_amount: '1.00' }))).toEqual(refusal)
    expect(verifyMidtrans(JSON.stringify({ ...signed, gross_amount: '150000' }))).toEqual(refusal)
    expect(verifyMidtrans(JSON.stringify({ ...signed, order_id: 'ord_midtrans_2' }))).toEqual(refusal)
    expect(verifyMidtrans(JSON.stringify({ ...signed, status_code: '201' }))).toEqual(refusal)
    expect(verifyMidtrans(JSON.stringify(midtransNotification({}, 'SB-Mid-server-another')))).toEqual(refusal)
    expect(verifyMidtrans(JSON.stringify(signed), 'SB-Mid-server-another')).toEqual(refusal)
  })

  it('refuses a body that is not JSON or lacks a signed field', () => {
    const refusal = { ok: false, reason: 'body lacks order_id, status_code, gross_amount or signature_key' }
    const signed = midtransNotification()
    expect(verifyMidtrans('order_id=ord_1&status_code=200')).toEqual(refusal)
    expect(verifyMidtrans(`${JSON.stringify(signed).slice(0, -1)}`)).toEqual(refusal)
    expect(verifyMidtrans('')).toEqual(refusal)
    expect(verifyMidtrans('[]')).toEqual(refusal)
    for (const field of ['order_id', 'status_code', 'gross_amount', 'signature_key']) {
      const { [field]: _dropped, ...rest } = signed
      expect(verifyMidtrans(JSON.stringify(rest)), field).toEqual(refusal)
    }
    // A signature_key that is not 128 hex digits is not a signature at all.
    expect(verifyMidtrans(JSON.stringify({ ...signed, signature_key: signed.signature_key!.slice(2) }))).toEqual(refusal)
  })
})

// ---------------------------------------------------------------------------------------------
// parse()

describe('parse: standard', () => {
  const at = 1_800_000_000
  const parseStandard = (json: unknown, id = 'msg_parse_1') =>
    standardProvider.parse(json, delivery(JSON.stringify(json), standardHeaders(id, at, 'v1,unused'), at))

  it('maps each event type with the webhook-id header as the event id', () => {
    for (const type of ['payment.succeeded', 'payment.failed', 'payment.refunded'] as const) {
      const json = { type, timestamp: '2026-11-29T10:00:00+07:00', data: { orderId: 'ord_std', paymentId: 'pay_std', amount: 150000, currency: 'IDR' } }
      expect(parseStandard(json, `msg_${type}`)).toEqual({
        ok: true,
        event: { eventId: `msg_${type}`, type, orderId: 'ord_std', paymentId: 'pay_std', amount: 150000, currency: 'IDR' },
      })
    }
  })

  it('refuses an unknown type and a malformed body, naming the field', () => {
    const data = { orderId: 'ord_std', paymentId: 'pay_std', amount: 150000, currency: 'IDR' }
    const unknown = parseStandard({ type: 'payment.updated', timestamp: '2026-11-29T10:00:00Z', data })
    expect(unknown.ok).toBe(false)
    expect(!unknown.ok && unknown.reason).toMatch(/^type: /)
    const cases: Array<[unknown, RegExp]> = [
      [{ type: 'payment.succeeded', timestamp: 'yesterday', data }, /^timestamp: /],
      [{ type: 'payment.succeeded', timestamp: '2026-11-29T10:00:00Z', data: { ...data, amount: 1.5 } }, /^data\.amount: /],
      [{ type: 'payment.succeeded', timestamp: '2026-11-29T10:00:00Z', data: { ...data, currency: 'idr' } }, /^data\.currency: /],
      [{ type: 'payment.succeeded', timestamp: '2026-11-29T10:00:00Z', data: { ...data, orderId: '' } }, /^data\.orderId: /],
      [null, /^\(body\): /],
    ]
    for (const [json, reason] of cases) {
      const parsed = parseStandard(json)
      expect(parsed.ok, JSON.stringify(json)).toBe(false)
      expect(!parsed.ok && parsed.reason).toMatch(reason)
    }
  })
})

describe('parse: stripe', () => {
  const parseStripe = (json: unknown) => stripeProvider.parse(json, delivery(JSON.stringify(json), {}, 0))

  const intent = (overrides: Record<string, unknown> = {}) => ({
    id: 'pi_3Qintent', object: 'payment_intent', amount: 4200, amount_received: 4200, currency: 'usd', metadata: { order_id: 'ord_stripe_1' }, ...overrides,
  })
  const event = (id: string, type: string, object: unknown) => ({ id, object: 'event', type, created: 1_800_000_000, data: { object } })

  it('maps payment_intent.succeeded to payment.succeeded with the amount received', () => {
    expect(parseStripe(event('evt_succeeded', 'payment_intent.succeeded', intent({ amount: 5000, amount_received: 4200 })))).toEqual({
      ok: true,
      event: { eventId: 'evt_succeeded', type: 'payment.succeeded', orderId: 'ord_stripe_1', paymentId: 'pi_3Qintent', amount: 4200, currency: 'USD' },
    })
    // Without amount_received, the intent's amount.
    expect(parseStripe(event('evt_no_received', 'payment_intent.succeeded', intent({ amount_received: undefined })))).toEqual({
      ok: true,
      event: { eventId: 'evt_no_received', type: 'payment.succeeded', orderId: 'ord_stripe_1', paymentId: 'pi_3Qintent', amount: 4200, currency: 'USD' },
    })
  })

  it('maps payment_intent.payment_failed to payment.failed, an IDR amount read in Stripe\'s hundredths of a rupiah', () => {
    expect(parseStripe(event('evt_failed', 'payment_intent.payment_failed', intent({ amount: 420000, amount_received: 0, currency: 'idr' })))).toEqual({
      ok: true,
      event: { eventId: 'evt_failed', type: 'payment.failed', orderId: 'ord_stripe_1', paymentId: 'pi_3Qintent', amount: 4200, currency: 'IDR' },
    })
  })

  it('reads IDR in hundredths (Stripe\'s two-decimal IDR), rounded down to whole rupiah, and other currencies as they come', () => {
    const paid = (amount: number, currency: string) => {
      const parsed = parseStripe(event('evt_paid', 'payment_intent.succeeded', intent({ amount, amount_received: amount, currency })))
      return parsed.ok ? parsed.event.amount : parsed.reason
    }
    expect(paid(15_000_000, 'idr')).toBe(150_000)
    expect(paid(15_000_050, 'idr')).toBe(150_000)
    expect(paid(14_999_950, 'idr')).toBe(149_999)
    expect(paid(13, 'idr')).toBe(0)
    expect(paid(4200, 'usd')).toBe(4200)
    expect(paid(4200, 'jpy')).toBe(4200)
  })

  it('maps charge.refunded to payment.refunded under the charge\'s payment intent', () => {
    const charge = { id: 'ch_3Qcharge', object: 'charge', amount: 4200, amount_refunded: 4200, currency: 'eur', payment_intent: 'pi_3Qintent', metadata: { order_id: 'ord_stripe_1' } }
    expect(parseStripe(event('evt_refunded', 'charge.refunded', charge))).toEqual({
      ok: true,
      event: { eventId: 'evt_refunded', type: 'payment.refunded', orderId: 'ord_stripe_1', paymentId: 'pi_3Qintent', amount: 4200, currency: 'EUR' },
    })
    // A charge made without an intent is its own payment.
    const parsed = parseStripe(event('evt_refunded_bare', 'charge.refunded', { ...charge, payment_intent: null }))
    expect(parsed.ok && parsed.event.paymentId).toBe('ch_3Qcharge')
  })

  it('gives charge.refunded the amount refunded so far (amount_refunded), not the amount charged', () => {
    const partly = { id: 'ch_3Qcharge', object: 'charge', amount: 4200, amount_refunded: 1000, refunded: false, currency: 'eur', payment_intent: 'pi_3Qintent', metadata: { order_id: 'ord_stripe_1' } }
    expect(parseStripe(event('evt_partly_refunded', 'charge.refunded', partly))).toEqual({
      ok: true,
      event: { eventId: 'evt_partly_refunded', type: 'payment.refunded', orderId: 'ord_stripe_1', paymentId: 'pi_3Qintent', amount: 1000, currency: 'EUR' },
    })
    const { amount_refunded: _refunded, ...withoutRefunded } = partly
    const unknown = parseStripe(event('evt_refunded_unknown', 'charge.refunded', withoutRefunded))
    expect(unknown.ok && unknown.event.amount).toBeUndefined()
  })

  it('refuses another event type, naming it', () => {
    const parsed = parseStripe(event('evt_other', 'payment_intent.created', intent()))
    expect(parsed).toEqual({
      ok: false,
      reason: 'event type "payment_intent.created" is not handled; subscribe this endpoint to payment_intent.succeeded, payment_intent.payment_failed, charge.refunded, refund.created, refund.updated, refund.failed, charge.refund.updated only',
    })
  })

  it.each(['toString', 'constructor', '__proto__', 'hasOwnProperty'])('refuses the type "%s", a member of every object, like any other', (type) => {
    const parsed = parseStripe(event('evt_proto', type, intent()))
    expect(parsed.ok).toBe(false)
    expect(!parsed.ok && parsed.reason).toMatch(/^event type ".+" is not handled/)
  })

  it('refuses an event without metadata (neither order_id nor orderId) or an id', () => {
    const { metadata: _metadata, ...withoutMetadata } = intent()
    const noOrder = parseStripe(event('evt_no_order', 'payment_intent.succeeded', withoutMetadata))
    expect(noOrder.ok).toBe(false)
    expect(!noOrder.ok && noOrder.reason).toMatch(/^data\.object\.metadata: /)
    const noId = parseStripe({ ...event('evt_x', 'payment_intent.succeeded', intent()), id: undefined })
    expect(noId.ok).toBe(false)
    expect(!noId.ok && noId.reason).toMatch(/^id: /)
  })
})

describe('parse: midtrans', () => {
  const parseMidtrans = (fields: Partial<MidtransFields>) => {
    const json = midtransNotification(fields)
    return midtransProvider.parse(json, delivery(JSON.stringify(json), {}, 0))
  }

  // Each status with the status_code Midtrans documents it under (see providers/midtrans.ts).
  const cases: Array<[status: string, code: string, fraud: string | undefined, type: string]> = [
    ['capture', '200', 'accept', 'payment.succeeded'],
    ['capture', '201', 'challenge', 'payment.updated'],
    ['settlement', '200', undefined, 'payment.succeeded'],
    ['settlement', '200', 'accept', 'payment.succeeded'],
    ['pending', '201', undefined, 'payment.updated'],
    ['authorize', '200', undefined, 'payment.updated'],
    ['refund', '200', undefined, 'payment.updated'],
    ['partial_refund', '200', undefined, 'payment.updated'],
    ['chargeback', '200', undefined, 'payment.updated'],
    ['partial_chargeback', '200', undefined, 'payment.updated'],
    ['cancel', '200', undefined, 'payment.updated'],
    ['deny', '202', undefined, 'payment.failed'],
    ['deny', '202', 'deny', 'payment.failed'],
    ['cancel', '202', undefined, 'payment.failed'],
    ['expire', '202', undefined, 'payment.failed'],
    ['failure', '202', undefined, 'payment.failed'],
  ]

  it.each(cases)('maps %s under status_code %s (fraud_status %s) to %s, keyed by the signed fields and the status', (status, code, fraud, type) => {
    expect(parseMidtrans({ transaction_status: status, status_code: code, ...(fraud && { fraud_status: fraud }) })).toEqual({
      ok: true,
      event: { eventId: `ord_midtrans_1:${code}:150000.00:${status}`, type, orderId: 'ord_midtrans_1', amount: 150000, currency: 'IDR' },
    })
  })

  it('gives a capture under review and the same capture accepted two event ids, by their status codes', () => {
    const review = parseMidtrans({ transaction_status: 'capture', status_code: '201', fraud_status: 'challenge' })
    const accepted = parseMidtrans({ transaction_status: 'capture', status_code: '200', fraud_status: 'accept' })
    expect(review.ok && review.event.eventId).toBe('ord_midtrans_1:201:150000.00:capture')
    expect(accepted.ok && accepted.event.eventId).toBe('ord_midtrans_1:200:150000.00:capture')
  })

  it('rounds gross_amount to an integer; the event id keeps gross_amount as signed', () => {
    const parsedWith = (gross_amount: string) => {
      const parsed = parseMidtrans({ gross_amount })
      return parsed.ok ? [parsed.event.amount, parsed.event.eventId] : parsed.reason
    }
    expect(parsedWith('150000')).toEqual([150000, 'ord_midtrans_1:200:150000:settlement'])
    expect(parsedWith('150000.00')).toEqual([150000, 'ord_midtrans_1:200:150000.00:settlement'])
    expect(parsedWith('10000.50')).toEqual([10001, 'ord_midtrans_1:200:10000.50:settlement'])
    expect(parsedWith('99.49')).toEqual([99, 'ord_midtrans_1:200:99.49:settlement'])
  })

  it('keys a refund or partial_refund also by its refund_amount so far: each partial refund of an order is an event of its own, a redelivery the same one', () => {
    const idOf = (fields: Partial<MidtransFields>) => {
      const parsed = parseMidtrans({ transaction_status: 'partial_refund', ...fields })
      return parsed.ok ? parsed.event.eventId : parsed.reason
    }
    expect(idOf({ refund_amount: '30000.00' })).toBe('ord_midtrans_1:200:150000.00:partial_refund:30000')
    expect(idOf({ refund_amount: '70000.00' })).toBe('ord_midtrans_1:200:150000.00:partial_refund:70000')
    expect(idOf({ refund_amount: '70000', transaction_id: 'redelivered' })).toBe('ord_midtrans_1:200:150000.00:partial_refund:70000')
    expect(idOf({ transaction_status: 'refund', refund_amount: '150000.00' })).toBe('ord_midtrans_1:200:150000.00:refund:150000')
    // Elsewhere refund_amount tells nothing new: the id stays the triple and the status.
    expect(idOf({ transaction_status: 'chargeback', refund_amount: '30000.00' })).toBe('ord_midtrans_1:200:150000.00:chargeback')
    const parsed = parseMidtrans({ transaction_status: 'partial_refund', refund_amount: '30000.00' })
    expect(parsed.ok && parsed.event).toEqual({ eventId: 'ord_midtrans_1:200:150000.00:partial_refund:30000', type: 'payment.updated', orderId: 'ord_midtrans_1', amount: 150000, currency: 'IDR' })
  })

  it('refuses a refund_amount that is not a whole amount of at most gross_amount: what the unsigned id part may vary is bounded', () => {
    for (const refundAmount of ['150001.00', '30000.50', 'all', '-5']) {
      expect(parseMidtrans({ transaction_status: 'partial_refund', refund_amount: refundAmount }), refundAmount).toEqual({
        ok: false,
        reason: `refund_amount "${refundAmount}" is not a whole amount of at most gross_amount 150000.00`,
      })
    }
  })

  it('keeps the longest event id within 255 visible ASCII characters', () => {
    const parsed = parseMidtrans({ order_id: 'o'.repeat(64), gross_amount: '999999999999999.99', transaction_status: 'partial_chargeback' })
    expect(parsed.ok).toBe(true)
    expect(parsed.ok && parsed.event.eventId).toMatch(/^[\x21-\x7E]{1,255}$/)
    const refund = parseMidtrans({ order_id: 'o'.repeat(64), gross_amount: '999999999999999.99', transaction_status: 'partial_refund', refund_amount: '999999999999999.00' })
    expect(refund.ok && refund.event.eventId).toMatch(/^[\x21-\x7E]{1,255}$/)
  })

  it('refuses an unknown status, naming it', () => {
    expect(parseMidtrans({ transaction_status: 'paid' })).toEqual({
      ok: false,
      reason: 'transaction_status "paid" is not a Midtrans status this integration knows',
    })
  })

  it('refuses a notification without a transaction id', () => {
    const { transaction_id: _id, ...rest } = midtransNotification()
    const parsed = midtransProvider.parse(rest, delivery(JSON.stringify(rest), {}, 0))
    expect(parsed.ok).toBe(false)
    expect(!parsed.ok && parsed.reason).toMatch(/^transaction_id: /)
  })
})

describe('requestedStatusOf', () => {
  it('maps each event type to the payment status it asks for', () => {
    expect(requestedStatusOf).toEqual({
      'payment.succeeded': 'paid',
      'payment.failed': 'payment_failed',
      'payment.refunded': 'refunded',
      'payment.updated': null,
      'refund.updated': null,
    })
  })
})

describe('an unknown or unserved webhook provider (404)', () => {
  it('names the webhook URLs this deployment serves, spelled out: no {…} left for the reader to fill in', () => {
    expect(unknownWebhookProviderDetail('midtrans', ['stripe'])).toBe('No webhook provider "midtrans" here. Point the provider at /api/webhooks/stripe.')
    expect(unknownWebhookProviderDetail('paypal', ['standard', 'stripe'])).toBe('No webhook provider "paypal" here. Point the provider at one of /api/webhooks/standard or /api/webhooks/stripe.')
    expect(unknownWebhookProviderDetail('midtrans', ['standard', 'stripe', 'mockpay'])).toBe(
      'No webhook provider "midtrans" here. Point the provider at one of /api/webhooks/standard, /api/webhooks/stripe or /api/webhooks/mockpay.')
    expect(unknownWebhookProviderDetail('stripe', [])).toBe('No webhook provider "stripe" here: none is on (a provider is on once its webhook secret is set).')
  })
})
