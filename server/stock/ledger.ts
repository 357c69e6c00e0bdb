import { sql } from 'drizzle-orm'
import type { BoundStatement, Database } from '@idempotent-checkout/db-kit'
import { rowsOf } from '../db/raw-rows'

/**
 * The stock ledger's writes (docs/inventory.md#the-stock-ledger). Each inserts stock_movements rows;
 * their insert trigger moves the counts, so a row skipped by ON CONFLICT DO NOTHING — a settlement a
 * retried job, a replayed webhook or another instance made first — moves nothing.
 */

export interface MovementContext {
  requestId?: string | null
  jobId?: string | null
}

/**
 * The order's reservations, for the order's own transaction: one movement per tracked SKU (its
 * quantities summed), in SKU order so that orders sharing SKUs lock their rows in the same order.
 * Untracked SKUs have no stock row and reserve nothing. A reservation past what is available
 * fails the whole statement on stock_reserved_within_on_hand: all items or none.
 */
export function reserveForOrder(order: { tenantId: string, orderId: string, items: Array<{ sku: string, quantity: number }> }, context: MovementContext): BoundStatement {
  return {
    text: `insert into stock_movements (tenant_id, sku, kind, source_type, source_id, order_id, quantity, on_hand_delta, reserved_delta, request_id)
      select s.tenant_id, s.sku, 'reserve', 'order', $2::text, $2::text, w.quantity, 0, w.quantity, $4::text
      from (select x.sku, sum(x.quantity)::bigint as quantity from jsonb_to_recordset($3::jsonb) as x(sku text, quantity bigint) group by x.sku) w
      join stock s on s.tenant_id = $1::text and s.sku = w.sku
      order by s.sku`,
    params: [order.tenantId, order.orderId, JSON.stringify(order.items.map(({ sku, quantity }) => ({ sku, quantity }))), context.requestId ?? null],
  }
}

/** The check an order's reservation fails on when a SKU has too few units available. */
export const OVERSOLD_CONSTRAINT = 'stock_reserved_within_on_hand'

export type Settlement = 'commit' | 'release'
/** Why a reservation was released: the order was canceled, expired unpaid, or its payment refused for good. */
export type ReleaseReason = 'canceled' | 'expired' | 'refused'

/**
 * Settles the order's reservations once: paid → commit (onHand and reserved go down), otherwise
 * release (reserved goes down). A reservation already committed or released is skipped (the
 * partial unique index stock_movements_settled_once): whichever of a payment, a cancel and the
 * expiry comes first settles it, and the ledger says which. Returns the movements made.
 */
export async function settleReservations(tx: Database, order: { tenantId: string, orderId: string }, settlement: Settlement, reason: ReleaseReason | null, context: MovementContext): Promise<number> {
  return rowsOf(await settlementQuery(tx, order, settlement, reason, context)).length
}

/** settleReservations' statement, not run yet: to send it with the COMMIT (writeAtCommit). */
export function settlementQuery(tx: Database, order: { tenantId: string, orderId: string }, settlement: Settlement, reason: ReleaseReason | null, context: MovementContext) {
  const onHandDelta = settlement === 'commit' ? sql`-r.quantity` : sql`0`
  return tx.execute(sql`
    insert into stock_movements (tenant_id, sku, kind, source_type, source_id, order_id, quantity, on_hand_delta, reserved_delta, reason, request_id, job_id)
    select r.tenant_id, r.sku, ${settlement}, 'order', r.source_id, r.order_id, r.quantity, ${onHandDelta}, -r.quantity, ${reason}::text, ${context.requestId ?? null}::text, ${context.jobId ?? null}::text
    from stock_movements r
    where r.tenant_id = ${order.tenantId} and r.source_id = ${order.orderId} and r.kind = 'reserve'
    order by r.sku
    on conflict do nothing
    returning id`)
}

/**
 * Units a refund puts back on the shelf (onHand goes up), once per (refund, SKU). The caller checked
 * them against what the order's payment committed and earlier refunds restocked.
 */
export async function restockForRefund(tx: Database, refund: { tenantId: string, orderId: string, refundId: string }, items: Array<{ sku: string, quantity: number }>, context: MovementContext): Promise<void> {
  if (items.length === 0) return
  await tx.execute(sql`
    insert into stock_movements (tenant_id, sku, kind, source_type, source_id, order_id, quantity, on_hand_delta, reserved_delta, request_id)
    select ${refund.tenantId}, w.sku, 'restock', 'refund', ${refund.refundId}, ${refund.orderId}, w.quantity, w.quantity, 0, ${context.requestId ?? null}::text
    from jsonb_to_recordset(${JSON.stringify(items)}::jsonb) as w(sku text, quantity bigint)
    order by w.sku
    on conflict do nothing`)
}
