import { mountSuspended, registerEndpoint } from '@nuxt/test-utils/runtime'
import { defineEventHandler, getHeader, type H3Event, readBody, setResponseHeader, setResponseStatus } from 'h3'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import type { OpsOrder, OpsRefund } from '#shared/ops-api'
import type { RefundView } from '#shared/orders'
import OrderPanel from '~/components/ops/OrderPanel.vue'
import { exceedsRemainingDetail } from '../../server/refunds/refusals'
import { consoleHost, opsToken } from './ops-context'

// The console's order view: an order as its tenant reads it, its refunds, and the Refund form —
// one Idempotency-Key per intended refund, reused by every retry, a new one once the server has
// answered for good; the server's problem detail shown as it is.

const orderId = 'ord_01JPAID'
const orderPath = `/api/ops/orders/${orderId}`
const refundPath = `${orderPath}/refunds`

const settledRefund: RefundView = {
  id: 're_01JFIRST',
  object: 'refund',
  orderId,
  amount: 50_000,
  currency: 'IDR',
  status: 'succeeded',
  reason: 'requested_by_customer',
  source: 'api',
  createdAt: '2026-12-01T10:05:00.000Z',
}

function paidOrder(overrides: Partial<OpsOrder> = {}): OpsOrder {
  return {
    id: orderId,
    object: 'order',
    status: 'partially_refunded',
    cartId: 'cart_ops_1',
    currency: 'IDR',
    amount: 300_000,
    paymentMethod: 'card',
    items: [{ sku: 'SKU-1', quantity: 2, unitPrice: 150_000 }],
    customer: { email: 'shopper@example.com' },
    createdAt: '2026-12-01T10:00:00.000Z',
    paymentIntentId: 'pi_ops_1',
    payment: { provider: 'mockpay', id: 'pi_ops_1', nextAction: { type: 'mockpay' }, error: null, status: 'ready' },
    cancelReason: null,
    amountRefunded: 50_000,
    reservations: [],
    refunds: [settledRefund, { ...settledRefund, id: 're_01JFAILED', amount: 20_000, status: 'failed', reason: null, source: 'provider', createdAt: '2026-12-01T10:06:00.000Z' }],
    tenantId: 'ten_ops_1',
    ...overrides,
  }
}

function problem(event: H3Event, status: number, body: Record<string, unknown>) {
  setResponseStatus(event, status)
  setResponseHeader(event, 'content-type', 'application/problem+json')
  return { status, ...body }
}

/** One POST to the refunds route as the stand-in for the server saw it. */
interface RefundCall { key: string | undefined, authorization: string | undefined, body: unknown }

/** The order GET answers (changeable by a test), and the refunds route answering each call in turn. */
function serve(answers: Array<(event: H3Event, call: RefundCall) => unknown>) {
  const calls: RefundCall[] = []
  const state = { order: paidOrder() }
  const stops = [
    registerEndpoint(orderPath, defineEventHandler(() => state.order)),
    registerEndpoint(refundPath, {
      method: 'POST',
      handler: defineEventHandler(async (event) => {
        const call = { key: getHeader(event, 'idempotency-key'), authorization: getHeader(event, 'authorization'), body: await readBody(event) }
        calls.push(call)
        return answers.shift()!(event, call)
      }),
    }),
  ]
  return { calls, state, stop: () => stops.forEach(stop => stop()) }
}

/** Mounted panels, unmounted after each test: a panel following a pending refund stops re-reading it. */
const mounted: Array<{ unmount: () => void }> = []

async function mountPanel() {
  const { Host, context } = consoleHost(OrderPanel)
  const wrapper = await mountSuspended(Host)
  mounted.push(wrapper)
  return { wrapper, context }
}

async function mountOpened() {
  const { wrapper, context } = await mountPanel()
  await wrapper.get('[data-testid="order-lookup"]').setValue(`  ${orderId} `)
  await wrapper.get('form[role="search"]').trigger('submit')
  await vi.waitFor(() => expect(wrapper.find('[data-testid="order-heading"]').exists()).toBe(true))
  return { wrapper, context }
}

