import { fromStripeAmount } from '../../../server/payments/currencies'
import type { ProxiedRequest, ProxyAction } from '../fault-proxy'
import type { MidtransApi } from '../midtrans-api'
import { type OrderBody, validOrderBody } from '../orders'
import { stripeIntentsOf } from '../providers'
import { StandInRefusal, type StripeApi } from '../stripe-api'
import type { ProviderSide } from './world'

/** The Stripe and Midtrans stand-ins as the ledger model drives and reads them. */

/** An order of one item at `amount`. */
const orderOf = (currency: string, amount: number, paymentMethod: string) => (): OrderBody =>
  validOrderBody({ currency, amount, paymentMethod, items: [{ sku: `SKU-${currency}`, quantity: 1, unitPrice: amount }] })

const share = (amount: number, percent: number | 'rest') => percent === 'rest' ? undefined : Math.max(1, Math.round(amount * percent / 100))

const pathOf = (proxied: ProxiedRequest) => proxied.path.split('?')[0]!

const json = (status: number, body: unknown, headers: Record<string, string> = {}): ProxyAction => ({ kind: 'status', status, body, headers })

export function stripeSide(api: StripeApi): ProviderSide {
  const intentOf = (orderId: string) => stripeIntentsOf(api, orderId)[0]
  const refundsOf = (intentId: string) => [...api.refunds.values()].filter(refund => refund.payment_intent === intentId)
  return {
    name: 'stripe',
    // IDR (Stripe counts hundredths), a two-decimal, a zero-decimal whose app unit is finer (MGA:
    // whole ariary at Stripe), a three-decimal (Stripe takes a last digit of 0) and a zero-decimal
    // currency; amounts whose shares are seldom round.
    orderBodies: [orderOf('IDR', 150_000, 'card'), orderOf('USD', 4_321, 'card'), orderOf('MGA', 123_400, 'card'), orderOf('KWD', 5_130, 'card'), orderOf('JPY', 3_007, 'card')],
    faults: ['timeout-after-commit', 'late-commit', 'drop-answer', '500', '429', '409', 'kept-500', 'kept-500-after-refund'],
    keepsRefundsPending: true,
    keepsDashboardRefundsPending: true,
    // Stripe keeps an answer under its key once the endpoint ran, 500s included (https://docs.stripe.com/api/idempotent_requests).
    armStandInFault(fault) {
      const scripted = { match: 'refund' as const, idempotencyKey: /^refund:/, fault: { kind: 'stored-error' as const, status: 500, performed: fault === 'kept-500-after-refund' } }
      api.script.push(scripted)
      return () => {
        const index = api.script.indexOf(scripted)
        if (index >= 0) api.script.splice(index, 1)
      }
    },
    paymentExists: orderId => intentOf(orderId) !== undefined,
    pay(orderId) {
      api.succeed(intentOf(orderId)!.id)
    },
    dashboardRefund(orderId, percent, pending) {
      const intent = intentOf(orderId)
      if (!intent) throw new StandInRefusal(`no PaymentIntent for ${orderId}`)
      const refund = api.dashboardRefund(intent.id, share(intent.amount_received, percent), { pending })
      return `${refund.id} ${refund.amount} ${refund.status}`
    },
    pend: count => api.pendRefunds(count),
    pendingRefunds(orderId) {
      const intent = intentOf(orderId)
      return intent ? refundsOf(intent.id).filter(refund => refund.status === 'pending').map(refund => refund.id) : []
    },
    finish(refundId, outcome) {
      api.settleRefund(refundId, outcome)
    },
    ledger(orderId, currency) {
      const intents = stripeIntentsOf(api, orderId)
      return {
        payments: intents.length,
        captured: intents.filter(intent => intent.status === 'succeeded').reduce((total, intent) => total + fromStripeAmount(intent.amount_received, currency), 0),
        refunds: intents.flatMap(intent => refundsOf(intent.id)).map(refund => ({
          providerId: refund.id, ourId: refund.metadata.refund_id, amount: fromStripeAmount(refund.amount, currency), status: refund.status,
        })),
      }
    },
    tokens(orderId) {
      const intent = intentOf(orderId)
      return intent ? [orderId, intent.id, ...refundsOf(intent.id).map(refund => refund.id)] : [orderId]
    },
    requestKind(proxied) {
      const path = pathOf(proxied)
      if (proxied.method === 'GET') return 'read'
      if (path === '/v1/payment_intents') return 'create'
      if (path === '/v1/refunds') return 'refund'
      return path.endsWith('/cancel') ? 'cancel' : undefined
    },
    // Stripe's error objects (docs.stripe.com/api/errors): api_error, rate_limit_error, idempotency_error.
    statusFault(status) {
      if (status === 429) return json(429, { error: { type: 'rate_limit_error', code: 'rate_limit', message: 'Request rate limit exceeded.' } })
      if (status === 409) return json(409, { error: { type: 'idempotency_error', code: 'idempotency_key_in_use', message: 'There is currently another in-progress request using this Idempotent Key. Please try again later.' } })
      return json(status, { error: { type: 'api_error', message: 'Sorry, something went wrong. We\'ve already been notified of the problem.' } })
    },
    deliveriesUnderWay: () => api.webhooks.filter(delivery => !delivery.delivered && delivery.attempts.length < 4).map(delivery => delivery.body),
    webhookPath: '/api/webhooks/stripe',
  }
}

