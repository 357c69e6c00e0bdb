import { mountSuspended, registerEndpoint } from '@nuxt/test-utils/runtime'
import { getHeader, getQuery, type H3Event, setResponseHeader, setResponseStatus } from 'h3'
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'
import type { OpsInventory, OpsStock } from '#shared/ops-api'
import InventoryPanel from '~/components/ops/InventoryPanel.vue'
import { consoleHost, mountPanel, opsToken } from './ops-context'

/** A low tote of the demo store: 3 counted, one order holds 1, another bought 1 (committed), a third was canceled. */
const tote: OpsStock = { object: 'stock', tenantId: 'ten_demo_store', sku: 'TOTE-CANVAS', onHand: 2, reserved: 1, available: 1, updatedAt: '2026-12-01T09:20:00.000Z' }
const mug: OpsStock = { object: 'stock', tenantId: 'ten_01JOTHER', sku: 'MUG-ENAMEL', onHand: 40, reserved: 0, available: 40, updatedAt: '2026-12-01T09:00:00.000Z' }
const movement = (id: number, fields: Partial<OpsInventory['movements'][number]>): OpsInventory['movements'][number] => ({
  id, sku: 'TOTE-CANVAS', kind: 'reserve', sourceType: 'order', sourceId: 'ord_1', orderId: 'ord_1', quantity: 1,
  onHandDelta: 0, reservedDelta: 1, reason: null, requestId: 'req_1', jobId: null, createdAt: '2026-12-01T09:10:00.000Z', ...fields,
})
const toteInventory: OpsInventory = {
  stock: tote,
  movements: [
    movement(5, { kind: 'reserve', sourceId: 'ord_3', orderId: 'ord_3', createdAt: '2026-12-01T09:20:00.000Z' }),
    movement(4, { kind: 'release', sourceId: 'ord_2', orderId: 'ord_2', reservedDelta: -1, reason: 'canceled', requestId: 'req_2', createdAt: '2026-12-01T09:15:00.000Z' }),
    movement(3, { kind: 'reserve', sourceId: 'ord_2', orderId: 'ord_2', createdAt: '2026-12-01T09:12:00.000Z' }),
    movement(2, { kind: 'commit', onHandDelta: -1, reservedDelta: -1, requestId: null, jobId: 'job_1', createdAt: '2026-12-01T09:11:00.000Z' }),
    movement(1, { kind: 'reserve', createdAt: '2026-12-01T09:10:00.000Z' }),
    movement(0, { kind: 'set', sourceType: 'count', sourceId: 'cnt_1', orderId: null, quantity: 3, onHandDelta: 3, reservedDelta: 0, requestId: null, createdAt: '2026-12-01T09:00:00.000Z' }),
  ],
  holders: [{ orderId: 'ord_3', quantity: 1, createdAt: '2026-12-01T09:20:00.000Z' }],
  ledger: { onHand: 2, reserved: 1 },
}

/** What the stand-in server was asked: each GET's path, query and authorization. */
let asked: Array<{ path: string, query: Record<string, unknown>, authorization: string | undefined }> = []
let detail: (event: H3Event) => unknown = () => toteInventory
// The test server mounts registered endpoints under /_: the path as the page asked for it is what follows.
const record = (event: H3Event) => asked.push({ path: event.path.split('?')[0]!.replace(/^\/_/, ''), query: getQuery(event), authorization: getHeader(event, 'authorization') })
const stops = [
  registerEndpoint('/api/ops/inventory', (event) => {
    record(event)
    return { object: 'list', data: getQuery(event).tenantId === 'ten_demo_store' ? [tote] : [tote, mug] }
  }),
  registerEndpoint('/api/ops/inventory/ten_demo_store/TOTE-CANVAS', (event) => {
    record(event)
    return detail(event)
  }),
]

const textOf = (element: { text: () => string }) => element.text().replace(/\s+/g, ' ').trim()

