import { paymentStatusPrecedence } from '../orders/payment-state'
import type { LedgerRefund, LedgerView } from '../../shared/ops-api'
import type { LedgerDiscrepancyKind } from '../../shared/statuses'
import { sumOf } from './types'

/**
 * Compares an order's ledger with its provider's: what to heal, and what differs beyond healing.
 * Pure, so that the check compares again after healing with the same provider answer. Refunds
 * still pending on either side are in flight (their webhook, their job's answer or reconciliation
 * settles them) and are never compared.
 */

export interface LedgerOrder {
  id: string
  status: string
  amount: number
  currency: string
}

export interface LedgerOrderRefund {
  id: string
  providerRefundId: string | null
  amount: number
  status: LedgerRefund['status']
  source: string
}

/**
 * What is safe to heal: a refund the provider made that we do not know (recorded as a succeeded
 * refund of source `provider`, as its webhook would have), and a refund of ours marked succeeded
 * that the provider failed (marked failed, its notice withheld).
 */
export type LedgerHeal
  = | { kind: 'record_provider_refund', refund: LedgerRefund }
    | { kind: 'fail_our_refund', refundId: string, providerRefundId: string | null }

export interface LedgerFinding {
  kind: LedgerDiscrepancyKind
  summary: string
}

export interface LedgerComparison {
  heals: LedgerHeal[]
  findings: LedgerFinding[]
}

const paidRank = paymentStatusPrecedence.indexOf('paid')
const isPaid = (status: string) => paymentStatusPrecedence.indexOf(status as typeof paymentStatusPrecedence[number]) >= paidRank

/** Our ledger in the provider's terms: captured once the payment was applied (a canceled order's too: it then got an automatic refund). */
export function ourLedger(order: LedgerOrder, refunds: LedgerOrderRefund[]): LedgerView {
  const paymentApplied = isPaid(order.status) || refunds.some(refund => refund.source === 'automatic')
  const lines: LedgerRefund[] = refunds.map(refund => ({ refundId: refund.id, providerRefundId: refund.providerRefundId, amount: refund.amount, status: refund.status, source: refund.source }))
  return { status: order.status, currency: order.currency, captured: paymentApplied ? order.amount : 0, refunded: sumOf(lines, 'succeeded'), refunds: lines }
}

const money = (amount: number, currency: string) => `${currency} ${amount.toLocaleString('en-US')}`

export function compareLedgers(order: LedgerOrder, ours: LedgerView, theirs: LedgerView | undefined): LedgerComparison {
  const heals: LedgerHeal[] = []
  const found = new Map<LedgerDiscrepancyKind, string[]>()
  const find = (kind: LedgerDiscrepancyKind, what: string) => found.set(kind, [...(found.get(kind) ?? []), what])

  if (!theirs) {
    if (ours.captured > 0) find('payment_not_at_provider', `The order is ${order.status} for ${money(ours.captured, order.currency)}; the provider has no such payment.`)
    return { heals, findings: findingsOf(found) }
  }

  const otherCurrency = theirs.currency !== order.currency
  if (theirs.captured > 0 && (otherCurrency || theirs.captured !== order.amount)) {
    find('wrong_amount_captured', `The provider received ${money(theirs.captured, theirs.currency)} for an order of ${money(order.amount, order.currency)} (${order.status}); nothing gave it back.`)
  }
  else if (theirs.captured > 0 && ours.captured === 0) {
    find('payment_not_recorded', `The provider received ${money(theirs.captured, theirs.currency)}; the order is ${order.status}.`)
  }
  else if (theirs.captured === 0 && ours.captured > 0) {
    find('payment_not_at_provider', `The order is ${order.status} for ${money(ours.captured, order.currency)}; the provider's payment is ${theirs.status} and received nothing.`)
  }
  if (otherCurrency) return { heals, findings: findingsOf(found) }

  const ourRefunds = ours.refunds
  const matched = new Set<string>()
  for (const their of theirs.refunds) {
    const mine = ourRefunds.find(refund => (their.refundId !== null && refund.refundId === their.refundId)
      || (their.providerRefundId !== null && refund.providerRefundId === their.providerRefundId))
    if (!mine) {
      if (their.status === 'succeeded') heals.push({ kind: 'record_provider_refund', refund: their })
      continue
    }
    matched.add(mine.refundId!)
    if (mine.status === 'pending' || their.status === 'pending') continue
    if (mine.amount !== their.amount) {
      find('refund_amount_mismatch', `Refund ${mine.refundId} is ${money(mine.amount, order.currency)} here and ${money(their.amount, order.currency)} at the provider (${their.providerRefundId}).`)
    }
    if (mine.status === 'succeeded' && their.status === 'failed') heals.push({ kind: 'fail_our_refund', refundId: mine.refundId!, providerRefundId: their.providerRefundId })
    if (mine.status === 'failed' && their.status === 'succeeded') {
      find('refund_succeeded_at_provider', `Refund ${mine.refundId} failed here; the provider made it (${their.providerRefundId}, ${money(their.amount, order.currency)}).`)
    }
  }

  // Refunds a provider total recorded before their own events named them: together they stand for
  // the provider's refunds that no refund of ours names (a heal names them without adding money).
  const unnamed = ourRefunds.filter(refund => !matched.has(refund.refundId!) && refund.status === 'succeeded' && refund.source === 'provider' && refund.providerRefundId === null)
  const unnamedTotal = unnamed.reduce((total, refund) => total + refund.amount, 0)
  const unmatchedTheirs = theirs.refunds.filter(their => their.status !== 'failed' && !ourRefunds.some(refund => refund.refundId === their.refundId || (their.providerRefundId !== null && refund.providerRefundId === their.providerRefundId)))
  const unmatchedTotal = unmatchedTheirs.reduce((total, refund) => total + refund.amount, 0)
  if (unnamedTotal > unmatchedTotal) {
    find('refund_not_at_provider', `${unnamed.map(refund => refund.refundId).join(', ')} (${money(unnamedTotal, order.currency)}, recorded from a provider total) succeeded here; the provider holds ${money(unmatchedTotal, order.currency)} of refunds no refund here names.`)
  }
  for (const mine of ourRefunds) {
    if (matched.has(mine.refundId!) || mine.status !== 'succeeded' || unnamed.includes(mine)) continue
    find('refund_not_at_provider', `Refund ${mine.refundId} (${money(mine.amount, order.currency)}, ${mine.source}) succeeded here; the provider has no such refund.`)
  }

  const automaticFailed = ourRefunds.find(refund => refund.source === 'automatic' && refund.status === 'failed')
  const keptByProvider = theirs.captured - sumOf(theirs.refunds, 'succeeded') - sumOf(theirs.refunds, 'pending')
  // An automatic refund exists only for a payment that came after the order was canceled (the order then reads paid).
  if (automaticFailed && keptByProvider > 0) {
    find('canceled_refund_failed', `The order was canceled and then paid; its automatic refund ${automaticFailed.refundId} failed, and the provider still holds ${money(keptByProvider, order.currency)}.`)
  }
  return { heals, findings: findingsOf(found) }
}

