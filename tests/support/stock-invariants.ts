import type postgres from 'postgres'

const PAID = ['paid', 'partially_refunded', 'refunded']

/**
 * What must hold of stock at any moment (docs/inventory.md), read from the database: each SKU's
 * counts equal its ledger's sums and stay within 0 ≤ reserved ≤ onHand; each reservation is settled
 * at most once; and a settlement agrees with its order — committed only for an order paid, a paid
 * order's units committed unless it was canceled first, a canceled order's units released, an
 * unpaid order's units still held. One string per violation.
 */
export async function stockViolations(sql: postgres.Sql, tenantId: string, orderIds: string[]): Promise<string[]> {
  const violations: string[] = []
  const counts = await sql<Array<{ sku: string, on_hand: string, reserved: string, ledger_on_hand: string | null, ledger_reserved: string | null }>>`
    select s.sku, s.on_hand, s.reserved, l.on_hand as ledger_on_hand, l.reserved as ledger_reserved
    from stock s left join (select sku, sum(on_hand_delta) as on_hand, sum(reserved_delta) as reserved from stock_movements where tenant_id = ${tenantId} group by sku) l
      on l.sku = s.sku
    where s.tenant_id = ${tenantId}`
  for (const row of counts) {
    const [onHand, reserved] = [Number(row.on_hand), Number(row.reserved)]
    if (onHand !== Number(row.ledger_on_hand ?? 0) || reserved !== Number(row.ledger_reserved ?? 0)) {
      violations.push(`${row.sku}: counts onHand ${onHand}, reserved ${reserved}; the ledger sums to ${row.ledger_on_hand ?? 0}, ${row.ledger_reserved ?? 0}`)
    }
    if (reserved < 0 || reserved > onHand) violations.push(`${row.sku}: reserved ${reserved} outside 0…${onHand}`)
  }
  if (orderIds.length === 0) return violations
  const settlements = await sql<Array<{ id: string, status: string, sku: string | null, commits: number, releases: number }>>`
    select o.id, o.status, r.sku,
      count(*) filter (where m.kind = 'commit')::int as commits, count(*) filter (where m.kind = 'release')::int as releases
    from orders o
    left join stock_movements r on r.order_id = o.id and r.kind = 'reserve'
    left join stock_movements m on m.tenant_id = r.tenant_id and m.source_id = r.source_id and m.sku = r.sku and m.kind in ('commit', 'release')
    where o.id = any(${orderIds})
    group by o.id, o.status, r.sku`
  for (const { id, status, sku, commits, releases } of settlements) {
    if (sku === null) continue
    const what = `${id} (${status}), ${sku}`
    if (commits + releases > 1) violations.push(`${what}: settled ${commits + releases} times (${commits} commits, ${releases} releases)`)
    if (commits > 0 && !PAID.includes(status)) violations.push(`${what}: committed, but the order is not paid`)
    if (PAID.includes(status) && commits + releases === 0) violations.push(`${what}: paid, but its reservation is still held`)
    if (status === 'canceled' && releases === 0) violations.push(`${what}: canceled, but its units were not released`)
    if (status === 'pending_payment' && commits + releases > 0) violations.push(`${what}: unpaid, but its reservation was settled`)
  }
  return violations
}
