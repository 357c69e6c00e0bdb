import type { PaymentProviderName } from '../config'
import type { LedgerView } from '../../shared/ops-api'

/**
 * Reads a payment's ledger at its provider (what it received, every refund and its state), in the
 * order's units. One reader per provider, built from the same configuration as the payment adapter
 * but apart from it: the check asks more than a payment needs (every refund, paged).
 */
export interface ProviderLedgerReader {
  readonly provider: PaymentProviderName
  /** Undefined when the provider has no such payment. Throws when it cannot answer now (the next run asks again). */
  read(payment: { orderId: string, paymentId: string, currency: string }, signal: AbortSignal): Promise<LedgerView | undefined>
}

/** Σ of the refunds in `status`. */
export const sumOf = (refunds: LedgerView['refunds'], status: 'pending' | 'succeeded' | 'failed') =>
  refunds.filter(refund => refund.status === status).reduce((total, refund) => total + refund.amount, 0)
