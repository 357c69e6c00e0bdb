import { describe, expect, it } from 'vitest'
import { compareLedgers, findingOfHeal, type LedgerOrder, type LedgerOrderRefund, ourLedger } from '../../server/ledger/compare'
import type { LedgerRefund, LedgerView } from '../../shared/ops-api'

// The ledger check's comparison (server/ledger/compare.ts): what it heals and what it leaves to an
// operator, for each way an order's ledger and its provider's can differ.

const order = (status: string, amount = 150_000): LedgerOrder => ({ id: 'ord_1', status, amount, currency: 'IDR' })
const ours = (refund: Partial<LedgerOrderRefund> & { id: string }): LedgerOrderRefund => ({ providerRefundId: null, amount: 40_000, status: 'succeeded', source: 'api', ...refund })
const theirs = (captured: number, refunds: LedgerRefund[], status = 'succeeded'): LedgerView =>
  ({ status, currency: 'IDR', captured, refunded: refunds.filter(refund => refund.status === 'succeeded').reduce((total, refund) => total + refund.amount, 0), refunds })
const their = (refund: Partial<LedgerRefund> & { providerRefundId: string }): LedgerRefund => ({ refundId: null, amount: 40_000, status: 'succeeded', ...refund })
const compare = (placed: LedgerOrder, refunds: LedgerOrderRefund[], provider: LedgerView | undefined) => compareLedgers(placed, ourLedger(placed, refunds), provider)

describe('compareLedgers', () => {
  it('both ledgers agree: a paid order, a refund of ours matched by its id at the provider, a provider refund matched by the provider\'s id', () => {
    expect(compare(order('partially_refunded'), [ours({ id: 're_a' }), ours({ id: 're_b', source: 'provider', providerRefundId: 're_dash', amount: 10_000 })],
      theirs(150_000, [their({ refundId: 're_a', providerRefundId: 're_x' }), their({ providerRefundId: 're_dash', amount: 10_000 })])))
      .toEqual({ heals: [], findings: [] })
  })

  it('a refund the provider made that we do not know is healed by recording it; one still pending at the provider waits', () => {
    const dashboard = their({ providerRefundId: 're_dash', amount: 25_000 })
    expect(compare(order('paid'), [], theirs(150_000, [dashboard, their({ providerRefundId: 're_later', status: 'pending' })])))
      .toEqual({ heals: [{ kind: 'record_provider_refund', refund: dashboard }], findings: [] })
  })

  it('a refund of ours that succeeded and that the provider failed is healed by failing it; a pending one on either side is not compared', () => {
    expect(compare(order('refunded'), [ours({ id: 're_a', providerRefundId: 're_x', amount: 150_000 }), ours({ id: 're_p', status: 'pending' })],
      theirs(150_000, [their({ refundId: 're_a', providerRefundId: 're_x', amount: 150_000, status: 'failed' }), their({ refundId: 're_p', providerRefundId: 're_y', status: 'failed' })])))
      .toEqual({ heals: [{ kind: 'fail_our_refund', refundId: 're_a', providerRefundId: 're_x' }], findings: [] })
  })

  it('a refund that failed here and succeeded at the provider, one of two amounts and one the provider does not have are discrepancies', () => {
    const found = compare(order('partially_refunded'), [
      ours({ id: 're_f', status: 'failed' }),
      ours({ id: 're_m', amount: 30_000 }),
      ours({ id: 're_gone', amount: 5_000 }),
    ], theirs(150_000, [their({ refundId: 're_f', providerRefundId: 're_1' }), their({ refundId: 're_m', providerRefundId: 're_2', amount: 35_000 })]))
    expect(found.heals).toEqual([])
    expect(found.findings.map(finding => finding.kind)).toEqual(['refund_succeeded_at_provider', 'refund_amount_mismatch', 'refund_not_at_provider'])
    expect(found.findings[2]!.summary).toBe('Refund re_gone (IDR 5,000, api) succeeded here; the provider has no such refund.')
  })

  it('a refund recorded from a provider total stands for the provider refunds no refund of ours names; more than they hold is a discrepancy', () => {
    const unnamed = ours({ id: 're_total', source: 'provider', amount: 40_000 })
    // The provider's refund R failed; nothing else was refunded there: the 40,000 recorded from its total is not at the provider.
    const found = compare(order('partially_refunded'), [ours({ id: 're_r', providerRefundId: 're_1', status: 'failed' }), unnamed],
      theirs(150_000, [their({ refundId: 're_r', providerRefundId: 're_1', status: 'failed' })]))
    expect(found).toEqual({ heals: [], findings: [{ kind: 'refund_not_at_provider', summary: 're_total (IDR 40,000, recorded from a provider total) succeeded here; the provider holds IDR 0 of refunds no refund here names.' }] })
    // A dashboard refund of the same money: named by the heal, no discrepancy.
    const dashboard = their({ providerRefundId: 're_dash' })
    expect(compare(order('partially_refunded'), [unnamed], theirs(150_000, [dashboard]))).toEqual({ heals: [{ kind: 'record_provider_refund', refund: dashboard }], findings: [] })
  })

  it('payments: a wrong amount held, a payment the order does not know, a paid order the provider has no payment for', () => {
    expect(compare(order('canceled'), [], theirs(120_000, [])).findings.map(finding => finding.kind)).toEqual(['wrong_amount_captured'])
    expect(compare(order('pending_payment'), [], theirs(120_000, [])).findings.map(finding => finding.kind)).toEqual(['wrong_amount_captured'])
    expect(compare(order('canceled'), [], theirs(150_000, [])).findings.map(finding => finding.kind)).toEqual(['payment_not_recorded'])
    expect(compare(order('paid'), [], theirs(0, [], 'requires_payment_method')).findings.map(finding => finding.kind)).toEqual(['payment_not_at_provider'])
    expect(compare(order('paid'), [], undefined).findings.map(finding => finding.kind)).toEqual(['payment_not_at_provider'])
    expect(compare(order('pending_payment'), [], theirs(0, [], 'requires_payment_method'))).toEqual({ heals: [], findings: [] })
    expect(compare(order('canceled'), [], undefined)).toEqual({ heals: [], findings: [] })
  })

  it('a canceled order paid late whose automatic refund failed, the provider still holding the money, is a discrepancy; once given back it is not', () => {
    const automatic = ours({ id: 're_auto', source: 'automatic', amount: 150_000, status: 'failed' })
    // The late payment took the canceled order to paid; its refund gave nothing back.
    expect(compare(order('paid'), [automatic], theirs(150_000, [])).findings).toEqual([{
      kind: 'canceled_refund_failed',
      summary: 'The order was canceled and then paid; its automatic refund re_auto failed, and the provider still holds IDR 150,000.',
    }])
    expect(compare(order('refunded'), [{ ...automatic, status: 'succeeded' }], theirs(150_000, [their({ refundId: 're_auto', providerRefundId: 're_1', amount: 150_000 })])))
      .toEqual({ heals: [], findings: [] })
  })

  it('a heal that does not take becomes the discrepancy it would have settled', () => {
    expect(findingOfHeal({ kind: 'record_provider_refund', refund: their({ providerRefundId: 're_dash' }) }, 'IDR').kind).toBe('refund_succeeded_at_provider')
    expect(findingOfHeal({ kind: 'fail_our_refund', refundId: 're_a', providerRefundId: 're_x' }, 'IDR').kind).toBe('refund_not_at_provider')
  })
})
