import { asc, eq } from 'drizzle-orm'
import type { Database } from '@idempotent-checkout/db-kit'
import { paymentIntentRefunds, paymentIntents } from '../../db/schema'
import { MOCKPAY } from '../../payments/mockpay/provider'
import type { LedgerRefund } from '../../../shared/ops-api'
import { type ProviderLedgerReader, sumOf } from '../types'

/**
 * The simulated provider's ledger, which it keeps in this database (payment_intents and
 * payment_intent_refunds): what the intent received and each refund. Its refunds are made at once,
 * never pending or failed; ours carry the key `refund:<our id>` as their token.
 */
export function createMockpayLedgerReader(db: Database): ProviderLedgerReader {
  return {
    provider: MOCKPAY,
    async read({ paymentId }, signal) {
      signal.throwIfAborted()
      const [intent] = await db.select().from(paymentIntents).where(eq(paymentIntents.id, paymentId))
      if (!intent) return undefined
      const rows = await db.select().from(paymentIntentRefunds).where(eq(paymentIntentRefunds.intentId, intent.id)).orderBy(asc(paymentIntentRefunds.createdAt), asc(paymentIntentRefunds.id))
      const refunds: LedgerRefund[] = rows.map(row => ({
        refundId: row.idempotencyToken?.startsWith('refund:') ? row.idempotencyToken.slice('refund:'.length) : null,
        providerRefundId: row.id,
        amount: row.amount,
        status: 'succeeded',
      }))
      return {
        status: intent.status,
        currency: intent.currency,
        captured: intent.status === 'succeeded' || intent.status === 'refunded' ? intent.amount : 0,
        refunded: sumOf(refunds, 'succeeded'),
        refunds,
      }
    },
  }
}