const findingsOf = (found: Map<LedgerDiscrepancyKind, string[]>): LedgerFinding[] =>
  [...found].map(([kind, what]) => ({ kind, summary: what.join(' ') }))

/** Refund ids named in a healed row before the rest are only counted. */
const NAMED_HEALS = 5

const named = (ids: string[]) => ids.length <= NAMED_HEALS ? ids.join(', ') : `${ids.slice(0, NAMED_HEALS).join(', ')} and ${ids.length - NAMED_HEALS} more`

/**
 * The heals that took, one finding per kind: what differed (the summary) and what the check did
 * about it (the resolution), so a difference planted behind the app's back stays visible.
 */
export function healedFindings(healed: Array<{ heal: LedgerHeal, noticeWithheld: boolean }>, currency: string): Array<LedgerFinding & { resolution: string }> {
  const findings: Array<LedgerFinding & { resolution: string }> = []
  const recorded = healed.flatMap(({ heal }) => heal.kind === 'record_provider_refund' ? [heal.refund] : [])
  if (recorded.length) {
    const total = recorded.reduce((sum, refund) => sum + refund.amount, 0)
    findings.push({
      kind: 'refund_succeeded_at_provider',
      summary: `The provider made ${recorded.length === 1 ? 'refund' : `${recorded.length} refunds`} ${named(recorded.map(refund => refund.providerRefundId!))} (${money(total, currency)}), not recorded here.`,
      resolution: `Recorded here as ${recorded.length === 1 ? 'a refund' : 'refunds'} of source provider, each noticed as a webhook's would be.`,
    })
  }
  const failed = healed.flatMap(({ heal, noticeWithheld }) => heal.kind === 'fail_our_refund' ? [{ heal, noticeWithheld }] : [])
  if (failed.length) {
    const withheld = failed.filter(({ noticeWithheld }) => noticeWithheld).length
    findings.push({
      kind: 'refund_not_at_provider',
      summary: `${named(failed.map(({ heal }) => `${heal.refundId} (${heal.providerRefundId})`))} succeeded here; the provider failed ${failed.length === 1 ? 'it' : 'them'}.`,
      resolution: `Failed here, the amount free again; notices withheld: ${withheld} of ${failed.length} (a notice already sent cannot be).`,
    })
  }
  return findings
}

/** A heal that did not take (the refund would exceed what was paid, or the row changed meanwhile) is a discrepancy for an operator. */
export function findingOfHeal(heal: LedgerHeal, currency: string): LedgerFinding {
  return heal.kind === 'record_provider_refund'
    ? { kind: 'refund_succeeded_at_provider', summary: `The provider made refund ${heal.refund.providerRefundId} (${money(heal.refund.amount, currency)}), which could not be recorded here: with the refunds held here it exceeds what was paid.` }
    : { kind: 'refund_not_at_provider', summary: `Refund ${heal.refundId} succeeded here; the provider failed it (${heal.providerRefundId}).` }
}
