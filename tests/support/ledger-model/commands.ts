import fc from 'fast-check'

/**
 * The commands of the ledger model, as plain data (so a failing sequence prints as a readable list
 * and shrinks as an array): each names the order it acts on by its slot in the sequence (0 or 1).
 * A command whose order is not placed yet, or that the provider would not take (paying a canceled
 * payment, refunding an unpaid one in its dashboard), is a no-op, written down as skipped.
 */

export type Slot = 0 | 1

/** A request the proxy in front of the provider can fail: create (the payment), refund, cancel, read (any GET). */
export type FaultTarget = 'create' | 'refund' | 'cancel' | 'read'

/**
 * timeout-after-commit: the provider acts, its answer is held past the app's timeout. late-commit:
 * the request reaches the provider only after the app's timeout (a refund still in flight when the
 * app asks again). drop-answer: the provider acts, the connection closes. 500/429/406/409: answered
 * by the proxy without forwarding (406 Midtrans' "duplicate refund", 409 Stripe's key in use).
 * late-commit-then-406: both, for the next two requests — Midtrans' answer to a refund_key asked
 * again while its first request is still being processed. kept-500 / kept-500-after-refund: the
 * Stripe stand-in answers the next refund 500 and keeps that answer under its Idempotency-Key,
 * having made nothing, or having made the refund.
 */
export type FaultKind = 'timeout-after-commit' | 'late-commit' | 'drop-answer' | '500' | '429' | '406' | '409' | 'late-commit-then-406' | 'kept-500' | 'kept-500-after-refund'

export type Command
  = | { kind: 'place', slot: Slot, variant: number }
  /** The shopper pays at the provider. */
    | { kind: 'pay', slot: Slot }
  /**
   * POST a refund: `percent` of the order (up to 120 %: more than remains), or all that remains;
   * under key `key` of the sequence's four (a reused key replays or is 422); through the tenant's
   * API or the ops console; on instance `on`; `twice`: the same request on both instances at once,
   * or another key's on the other one.
   */
    | { kind: 'refund', slot: Slot, percent: number | 'rest', key: number, via: 'api' | 'ops', on: Slot, twice: 'no' | 'same-key' | 'other-key' }
  /** A refund made in the provider's dashboard: `percent` of what was paid, or all that is left; `pending` where the provider keeps it pending (Stripe). */
    | { kind: 'dashboard-refund', slot: Slot, percent: number | 'rest', pending: boolean }
    | { kind: 'cancel', slot: Slot, on: Slot }
  /** The provider keeps the next `count` refunds the API asks for pending (Stripe) or in flight (Midtrans). */
    | { kind: 'pend-refunds', count: number }
  /** The provider finishes the order's oldest pending (or in flight) refund. */
    | { kind: 'finish-pending', slot: Slot, outcome: 'succeeded' | 'failed' }
  /** The next request of `target` about the order meets `fault`. */
    | { kind: 'fault', slot: Slot, target: FaultTarget, fault: FaultKind }
  /**
   * hold: the order's next webhooks are kept back; release-reversed / release-shuffled: sent now,
   * in that order; duplicate: its next three are each delivered twice.
   */
    | { kind: 'webhooks', slot: Slot, how: 'hold' | 'release-reversed' | 'release-shuffled' | 'duplicate' }
  /** POST /api/ops/tasks/payments:reconcile on instance `on`. */
    | { kind: 'reconcile', on: Slot }
  /** The standalone worker is SIGKILLed and started again. */
    | { kind: 'crash-worker' }
  /** Time passes: jobs and webhooks run meanwhile. */
    | { kind: 'pause', ms: number }

export interface Sequence {
  commands: Command[]
  /** What the provider does, once the commands ran, with the refunds it still holds pending. */
  pendingEnd: 'succeeded' | 'failed'
}

