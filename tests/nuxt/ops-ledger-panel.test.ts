import { afterEach, describe, expect, it, vi } from 'vitest'
import type { OpsLedgerDiscrepancy } from '#shared/ops-api'
import LedgerPanel from '~/components/ops/LedgerPanel.vue'
import { type ActionCall, mountPanel, opsToken, serveListAction } from './ops-context'

/** A refund of ours that succeeded, which Stripe failed and which a dashboard refund of Stripe's sits beside. */
const discrepancy: OpsLedgerDiscrepancy = {
  id: 'ldg_01JLEDGER',
  kind: 'refund_not_at_provider',
  orderId: 'ord_01JORDER',
  tenantId: 'ten_01JTENANT',
  provider: 'stripe',
  status: 'open',
  summary: 'Refund re_01JOURS succeeded here; the provider failed it (re_stripe_1).',
  ours: {
    status: 'partially_refunded', currency: 'IDR', captured: 150_000, refunded: 40_000,
    refunds: [{ refundId: 're_01JOURS', providerRefundId: 're_stripe_1', amount: 40_000, status: 'succeeded', source: 'api' }],
  },
  theirs: {
    status: 'succeeded', currency: 'IDR', captured: 150_000, refunded: 10_000,
    refunds: [
      { refundId: 're_01JOURS', providerRefundId: 're_stripe_1', amount: 40_000, status: 'failed' },
      { refundId: null, providerRefundId: 're_stripe_2', amount: 10_000, status: 'succeeded' },
    ],
  },
  resolution: null,
  resolvedBy: null,
  createdAt: '2026-12-01T09:00:00.000Z',
  lastSeenAt: '2026-12-01T09:05:30.000Z',
  resolvedAt: null,
  updatedAt: '2026-12-01T09:05:30.000Z',
}

/** The ledger panel listing `discrepancy`, its resolve route answered as `answer` says. */
const serve = (answer: (call: ActionCall) => { status: number, body: unknown }) =>
  serveListAction('/api/ops/ledger/discrepancies', [discrepancy], `/api/ops/ledger/discrepancies/${discrepancy.id}/resolve`, answer)
const mountLedger = () => mountPanel(LedgerPanel, '[data-testid="discrepancy"]')

const cellsOf = (row: { findAll: (selector: string) => Array<{ text: () => string }> }) => row.findAll('th, td').map(cell => cell.text().replace(/\s+/g, ' ').trim())

describe('LedgerPanel: both ledgers side by side, and resolving a discrepancy', () => {
  let server: ReturnType<typeof serve> | undefined
  afterEach(() => server?.unregister())

  it('shows each refund of ours beside the provider\'s that names it, the provider\'s own alone, and marks the lines that differ', async () => {
    server = serve(() => ({ status: 500, body: {} }))
    const wrapper = await mountLedger()
    const item = wrapper.get(`[data-discrepancy-id="${discrepancy.id}"]`)
    expect(item.get('[data-testid="discrepancy-kind"]').text()).toBe('refund not at provider')
    expect(cellsOf(item.get('[data-testid="ledger-line-captured"]'))).toEqual(['Captured', '150,000 IDR', '150,000 IDR'])
    expect(item.get('[data-testid="ledger-line-captured"]').classes()).not.toContain('differs')
    expect(cellsOf(item.get('[data-testid="ledger-line-refunded"]'))).toEqual(['Refunded', '40,000 IDR', '10,000 IDR'])
    expect(item.get('[data-testid="ledger-line-refunded"]').classes()).toContain('differs')
    const refunds = item.findAll('[data-testid="ledger-line-refund"]')
    // Each cell's parts (amount, status, source, id), as the page lays them out on a line.
    const partsOf = (row: typeof refunds[number]) => [row.get('th').text(), ...row.findAll('td').map(cell => cell.findAll('span, .id').map(part => part.text().trim()).join(' '))]
    expect(refunds.map(partsOf)).toEqual([
      ['Refund', '40,000 IDR succeeded api re_01JOURS', '40,000 IDR failed re_stripe_1'],
      ['Refund', 'none', '10,000 IDR succeeded re_stripe_2'],
    ])
    expect(refunds.map(row => row.classes().includes('differs'))).toEqual([true, true])
    expect(server.calls).toEqual([])
  })

  it('refuses a missing name or note in the form and sends nothing; then sends both trimmed with the token, and the entry shows who resolved it, when and why', async () => {
    const note = 'Paid the shopper back by hand; Stripe confirmed the refund failed.'
    server = serve(call => ({
      status: 200,
      body: { ...discrepancy, status: 'resolved', resolution: (call.body as { note: string }).note, resolvedBy: (call.body as { operator: string }).operator, resolvedAt: '2026-12-01T09:20:00.250Z' },
    }))
    const wrapper = await mountLedger()
    await wrapper.get('[data-testid="resolve"]').trigger('click')
    await wrapper.get('[data-testid="resolve-form"]').trigger('submit')
    expect(wrapper.get('[data-testid="resolve-error"]').text()).toBe('Enter your name (1–100 characters): it is kept with the resolution.')
    await wrapper.get('[data-testid="resolve-operator"]').setValue('  dana ')
    await wrapper.get('[data-testid="resolve-note"]').setValue('   ')
    await wrapper.get('[data-testid="resolve-form"]').trigger('submit')
    expect(wrapper.get('[data-testid="resolve-error"]').text()).toBe('Enter what was done about it (1–1000 characters): it is kept in the audit.')
    expect(server.calls).toEqual([])

    await wrapper.get('[data-testid="resolve-note"]').setValue(`  ${note} `)
    await wrapper.get('[data-testid="resolve-form"]').trigger('submit')
    await vi.waitFor(() => expect(wrapper.get(`[data-discrepancy-id="${discrepancy.id}"]`).attributes('data-status')).toBe('resolved'))
    expect(server.calls).toEqual([{ authorization: `Bearer ${opsToken}`, body: { note, operator: 'dana' } }])
    expect(wrapper.get('[data-testid="discrepancy-resolution"]').text().replace(/\s+/g, ' ')).toBe(`Resolved by dana at 2026-12-01 09:20:00.250Z: ${note}`)
    expect(wrapper.get('[data-testid="ledger-announcement"]').text()).toBe(`Discrepancy ${discrepancy.id} resolved by dana.`)
    expect(wrapper.find('[data-testid="resolve"]').exists()).toBe(false)
  })

  it('a 409 (resolved meanwhile) shows the server\'s detail in the form', async () => {
    server = serve(() => ({ status: 409, body: { type: '/problems/discrepancy-not-open', title: 'Discrepancy is not open', status: 409, detail: `Discrepancy ${discrepancy.id} was resolved already by sam: nothing changed.` } }))
    const wrapper = await mountLedger()
    await wrapper.get('[data-testid="resolve"]').trigger('click')
    await wrapper.get('[data-testid="resolve-operator"]').setValue('dana')
    await wrapper.get('[data-testid="resolve-note"]').setValue('Done.')
    await wrapper.get('[data-testid="resolve-form"]').trigger('submit')
    await vi.waitFor(() => expect(wrapper.find('[data-testid="resolve-error"]').exists()).toBe(true))
    expect(wrapper.get('[data-testid="resolve-error"]').text()).toBe(`Not resolved: Discrepancy ${discrepancy.id} was resolved already by sam: nothing changed. (HTTP 409)`)
  })
})
