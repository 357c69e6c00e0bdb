import { afterAll, beforeAll, expect, it } from 'vitest'
import { stopAll } from '../support/app'
import { createTenant, request, type TestResponse } from '../support/http'
import { opsRequest } from '../support/ops'
import { newIdempotencyKey, type OrdersStack, postOrder, startOrdersStack, type TenantCredentials, validOrderBody } from '../support/orders'
import { describeWithServices } from '../support/services'

// The console's inventory routes (docs/operations.md#the-operations-console) against the built
// server on Postgres: tracked stock of every tenant, the most recently moved first, and one SKU's
// counts, ledger rows, holding orders and ledger sums — exact bodies, checked against the rows.

const SKU = 'LAMP-1'
const UNIT_PRICE = 40_000

interface MovementRow { id: number, requestId: string | null, createdAt: string }

describeWithServices('ops inventory routes: GET /api/ops/inventory and /api/ops/inventory/{tenantId}/{sku}', ['postgres', 'redis'], () => {
  let stack: OrdersStack
  let other: TenantCredentials
  /** Order A holds 2 lamps; order B held 1 and was canceled. */
  let holding: string
  let canceled: string

  const asTenant = (tenant: TenantCredentials, path: string, options: { method?: string, body?: unknown, key?: string } = {}): Promise<TestResponse> => request(stack.app.url, path, {
    method: options.method ?? 'GET',
    body: options.body,
    headers: { authorization: `Bearer ${tenant.secretKey}`, ...(options.key && { 'idempotency-key': options.key }) },
  })
  const place = async (quantity: number): Promise<string> => {
    const placed = await postOrder(stack.app.url, {
      secretKey: stack.tenant.secretKey,
      key: newIdempotencyKey(),
      body: validOrderBody({ amount: quantity * UNIT_PRICE, items: [{ sku: SKU, quantity, unitPrice: UNIT_PRICE }] }),
    })
    expect(placed.status, placed.text).toBe(201)
    return placed.json.id
  }
  /** The stock row's last change, as the database holds it. */
  const updatedAt = async (tenantId: string): Promise<string> => {
    const [row] = await stack.sql<[{ updatedAt: Date }]>`select updated_at as "updatedAt" from stock where tenant_id = ${tenantId} and sku = ${SKU}`
    return row.updatedAt.toISOString()
  }

  beforeAll(async () => {
    stack = await startOrdersStack('ops_inventory')
    other = await createTenant(stack.app.url, 'ops inventory, another shop')
    for (const [tenant, onHand] of [[other, 9], [stack.tenant, 5]] as const) {
      const set = await asTenant(tenant, `/api/inventory/${SKU}`, { method: 'PUT', body: { onHand } })
      expect(set.status, set.text).toBe(200)
    }
    holding = await place(2)
    canceled = await place(1)
    const cancel = await asTenant(stack.tenant, `/api/orders/${canceled}/cancel`, { method: 'POST', body: {}, key: newIdempotencyKey() })
    expect(cancel.status, cancel.text).toBe(200)
  })

  afterAll(async () => {
    await stack?.close()
    await stopAll()
  })

  it('401 without the ops token, for both routes, with the detail that says what to send', async () => {
    for (const path of ['/api/ops/inventory', `/api/ops/inventory/${stack.tenant.tenantId}/${SKU}`]) {
      const refused = await request(stack.app.url, path, { headers: { authorization: `Bearer ${stack.tenant.secretKey}` } })
      expect(refused.status, path).toBe(401)
      expect(refused.json).toMatchObject({ type: '/problems/unauthorized', status: 401, detail: 'This is an operator route: send "Authorization: Bearer <OPS_TOKEN>".' })
    }
  })

  it('lists tracked SKUs with their tenant, the most recently moved first; tenantId and sku narrow it', async () => {
    const mine = { object: 'stock', tenantId: stack.tenant.tenantId, sku: SKU, onHand: 5, reserved: 2, available: 3, updatedAt: await updatedAt(stack.tenant.tenantId) }
    const theirs = { object: 'stock', tenantId: other.tenantId, sku: SKU, onHand: 9, reserved: 0, available: 9, updatedAt: await updatedAt(other.tenantId) }

    const bySku = await opsRequest(stack.app.url, `/api/ops/inventory?sku=${SKU}`)
    expect(bySku.status, bySku.text).toBe(200)
    expect(bySku.json).toStrictEqual({ object: 'list', data: [mine, theirs] })

    const byTenant = await opsRequest(stack.app.url, `/api/ops/inventory?tenantId=${other.tenantId}`)
    expect(byTenant.json).toStrictEqual({ object: 'list', data: [theirs] })

    const none = await opsRequest(stack.app.url, `/api/ops/inventory?tenantId=${other.tenantId}&sku=NO-SUCH`)
    expect(none.json).toStrictEqual({ object: 'list', data: [] })

    const unknown = await opsRequest(stack.app.url, '/api/ops/inventory?limit=5')
    expect(unknown.status).toBe(400)
    expect(unknown.json).toMatchObject({ type: '/problems/validation-failed', errors: [{ path: '(query)', message: expect.stringContaining('limit') }] })
  })

  it('one SKU: its counts, every ledger row newest first, the order still holding units, and ledger sums equal to the counts', async () => {
    const rows = await stack.sql<MovementRow[]>`select id::int as id, request_id as "requestId", created_at as "createdAt" from stock_movements
      where tenant_id = ${stack.tenant.tenantId} and sku = ${SKU} order by id desc`
    expect(rows).toHaveLength(4)
    const [release, reserveCanceled, reserveHolding, set] = rows.map(row => ({ id: row.id, requestId: row.requestId, createdAt: new Date(row.createdAt).toISOString() })) as [MovementRow, MovementRow, MovementRow, MovementRow]
    const [{ sourceId: countId }] = await stack.sql<[{ sourceId: string }]>`select source_id as "sourceId" from stock_movements where id = ${set.id}`
    const orderMovement = { sku: SKU, sourceType: 'order', reason: null, jobId: null, onHandDelta: 0 }

    const answer = await opsRequest(stack.app.url, `/api/ops/inventory/${stack.tenant.tenantId}/${SKU}`)
    expect(answer.status, answer.text).toBe(200)
    expect(answer.json).toStrictEqual({
      stock: { object: 'stock', tenantId: stack.tenant.tenantId, sku: SKU, onHand: 5, reserved: 2, available: 3, updatedAt: await updatedAt(stack.tenant.tenantId) },
      movements: [
        { ...orderMovement, ...release, kind: 'release', sourceId: canceled, orderId: canceled, quantity: 1, reservedDelta: -1, reason: 'canceled' },
        { ...orderMovement, ...reserveCanceled, kind: 'reserve', sourceId: canceled, orderId: canceled, quantity: 1, reservedDelta: 1 },
        { ...orderMovement, ...reserveHolding, kind: 'reserve', sourceId: holding, orderId: holding, quantity: 2, reservedDelta: 2 },
        { ...set, sku: SKU, kind: 'set', sourceType: 'count', sourceId: countId, orderId: null, quantity: 5, onHandDelta: 5, reservedDelta: 0, reason: null, jobId: null },
      ],
      holders: [{ orderId: holding, quantity: 2, createdAt: reserveHolding.createdAt }],
      ledger: { onHand: 5, reserved: 2 },
    })
    // Every row was written by a request of the shop's (the count, the orders, the cancel).
    expect(rows.every(row => row.requestId?.startsWith('req_'))).toBe(true)
  })

  it('the canceled order\'s evidence tells its stock movements in order: reserved when placed, back on sale when canceled', async () => {
    const evidence = await opsRequest(stack.app.url, `/api/ops/evidence?orderId=${canceled}`)
    expect(evidence.status, evidence.text).toBe(200)
    const movements = (evidence.json.timeline as Array<{ kind: string, summary: string, ids: Record<string, string> }>).filter(entry => entry.kind === 'stock_movement')
    expect(movements.map(({ summary, ids }) => ({ summary, orderId: ids.orderId, tenantId: ids.tenantId }))).toEqual([
      { summary: `Order ${canceled} reserved 1 × ${SKU}: held for it until it is paid, canceled or expires (reserved +1).`, orderId: canceled, tenantId: stack.tenant.tenantId },
      { summary: `Order ${canceled}'s 1 × ${SKU} went back on sale: the order was canceled (reserved −1).`, orderId: canceled, tenantId: stack.tenant.tenantId },
    ])
  })

  it('404 for a SKU the tenant does not track, or a path that cannot name one, saying where the tracked ones are listed', async () => {
    const untracked = await opsRequest(stack.app.url, `/api/ops/inventory/${other.tenantId}/NO-SUCH`)
    expect(untracked.status).toBe(404)
    expect(untracked.json).toMatchObject({
      type: '/problems/not-found',
      detail: `Tenant ${other.tenantId} tracks no SKU "NO-SUCH". List the tracked SKUs with GET /api/ops/inventory?tenantId=${other.tenantId}.`,
    })
    const unnamed = await opsRequest(stack.app.url, `/api/ops/inventory/${other.tenantId}/${'X'.repeat(65)}`)
    expect(unnamed.status).toBe(404)
    expect(unnamed.json.detail).toMatch(/List the tracked ones with GET \/api\/ops\/inventory\.$/)
  })
})