describe('InventoryPanel: tracked stock, and one SKU\'s counts, ledger and holding orders', () => {
  afterEach(() => {
    asked = []
    detail = () => toteInventory
  })
  afterAll(() => stops.forEach(stop => stop()))

  it('lists tracked SKUs with their tenant and counts; a tenant filter asks the server for that tenant only', async () => {
    const wrapper = await mountPanel(InventoryPanel, '[data-testid="inventory-row"]', 2)
    expect(wrapper.findAll('[data-testid="inventory-row"]').map(row => row.findAll('th, td').slice(0, 5).map(textOf)))
      .toEqual([['TOTE-CANVAS', 'ten_demo_store', '2', '1', '1'], ['MUG-ENAMEL', 'ten_01JOTHER', '40', '0', '40']])
    expect(asked).toEqual([{ path: '/api/ops/inventory', query: {}, authorization: `Bearer ${opsToken}` }])

    await wrapper.get('#inventory-tenant').setValue(' ten_demo_store ')
    await wrapper.get('form').trigger('submit')
    await vi.waitFor(() => expect(wrapper.findAll('[data-testid="inventory-row"]')).toHaveLength(1))
    expect(asked[1]).toEqual({ path: '/api/ops/inventory', query: { tenantId: 'ten_demo_store' }, authorization: `Bearer ${opsToken}` })
  })

  it('opens a SKU: its counts, that the ledger sums to them, each ledger row (kind, deltas, source, reason) and the holding order, which opens in the order panel', async () => {
    const { Host, context } = consoleHost(InventoryPanel)
    const wrapper = await mountSuspended(Host)
    await vi.waitFor(() => expect(wrapper.findAll('[data-testid="inventory-row"]')).toHaveLength(2))
    await wrapper.get('[data-sku="TOTE-CANVAS"] [data-testid="inventory-open"]').trigger('click')
    await vi.waitFor(() => expect(wrapper.find('[data-testid="inventory-counts"]').exists()).toBe(true))

    expect(asked.at(-1)).toEqual({ path: '/api/ops/inventory/ten_demo_store/TOTE-CANVAS', query: {}, authorization: `Bearer ${opsToken}` })
    expect(['onHand', 'reserved', 'available'].map(count => textOf(wrapper.get(`[data-testid="count-${count}"]`)))).toEqual(['2', '1', '1'])
    const check = wrapper.get('[data-testid="inventory-ledger-check"]')
    expect(check.attributes('data-agrees')).toBe('true')
    expect(textOf(check)).toBe('The ledger sums to the counts: on hand 2, reserved 1.')
    expect(wrapper.findAll('[data-testid="movement"]').map(row => row.findAll('td').map(textOf))).toEqual([
      ['2026-12-01 09:20:00.000Z', 'reserve', '0', '+1', 'order ord_3', '—'],
      ['2026-12-01 09:15:00.000Z', 'release', '0', '−1', 'order ord_2', 'canceled'],
      ['2026-12-01 09:12:00.000Z', 'reserve', '0', '+1', 'order ord_2', '—'],
      ['2026-12-01 09:11:00.000Z', 'commit', '−1', '−1', 'order ord_1', '—'],
      ['2026-12-01 09:10:00.000Z', 'reserve', '0', '+1', 'order ord_1', '—'],
      ['2026-12-01 09:00:00.000Z', 'set', '+3', '0', 'count cnt_1', '—'],
    ])
    expect(wrapper.findAll('[data-testid="holder"]').map(holder => holder.findAll('code, span').map(textOf))).toEqual([['ord_3', '1 reserved', 'since 2026-12-01 09:20:00.000Z']])

    await wrapper.get('[data-testid="holder-open-order"]').trigger('click')
    expect(context().orderRequest.value).toEqual({ orderId: 'ord_3', seq: 1 })
  })

  it('a ledger that does not sum to the counts says so, with both; a 404 shows the server\'s detail', async () => {
    detail = () => ({ ...toteInventory, ledger: { onHand: 3, reserved: 1 } })
    const wrapper = await mountPanel(InventoryPanel, '[data-testid="inventory-row"]', 2)
    await wrapper.get('[data-sku="TOTE-CANVAS"] [data-testid="inventory-open"]').trigger('click')
    await vi.waitFor(() => expect(wrapper.find('[data-testid="inventory-ledger-check"]').exists()).toBe(true))
    expect(wrapper.get('[data-testid="inventory-ledger-check"]').attributes('data-agrees')).toBe('false')
    expect(textOf(wrapper.get('[data-testid="inventory-ledger-check"]'))).toBe('The ledger does not sum to the counts: its rows add up to on hand 3 and reserved 1, the stock row holds 2 and 1.')

    detail = (event) => {
      setResponseStatus(event, 404)
      setResponseHeader(event, 'content-type', 'application/problem+json')
      return { type: '/problems/not-found', title: 'Not found', status: 404, detail: 'Tenant ten_demo_store tracks no SKU "TOTE-CANVAS".' }
    }
    await wrapper.get('[data-sku="TOTE-CANVAS"] [data-testid="inventory-open"]').trigger('click')
    await vi.waitFor(() => expect(wrapper.find('[data-testid="inventory-error"]').exists()).toBe(true))
    expect(textOf(wrapper.get('[data-testid="inventory-error"]'))).toBe('Tenant ten_demo_store tracks no SKU "TOTE-CANVAS". (HTTP 404)')
    expect(wrapper.find('[data-testid="inventory-counts"]').exists()).toBe(false)
  })
})
