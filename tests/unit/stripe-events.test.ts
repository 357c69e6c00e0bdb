import { describe, expect, it } from 'vitest'
import { stripeProvider } from '../../server/webhooks/providers/stripe'
import type { PaymentEvent } from '../../server/webhooks/types'

/** What the Stripe parser makes of an event body (verification is webhook-signatures.test.ts's). */
const parse = (json: unknown) => stripeProvider.parse(json, { body: Buffer.from(JSON.stringify(json)), header: () => undefined, nowSeconds: 0 })

const event = (id: string, type: string, object: unknown) => ({ id, object: 'event', type, created: 1_800_000_000, data: { object } })

const intent = (metadata: Record<string, string>) => ({ id: 'pi_3Qintent', object: 'payment_intent', amount: 4200, amount_received: 4200, currency: 'usd', metadata })

/** A Refund object as Stripe sends it in refund.* events (the fields this app reads, and a few it does not). */
const refund = (overrides: Record<string, unknown> = {}) => ({
  id: 're_3QstripeRefund',
  object: 'refund',
  amount: 1000,
  balance_transaction: 'txn_3Q',
  charge: 'ch_3Qcharge',
  created: 1_800_000_000,
  currency: 'usd',
  metadata: { order_id: 'ord_stripe_1', refund_id: 're_appRefund1' },
  payment_intent: 'pi_3Qintent',
  reason: 'requested_by_customer',
  status: 'succeeded',
  ...overrides,
})

const parsedEvent = (json: unknown): PaymentEvent => {
  const parsed = parse(json)
  if (!parsed.ok) throw new Error(parsed.reason)
  return parsed.event
}

describe('Stripe events: the order id', () => {
  it('reads metadata.order_id, what this app\'s PaymentIntents carry', () => {
    expect(parsedEvent(event('evt_1', 'payment_intent.succeeded', intent({ order_id: 'ord_snake' }))).orderId).toBe('ord_snake')
  })

  it('reads metadata.orderId, the other spelling docs/webhooks.md documents', () => {
    expect(parsedEvent(event('evt_2', 'payment_intent.succeeded', intent({ orderId: 'ord_camel' }))).orderId).toBe('ord_camel')
  })

  it('prefers order_id when both are there', () => {
    expect(parsedEvent(event('evt_3', 'payment_intent.succeeded', intent({ orderId: 'ord_camel', order_id: 'ord_snake' }))).orderId).toBe('ord_snake')
  })

  it('refuses an event with neither, naming the metadata', () => {
    for (const metadata of [{}, { order: 'ord_x' }, { order_id: '' }] as Array<Record<string, string>>) {
      const parsed = parse(event('evt_4', 'payment_intent.succeeded', intent(metadata)))
      expect(parsed.ok, JSON.stringify(metadata)).toBe(false)
      expect(!parsed.ok && parsed.reason).toMatch(/^data\.object\.metadata/)
    }
    const parsed = parse(event('evt_5', 'refund.updated', refund({ metadata: {}, payment_intent: null })))
    expect(parsed).toEqual({ ok: false, reason: 'data.object.metadata: needs order_id (or orderId), the order the object belongs to' })
  })

  it('takes a charge.refunded without order metadata by its payment_intent (the receiver finds the order by it); a charge without one is refused', () => {
    const charge = (overrides: Record<string, unknown>) => ({
      id: 'ch_3Qcharge', object: 'charge', amount: 4200, amount_refunded: 1000, currency: 'usd', payment_intent: 'pi_3Qintent', refunded: false, ...overrides,
    })
    for (const metadata of [{}, undefined]) {
      expect(parse(event('evt_7', 'charge.refunded', charge({ metadata })))).toEqual({
        ok: true,
        event: { eventId: 'evt_7', type: 'payment.refunded', orderId: '', paymentId: 'pi_3Qintent', amount: 1000, currency: 'USD' },
      })
    }
    expect(parse(event('evt_8', 'charge.refunded', charge({ metadata: {}, payment_intent: null }))))
      .toEqual({ ok: false, reason: 'data.object.metadata: needs order_id (or orderId), the order the object belongs to' })
  })

  it('takes a refund made in the dashboard (no metadata) with an empty order id: the receiver finds the order by its payment', () => {
    for (const metadata of [{}, undefined]) {
      const parsed = parse(event('evt_6', 'refund.updated', refund({ metadata })))
      expect(parsed).toEqual({
        ok: true,
        event: {
          eventId: 'evt_6', type: 'refund.updated', orderId: '', paymentId: 'pi_3Qintent', currency: 'USD',
          refund: { providerRefundId: 're_3QstripeRefund', amount: 1000, status: 'succeeded' },
        },
      })
    }
  })
})