export interface CommandOptions {
  /** The faults the provider can meet (406 only at Midtrans, 409 only at Stripe). */
  faults: FaultKind[]
  /** The stand-in can keep refunds pending (Stripe) or in flight (Midtrans). */
  keepsRefundsPending: boolean
  /** The stand-in can keep a dashboard refund pending (Stripe). */
  keepsDashboardRefundsPending: boolean
  /** How many order shapes (currency, amount, payment method) `place` picks from. */
  variants: number
  /** Whether worker crashes are drawn (they cost a worker start, a few seconds). */
  crashes: boolean
}

/** The first order is always placed; the second only when drawn. */
const slot = fc.constantFrom<Slot>(0, 0, 1)

/**
 * The arbitrary of one sequence: it places its first order, pays it four times in five (both
 * commands, so shrinking may drop them), then draws the rest.
 */
export function sequenceArbitrary(options: CommandOptions): fc.Arbitrary<Sequence> {
  const variant = fc.nat(options.variants - 1)
  const weighted: Array<fc.WeightedArbitrary<Command>> = [
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('place' as const), slot: fc.constant<Slot>(1), variant }) },
    { weight: 5, arbitrary: fc.record({ kind: fc.constant('pay' as const), slot }) },
    {
      weight: 10,
      arbitrary: fc.record({
        kind: fc.constant('refund' as const),
        slot,
        percent: fc.oneof(fc.integer({ min: 1, max: 120 }), fc.constant('rest' as const)),
        key: fc.nat(3),
        via: fc.constantFrom('api' as const, 'ops' as const),
        on: slot,
        twice: fc.constantFrom('no' as const, 'no' as const, 'same-key' as const, 'other-key' as const),
      }),
    },
    {
      weight: 4,
      arbitrary: fc.record({
        kind: fc.constant('dashboard-refund' as const),
        slot,
        percent: fc.oneof(fc.integer({ min: 1, max: 100 }), fc.constant('rest' as const)),
        pending: options.keepsDashboardRefundsPending ? fc.boolean() : fc.constant(false),
      }),
    },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('cancel' as const), slot, on: slot }) },
    { weight: 4, arbitrary: fc.record({ kind: fc.constant('fault' as const), slot, target: fc.constantFrom<FaultTarget>('refund', 'refund', 'read', 'create', 'cancel'), fault: fc.constantFrom(...options.faults) }) },
    { weight: 3, arbitrary: fc.record({ kind: fc.constant('webhooks' as const), slot, how: fc.constantFrom('hold' as const, 'release-reversed' as const, 'release-shuffled' as const, 'duplicate' as const) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('reconcile' as const), on: slot }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('pause' as const), ms: fc.constantFrom(50, 200, 600) }) },
  ]
  if (options.keepsRefundsPending) {
    weighted.push(
      { weight: 4, arbitrary: fc.record({ kind: fc.constant('pend-refunds' as const), count: fc.integer({ min: 1, max: 2 }) }) },
      { weight: 3, arbitrary: fc.record({ kind: fc.constant('finish-pending' as const), slot, outcome: fc.constantFrom('succeeded' as const, 'failed' as const) }) },
    )
  }
  if (options.crashes) weighted.push({ weight: 1, arbitrary: fc.constant({ kind: 'crash-worker' as const }) })
  const first = fc.record({ kind: fc.constant('place' as const), slot: fc.constant<Slot>(0), variant })
  const paid = fc.option(fc.constant({ kind: 'pay' as const, slot: 0 as Slot }), { freq: 5, nil: undefined })
  const later = fc.array(fc.oneof(...weighted), { minLength: 1, maxLength: 9 })
  const pendingEnd = fc.constantFrom('succeeded' as const, 'failed' as const)
  return fc.tuple(first, paid, later, pendingEnd).map(([place, pay, rest, end]) => ({ commands: [place, ...(pay ? [pay] : []), ...rest], pendingEnd: end }))
}

/** One line per command, for failure messages. */
export function describeCommand(command: Command): string {
  const { kind, ...rest } = command
  return `${kind} ${Object.entries(rest).map(([name, value]) => `${name}=${String(value)}`).join(' ')}`.trim()
}
