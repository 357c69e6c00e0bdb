import midtrans from 'midtrans-client'
import { classifyMidtransError, type MidtransConfig, midtransCoreApi } from '../../payments/midtrans'
import type { LedgerRefund } from '../../../shared/ops-api'
import { type ProviderLedgerReader, sumOf } from '../types'

/**
 * Midtrans' ledger of a transaction, from its status API (`GET /v2/{order_id}/status`,
 * https://docs.midtrans.com/reference/get-transaction-status): `gross_amount`, `transaction_status`
 * and, once refunded, `refund_amount` and `refunds` — each with its `refund_key` (ours: the refund
 * id, server/payments/midtrans.ts sends it), `refund_chargeback_id` and `refund_amount`. A refund
 * listed there was made (https://docs.midtrans.com/reference/refund-transaction): the status API
 * lists no refund that failed.
 */

/** transaction_status values under which Midtrans holds the money (what was refunded is in `refunds`). */
const capturedStatuses = new Set(['settlement', 'refund', 'partial_refund', 'chargeback', 'partial_chargeback'])

type MidtransRefund = { refund_key?: string, refund_chargeback_id?: string | number, refund_amount?: string | number }

export function createMidtransLedgerReader(config: MidtransConfig): ProviderLedgerReader {
  const core = midtransCoreApi(config)
  return {
    provider: 'midtrans',
    async read({ orderId }, signal) {
      signal.throwIfAborted()
      let answer: Record<string, unknown>
      try {
        answer = await core.transaction.status(orderId)
      }
      catch (error) {
        if (error instanceof midtrans.MidtransError && Number(error.httpStatusCode) === 404) return undefined
        throw classifyMidtransError(error)
      }
      // A 200 whose status_code is 404 is Midtrans' "Transaction doesn't exist".
      if (String(answer.status_code) === '404') return undefined
      const status = String(answer.transaction_status ?? '')
      const captured = capturedStatuses.has(status) || (status === 'capture' && answer.fraud_status === 'accept')
      const listed = Array.isArray(answer.refunds) ? answer.refunds as MidtransRefund[] : []
      const refunds: LedgerRefund[] = listed.map(refund => ({
        refundId: refund.refund_key ?? null,
        providerRefundId: refund.refund_chargeback_id !== undefined ? String(refund.refund_chargeback_id) : refund.refund_key ?? null,
        amount: Math.round(Number(refund.refund_amount)),
        status: 'succeeded',
      }))
      return {
        status,
        currency: String(answer.currency ?? 'IDR'),
        // Midtrans amounts are whole rupiah, the orders' minor unit for IDR.
        captured: captured ? Math.round(Number(answer.gross_amount)) : 0,
        refunded: sumOf(refunds, 'succeeded'),
        refunds,
      }
    },
  }
}