describe('Stripe events: refunds', () => {
  it.each(['refund.created', 'refund.updated', 'refund.failed', 'charge.refund.updated'])('maps %s to refund.updated, carrying the one refund', (type) => {
    expect(parse(event(`evt_${type}`, type, refund()))).toEqual({
      ok: true,
      event: {
        eventId: `evt_${type}`,
        type: 'refund.updated',
        orderId: 'ord_stripe_1',
        paymentId: 'pi_3Qintent',
        currency: 'USD',
        refund: { providerRefundId: 're_3QstripeRefund', refundId: 're_appRefund1', amount: 1000, status: 'succeeded' },
      },
    })
  })

  it.each([
    ['pending', 'pending'],
    ['requires_action', 'pending'],
    ['succeeded', 'succeeded'],
    ['failed', 'failed'],
    ['canceled', 'failed'],
  ])('maps Stripe\'s refund status %s to %s', (stripeStatus, status) => {
    expect(parsedEvent(event('evt_status', 'refund.updated', refund({ status: stripeStatus }))).refund?.status).toBe(status)
  })

  it('refuses a refund status Stripe does not document, and a refund event without a Refund object', () => {
    const unknown = parse(event('evt_unknown_status', 'refund.updated', refund({ status: 'reversed' })))
    expect(unknown.ok).toBe(false)
    expect(!unknown.ok && unknown.reason).toMatch(/^data\.object\.status: /)
    const charge = parse(event('evt_charge', 'refund.updated', { ...refund(), object: 'charge' }))
    expect(!charge.ok && charge.reason).toMatch(/^data\.object\.object: /)
    const { amount: _amount, ...noAmount } = refund()
    const missing = parse(event('evt_no_amount', 'refund.updated', noAmount))
    expect(!missing.ok && missing.reason).toMatch(/^data\.object\.amount: /)
  })

  it('gives a refund made in Stripe\'s dashboard no refundId of this app\'s', () => {
    const made = parsedEvent(event('evt_dashboard', 'refund.created', refund({ metadata: { orderId: 'ord_dashboard' } })))
    expect(made.orderId).toBe('ord_dashboard')
    expect(made.refund).toEqual({ providerRefundId: 're_3QstripeRefund', amount: 1000, status: 'succeeded' })
  })

  it('converts the refund\'s amount to the app\'s units: IDR from hundredths, JPY and KWD as they are', () => {
    const amountOf = (amount: number, currency: string) => parsedEvent(event('evt_amount', 'refund.updated', refund({ amount, currency }))).refund?.amount
    expect(amountOf(5_000_000, 'idr')).toBe(50_000)
    expect(amountOf(5000, 'jpy')).toBe(5000)
    expect(amountOf(5120, 'kwd')).toBe(5120)
    expect(amountOf(300_000, 'isk')).toBe(3000)
  })

  it('takes a refund without a payment intent under its charge', () => {
    expect(parsedEvent(event('evt_charge_only', 'refund.updated', refund({ payment_intent: null }))).paymentId).toBe('ch_3Qcharge')
  })
})

describe('Stripe events: charge.refunded is the cumulative amount refunded', () => {
  const charge = (amountRefunded: number, currency: string, amount: number) => ({
    id: 'ch_3Qcharge', object: 'charge', amount, amount_refunded: amountRefunded, refunded: amountRefunded === amount, currency, payment_intent: 'pi_3Qintent', metadata: { order_id: 'ord_stripe_1' },
  })
  const refundedSoFar = (amountRefunded: number, currency: string, amount: number) => {
    const parsed = parsedEvent(event('evt_refunded', 'charge.refunded', charge(amountRefunded, currency, amount)))
    expect(parsed.type).toBe('payment.refunded')
    return parsed.amount
  }

  it('in IDR: Stripe\'s hundredths of the total refunded, in whole rupiah', () => {
    // Rp 150,000 paid; Rp 50,000 then Rp 30,000 refunded: the second event says 80,000 in all.
    expect(refundedSoFar(5_000_000, 'idr', 15_000_000)).toBe(50_000)
    expect(refundedSoFar(8_000_000, 'idr', 15_000_000)).toBe(80_000)
    expect(refundedSoFar(15_000_000, 'idr', 15_000_000)).toBe(150_000)
  })

  it('in JPY: the yen refunded so far, as they are', () => {
    expect(refundedSoFar(1000, 'jpy', 5000)).toBe(1000)
    expect(refundedSoFar(3500, 'jpy', 5000)).toBe(3500)
    expect(refundedSoFar(5000, 'jpy', 5000)).toBe(5000)
  })
})

describe('Stripe events: charge.refunded leaves out a pending refund made elsewhere', () => {
  const listed = (amount: number, status: string, refundId?: string) => ({ id: `re_${status}_${amount}`, object: 'refund', amount, status, metadata: refundId ? { refund_id: refundId } : {} })
  const charge = (amountRefunded: number, refunds: unknown[]) => ({
    id: 'ch_3Qcharge', object: 'charge', amount: 15_000_000, amount_refunded: amountRefunded, currency: 'idr', payment_intent: 'pi_3Qintent',
    metadata: { order_id: 'ord_stripe_1' }, refunds: { object: 'list', data: refunds, has_more: false },
  })
  const total = (amountRefunded: number, refunds: unknown[]) => parsedEvent(event('evt_refunded', 'charge.refunded', charge(amountRefunded, refunds))).amount

  it('a dashboard refund still pending (it may yet fail) is not in the total; one that succeeded is', () => {
    expect(total(3_000_000, [listed(3_000_000, 'pending')])).toBe(0)
    expect(total(3_000_000, [listed(3_000_000, 'requires_action')])).toBe(0)
    expect(total(3_000_000, [listed(3_000_000, 'succeeded')])).toBe(30_000)
  })

  it('a refund of ours still pending stays in the total: the order holds it already', () => {
    expect(total(7_000_000, [listed(3_000_000, 'pending'), listed(4_000_000, 'pending', 're_ours')])).toBe(40_000)
    expect(total(7_000_000, [listed(3_000_000, 'succeeded'), listed(4_000_000, 'pending', 're_ours')])).toBe(70_000)
  })

  it('without an embedded list (newer API versions) the total is taken as it is', () => {
    const bare = { id: 'ch_3Qcharge', object: 'charge', amount: 15_000_000, amount_refunded: 3_000_000, currency: 'idr', payment_intent: 'pi_3Qintent', metadata: { order_id: 'ord_stripe_1' } }
    expect(parsedEvent(event('evt_bare', 'charge.refunded', bare)).amount).toBe(30_000)
  })
})
