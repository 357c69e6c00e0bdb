import { describe, expect, it } from 'vitest'
import { midtransNotificationId, midtransNotificationIdentity } from '../src/runtime/webhooks'

// What tells one Midtrans notification from another (midtransWebhookProvider's key and fingerprint):
// the signed triple, the documented transaction_status and, for refunds, the refund_amount so far.

const signed = { order_id: 'ord_1', status_code: '200', gross_amount: '150000.00', signature_key: 'a'.repeat(128) }
const idOf = (body: Record<string, unknown>) => {
  const read = midtransNotificationIdentity(body)
  return read.ok ? midtransNotificationId(read.identity) : read.reason
}

describe('midtransNotificationIdentity', () => {
  it('tells a settlement, each partial refund and the full refund of one order apart; unsigned details outside the identity change nothing', () => {
    const ids = [
      idOf({ ...signed, transaction_status: 'settlement' }),
      idOf({ ...signed, transaction_status: 'partial_refund', refund_amount: '30000.00', refunds: [{ refund_key: 'a', refund_amount: '30000.00' }] }),
      idOf({ ...signed, transaction_status: 'partial_refund', refund_amount: '70000.00', refunds: [{ refund_key: 'a' }, { refund_key: 'b' }] }),
      idOf({ ...signed, transaction_status: 'refund', refund_amount: '150000.00' }),
    ]
    expect(ids).toEqual(['ord_1:200:150000.00:settlement', 'ord_1:200:150000.00:partial_refund:30000', 'ord_1:200:150000.00:partial_refund:70000', 'ord_1:200:150000.00:refund:150000'])
    expect(idOf({ ...signed, transaction_status: 'partial_refund', refund_amount: '30000', transaction_id: 'another', transaction_time: 'later' })).toBe(ids[1])
    // refund_amount counts only where it says what is refunded so far.
    expect(idOf({ ...signed, transaction_status: 'settlement', refund_amount: '5.00' })).toBe(ids[0])
    expect(idOf({ ...signed, transaction_status: 'partial_refund' })).toBe('ord_1:200:150000.00:partial_refund')
    const read = midtransNotificationIdentity({ ...signed, transaction_status: 'partial_refund', refund_amount: '30000.00', status_message: 'x' })
    expect(read).toEqual({ ok: true, identity: { order_id: 'ord_1', status_code: '200', gross_amount: '150000.00', transaction_status: 'partial_refund', refunded: 30_000 } })
  })

  it('bounds what the unsigned fields may vary: a documented status, a whole refund_amount of at most gross_amount', () => {
    expect(idOf({ ...signed, transaction_status: 'paid' })).toBe('transaction_status "paid" is not a status Midtrans documents')
    expect(idOf({ ...signed })).toBe('transaction_status undefined is not a status Midtrans documents')
    for (const refundAmount of ['150001.00', '100.50', '-1', '1e3', 30_000, '']) {
      expect(idOf({ ...signed, transaction_status: 'partial_refund', refund_amount: refundAmount }), String(refundAmount))
        .toBe(`refund_amount ${JSON.stringify(refundAmount)} is not a whole amount of at most gross_amount 150000.00`)
    }
    expect(idOf({ ...signed, transaction_status: 'refund', refund_amount: '150000.00' })).toBe('ord_1:200:150000.00:refund:150000')
    expect(idOf({ transaction_status: 'settlement' })).toBe('body lacks order_id, status_code, gross_amount or signature_key')
  })
})