type Wrapper = Awaited<ReturnType<typeof mountOpened>>['wrapper']
const cellsOf = (wrapper: Wrapper) => wrapper.findAll('[data-testid="refund-row"]').map(row => row.findAll('td').map(cell => cell.text()))
const factsOf = (wrapper: Wrapper) => {
  const facts = wrapper.get('[data-testid="order-facts"]')
  const values = facts.findAll('dd').map(value => value.text().replace(/\s+/g, ' '))
  return Object.fromEntries(facts.findAll('dt').map((term, index) => [term.text(), values[index]]))
}

async function refund(wrapper: Wrapper, amount?: number, reason?: string) {
  if (amount !== undefined) await wrapper.get('[data-testid="refund-amount"]').setValue(String(amount))
  if (reason !== undefined) await wrapper.get('[data-testid="refund-reason"]').setValue(reason)
  await wrapper.get('[data-testid="refund-form"]').trigger('submit')
}

describe('OrderPanel: an order and its refunds', () => {
  let server: ReturnType<typeof serve> | undefined
  beforeEach(() => sessionStorage.clear())
  afterEach(() => {
    mounted.splice(0).forEach(wrapper => wrapper.unmount())
    server?.stop()
  })

  it('opens an order by id: its facts, each refund (id, amount, status, source, reason, created), and the form set to what remains', async () => {
    server = serve([])
    const { wrapper } = await mountOpened()

    expect(wrapper.get('[data-testid="order-heading"]').text()).toBe(`Order ${orderId}`)
    expect(factsOf(wrapper)).toEqual({
      Status: 'partially refunded',
      Amount: '300,000 IDR',
      Refunded: '50,000 IDR',
      Remaining: '250,000 IDR',
      Payment: 'card · mockpay pi_ops_1',
      Tenant: 'tenant ten_ops_1',
      Cart: 'cart_ops_1',
      Created: '2026-12-01 10:00:00.000Z',
    })
    expect(wrapper.findAll('[data-testid="refunds-table"] th').map(cell => cell.text())).toEqual(['Refund', 'Amount', 'Status', 'Source', 'Reason', 'Created'])
    expect(cellsOf(wrapper)).toEqual([
      ['re_01JFIRST', '50,000 IDR', 'succeeded', 'api', 'requested by customer', '2026-12-01 10:05:00.000Z'],
      ['re_01JFAILED', '20,000 IDR', 'failed', 'provider', '—', '2026-12-01 10:06:00.000Z'],
    ])
    // A failed refund gives its amount back: 300 000 − 50 000 remain refundable.
    expect((wrapper.get('[data-testid="refund-amount"]').element as HTMLInputElement).value).toBe('250000')
    expect(wrapper.get('label[for="refund-amount"]').text()).toBe('Amount (IDR)')
    expect(wrapper.findAll('[data-testid="refund-reason"] option').map(option => option.text())).toEqual(['none given', 'requested by customer', 'duplicate', 'fraudulent'])
    expect(wrapper.get('[data-testid="refund-submit"]').text()).toBe('Refund')
  })

  it('an order not paid cannot be refunded here, and says why; an unknown id says so', async () => {
    server = serve([])
    server.state.order = paidOrder({ status: 'pending_payment', amountRefunded: 0, refunds: [] })
    const { wrapper } = await mountOpened()

    expect(wrapper.get('[data-testid="refunds-empty"]').text()).toBe('No refunds yet.')
    expect(wrapper.find('[data-testid="refund-form"]').exists()).toBe(false)
    expect(wrapper.get('[data-testid="refund-unavailable"]').text()).toBe('Only a paid order can be refunded: this one is pending payment.')

    const stop = registerEndpoint('/api/ops/orders/ord_NOPE', defineEventHandler(event => problem(event, 404, { type: '/problems/not-found', detail: 'No order "ord_NOPE".' })))
    await wrapper.get('[data-testid="order-lookup"]').setValue('ord_NOPE')
    await wrapper.get('form[role="search"]').trigger('submit')
    await vi.waitFor(() => expect(wrapper.find('[data-testid="order-error"]').exists()).toBe(true))
    expect(wrapper.get('[data-testid="order-error"]').text()).toBe('No order ord_NOPE.')
    expect(wrapper.find('[data-testid="order-heading"]').exists()).toBe(false)
    stop()
  })

  it('Refund sends the amount and reason with the token and a key of its own; the new refund is then listed, and the next refund gets a new key', async () => {
    const made: OpsRefund = { ...settledRefund, id: 're_01JNEW', amount: 100_000, status: 'pending', reason: 'duplicate', createdAt: '2026-12-01T10:10:00.000Z', idempotency: { key: '', replayed: false } }
    server = serve([
      (event, call) => {
        setResponseStatus(event, 201)
        server!.state.order = paidOrder({ refunds: [...paidOrder().refunds, made] })
        return { ...made, idempotency: { key: call.key, replayed: false } }
      },
      (event, call) => {
        setResponseStatus(event, 201)
        return { ...made, id: 're_01JNEXT', amount: 10_000, reason: null, idempotency: { key: call.key, replayed: false } }
      },
    ])
    const { wrapper } = await mountOpened()
    await refund(wrapper, 100_000, 'duplicate')

    await vi.waitFor(() => expect(wrapper.find('[data-testid="refund-outcome"]').exists()).toBe(true))
    const [call] = server.calls
    expect(call).toEqual({ key: expect.stringMatching(/^[0-9a-f-]{36}$/), authorization: `Bearer ${opsToken}`, body: { amount: 100_000, reason: 'duplicate' } })
    expect(wrapper.get('[data-testid="refund-outcome"]').text()).toBe(`Refund re_01JNEW of 100,000 IDR: pending. Key ${call!.key}.`)
    await vi.waitFor(() => expect(cellsOf(wrapper)).toHaveLength(3))
    expect(cellsOf(wrapper)[2]).toEqual(['re_01JNEW', '100,000 IDR', 'pending', 'api', 'duplicate', '2026-12-01 10:10:00.000Z'])
    expect(factsOf(wrapper)).toMatchObject({ Refunded: '50,000 IDR · 100,000 IDR pending', Remaining: '150,000 IDR' })
    expect((wrapper.get('[data-testid="refund-amount"]').element as HTMLInputElement).value).toBe('150000')
    expect(sessionStorage.getItem(`idempotent-intent:ops-refund:${orderId}`)).toBeNull()

    // Another refund is another intent: another key.
    await refund(wrapper, 10_000, '')
    await vi.waitFor(() => expect(wrapper.get('[data-testid="refund-outcome"]').text()).toContain('re_01JNEXT'))
    expect(server.calls[1]!.key).not.toBe(call!.key)
    expect(server.calls[1]!.body).toEqual({ amount: 10_000 })
  })

  it('no answer (503), then the retry: the same key, once refunded', async () => {
    server = serve([
      event => problem(event, 503, { type: '/problems/service-unavailable', detail: 'Retry with the same key.' }),
      (event, call) => {
        setResponseStatus(event, 201)
        return { ...settledRefund, id: 're_01JRETRY', amount: 250_000, status: 'pending', reason: null, idempotency: { key: call.key, replayed: false } }
      },
    ])
    const { wrapper } = await mountOpened()
    await refund(wrapper)

    await vi.waitFor(() => expect(wrapper.find('[data-testid="refund-outcome"]').exists()).toBe(true), { timeout: 3000 })
    expect(server.calls.map(call => call.body)).toEqual([{ amount: 250_000 }, { amount: 250_000 }])
    expect(server.calls[1]!.key).toBe(server.calls[0]!.key)
    expect(wrapper.get('[data-testid="refund-outcome"]').text()).toBe(`Refund re_01JRETRY of 250,000 IDR: pending. Key ${server.calls[0]!.key}.`)
  })

  it('409 refund-exceeds-remaining: its detail is shown; the answer was final, so the next refund is a new key', async () => {
    // The server's own words: someone refunded 200 000 of the 300 000 meanwhile.
    const detail = exceedsRemainingDetail({ id: orderId, status: 'partially_refunded', amount: 300_000, currency: 'IDR' }, 200_000, 250_000)
    server = serve([
      (event, call) => problem(event, 409, { type: '/problems/refund-exceeds-remaining', title: 'Refund exceeds what remains', detail, remaining: 100_000, idempotency: { key: call.key, replayed: false } }),
      (event, call) => {
        setResponseStatus(event, 201)
        return { ...settledRefund, id: 're_01JSECOND', amount: 100_000, status: 'pending', idempotency: { key: call.key, replayed: false } }
      },
    ])
    const { wrapper } = await mountOpened()
    await refund(wrapper)

    await vi.waitFor(() => expect(wrapper.find('[data-testid="refund-error"]').exists()).toBe(true))
    expect(wrapper.get('[data-testid="refund-error"]').text()).toBe(`Not refunded: ${detail} (HTTP 409)`)
    expect(wrapper.get('[data-testid="refund-error"]').attributes('role')).toBe('alert')
    expect(wrapper.get('[data-testid="refund-amount"]').attributes('aria-invalid')).toBe('true')
    expect(wrapper.get('[data-testid="refund-submit"]').text()).toBe('Refund')

    await refund(wrapper, 100_000)
    await vi.waitFor(() => expect(server!.calls).toHaveLength(2))
    expect(server.calls[1]!.key).not.toBe(server.calls[0]!.key)
  })

  it('400 validation-failed: its detail is shown; nothing was stored, so the corrected refund keeps the key', async () => {
    const detail = 'The refund body is invalid: amount: Too small: expected number to be >0.'
    server = serve([
      event => problem(event, 400, { type: '/problems/validation-failed', title: 'Validation failed', detail, errors: [{ path: 'amount', message: 'Too small' }] }),
      (event, call) => {
        setResponseStatus(event, 201)
        return { ...settledRefund, id: 're_01JFIXED', amount: 1_000, status: 'pending', idempotency: { key: call.key, replayed: false } }
      },
    ])
    const { wrapper } = await mountOpened()
    await refund(wrapper, 0)

    await vi.waitFor(() => expect(wrapper.find('[data-testid="refund-error"]').exists()).toBe(true))
    expect(wrapper.get('[data-testid="refund-error"]').text()).toBe(`Not refunded: ${detail} (HTTP 400)`)
    expect(server.calls[0]!.body).toEqual({ amount: 0 })
    const key = server.calls[0]!.key!
    expect(wrapper.get('[data-testid="refund-submit"]').text()).toBe('Send the refund again')
    expect(wrapper.get('[data-testid="refund-key"]').text()).toBe(`Sent under Idempotency-Key ${key} without a final answer yet: sending again reuses it, so it is refunded at most once.`)

    await refund(wrapper, 1_000)
    await vi.waitFor(() => expect(wrapper.find('[data-testid="refund-outcome"]').exists()).toBe(true))
    expect(server.calls.map(call => call.key)).toEqual([key, key])
  })

  it('an empty amount is refused in the form (it would mean everything), and nothing is sent', async () => {
    server = serve([])
    const { wrapper } = await mountOpened()
    await wrapper.get('[data-testid="refund-amount"]').setValue('')
    await wrapper.get('[data-testid="refund-form"]').trigger('submit')

    expect(wrapper.get('[data-testid="refund-error"]').text()).toBe('Enter the amount to refund, in IDR (250,000 IDR remain).')
    expect(server.calls).toEqual([])
  })

  it('a refund left without an answer comes back after a reload, as it was sent, with its key', async () => {
    sessionStorage.setItem(`idempotent-intent:ops-refund:${orderId}`, JSON.stringify({ key: 'key-from-before', body: { amount: 40_000, reason: 'fraudulent' }, startedAt: Date.now() }))
    server = serve([(event, call) => {
      setResponseStatus(event, 201)
      return { ...settledRefund, id: 're_01JAGAIN', amount: 40_000, reason: 'fraudulent', idempotency: { key: call.key, replayed: true } }
    }])
    const { wrapper } = await mountOpened()

    expect((wrapper.get('[data-testid="refund-amount"]').element as HTMLInputElement).value).toBe('40000')
    expect((wrapper.get('[data-testid="refund-reason"]').element as HTMLSelectElement).value).toBe('fraudulent')
    expect(wrapper.get('[data-testid="refund-submit"]').text()).toBe('Send the refund again')
    await refund(wrapper)

    await vi.waitFor(() => expect(wrapper.find('[data-testid="refund-outcome"]').exists()).toBe(true))
    expect(server.calls).toEqual([{ key: 'key-from-before', authorization: `Bearer ${opsToken}`, body: { amount: 40_000, reason: 'fraudulent' } }])
  })

  it('an order chip elsewhere in the console opens the order here', async () => {
    server = serve([])
    const { wrapper, context } = await mountPanel()
    context().openOrder(orderId)

    await vi.waitFor(() => expect(wrapper.find('[data-testid="order-heading"]').exists()).toBe(true))
    expect((wrapper.get('[data-testid="order-lookup"]').element as HTMLInputElement).value).toBe(orderId)
  })
})