const MIDTRANS_CAPTURED = new Set(['settlement', 'capture', 'partial_refund', 'refund'])

export function midtransSide(api: MidtransApi): ProviderSide {
  return {
    name: 'midtrans',
    // GoPay (refunded through the direct refund API) and a BCA virtual account (refunded only in the dashboard).
    orderBodies: [orderOf('IDR', 150_000, 'ewallet'), orderOf('IDR', 98_765, 'ewallet'), orderOf('IDR', 150_000, 'bank_transfer')],
    faults: ['timeout-after-commit', 'late-commit', 'drop-answer', '500', '429', '406', 'late-commit-then-406'],
    keepsRefundsPending: true,
    keepsDashboardRefundsPending: false,
    paymentExists: orderId => api.transactions.has(orderId),
    pay(orderId) {
      api.settle(orderId)
    },
    dashboardRefund(orderId, percent) {
      const transaction = api.transactions.get(orderId)
      if (!transaction) throw new StandInRefusal(`no transaction for ${orderId}`)
      api.refund(orderId, share(transaction.gross_amount, percent))
      const refund = transaction.refunds.at(-1)!
      return `${refund.refund_chargeback_id} ${refund.refund_amount}`
    },
    pend: count => api.holdRefunds(count),
    // Refunds Midtrans is still carrying out (the bank or e-wallet has not answered), by refund_key.
    pendingRefunds: orderId => api.refundsInFlight().filter(refund => refund.orderId === orderId).map(refund => refund.refundKey),
    finish(refundKey, outcome) {
      if (outcome === 'succeeded') api.finishRefund(refundKey)
      else api.failRefund(refundKey)
    },
    ledger(orderId) {
      const transaction = api.transactions.get(orderId)
      return {
        payments: transaction ? 1 : 0,
        captured: transaction && MIDTRANS_CAPTURED.has(transaction.transaction_status) ? transaction.gross_amount : 0,
        refunds: (transaction?.refunds ?? []).map(refund => ({
          providerId: String(refund.refund_chargeback_id),
          // Our refunds are asked under their id (re_…); the dashboard's keys are its own.
          ourId: refund.refund_key.startsWith('re_') ? refund.refund_key : undefined,
          amount: Number(refund.refund_amount),
          status: 'succeeded' as const,
        })),
      }
    },
    tokens: orderId => [orderId],
    requestKind(proxied) {
      const path = pathOf(proxied)
      if (proxied.method === 'GET') return 'read'
      if (path === '/v2/charge') return 'create'
      if (/\/refund(\/online\/direct)?$/.test(path)) return 'refund'
      return path.endsWith('/cancel') ? 'cancel' : undefined
    },
    // Midtrans repeats the status in the body's status_code (docs.midtrans.com, Core API status codes).
    statusFault(status) {
      const messages: Record<number, string> = {
        429: 'Too many requests, please slow down and retry later',
        406: 'Duplicate refund ID',
      }
      return json(status, { status_code: String(status), status_message: messages[status] ?? 'Sorry. Our system is recovering from unexpected issues. Please retry.' })
    },
    deliveriesUnderWay: () => api.webhooks.filter(delivery => !delivery.delivered && delivery.attempts.length < 4).map(delivery => delivery.body),
    webhookPath: '/api/webhooks/midtrans',
  }
}
