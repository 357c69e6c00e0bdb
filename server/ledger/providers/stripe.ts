import Stripe from 'stripe'
import type { AppConfig } from '../../config'
import { fromStripeAmount } from '../../payments/currencies'
import { classifyStripeError, stripeClientOptions } from '../../payments/stripe'
import type { LedgerRefund } from '../../../shared/ops-api'
import { type ProviderLedgerReader, sumOf } from '../types'

/**
 * Stripe's ledger of a PaymentIntent: `amount_received` (https://docs.stripe.com/api/payment_intents/object#payment_intent_object-amount_received)
 * and its refunds, all of them: `GET /v1/refunds?payment_intent=…` pages by `limit` and
 * `starting_after`, newest first, `has_more` while there are more (https://docs.stripe.com/api/pagination,
 * https://docs.stripe.com/api/refunds/list). A refund's `status` is pending, requires_action,
 * succeeded, failed or canceled (https://docs.stripe.com/api/refunds/object#refund_object-status);
 * ours carry our refund id in `metadata.refund_id` (server/payments/stripe.ts sets it).
 */

/** A page holds at most 100 refunds (Stripe's limit); a payment with more pages than this is read in part, and the check says so. */
const PAGE_SIZE = 100
const MAX_PAGES = 20

type StripeConfig = Pick<AppConfig, 'STRIPE_SECRET_KEY' | 'STRIPE_API_BASE' | 'PAYMENT_PROVIDER_TIMEOUT_MS'>

export function createStripeLedgerReader(config: StripeConfig): ProviderLedgerReader {
  if (!config.STRIPE_SECRET_KEY) throw new Error('STRIPE_SECRET_KEY is unset although PAYMENT_PROVIDER=stripe')
  const stripe = new Stripe(config.STRIPE_SECRET_KEY, stripeClientOptions(config))
  const call = async <T>(request: () => Promise<T>): Promise<T> => {
    try {
      return await request()
    }
    catch (error) {
      throw classifyStripeError(error)
    }
  }
  return {
    provider: 'stripe',
    async read({ paymentId }, signal) {
      signal.throwIfAborted()
      let intent: Stripe.PaymentIntent
      try {
        intent = await stripe.paymentIntents.retrieve(paymentId)
      }
      catch (error) {
        if (error instanceof Stripe.errors.StripeError && error.code === 'resource_missing') return undefined
        throw classifyStripeError(error)
      }
      const refunds: LedgerRefund[] = []
      let startingAfter: string | undefined
      for (let page = 0; page < MAX_PAGES; page++) {
        signal.throwIfAborted()
        const listed = await call(() => stripe.refunds.list({ payment_intent: paymentId, limit: PAGE_SIZE, ...(startingAfter && { starting_after: startingAfter }) }))
        refunds.push(...listed.data.map(refund => ({
          refundId: refund.metadata?.refund_id ?? null,
          providerRefundId: refund.id,
          amount: fromStripeAmount(refund.amount, refund.currency),
          status: refundStatusOf(refund.status),
        })))
        if (!listed.has_more || !listed.data.length) break
        startingAfter = listed.data[listed.data.length - 1]!.id
        if (page === MAX_PAGES - 1) throw new Error(`Stripe PaymentIntent ${paymentId} has more than ${MAX_PAGES * PAGE_SIZE} refunds: its ledger was not compared`)
      }
      // Oldest first, as ours are listed.
      refunds.reverse()
      return {
        status: intent.status,
        currency: intent.currency.toUpperCase(),
        captured: fromStripeAmount(intent.amount_received, intent.currency),
        refunded: sumOf(refunds, 'succeeded'),
        refunds,
      }
    },
  }
}

/** requires_action waits for the customer: still pending. canceled refunds gave nothing back. */
const refundStatusOf = (status: string | null): LedgerRefund['status'] =>
  status === 'succeeded' ? 'succeeded' : status === 'failed' || status === 'canceled' ? 'failed' : 'pending'
