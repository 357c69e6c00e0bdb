import { mountSuspended } from '@nuxt/test-utils/runtime'
import { describe, expect, it, vi } from 'vitest'
import IdChips from '~/components/ops/IdChips.vue'
import { consoleHost } from './ops-context'

describe('IdChips: the one way the console shows ids', () => {
  it('shows each id as a named chip, searchable ones first and as buttons, other ids after them under their own names', async () => {
    const { Host } = consoleHost(IdChips, {
      ids: { jobId: 'job_01J', requestId: 'req_01J', key: '5f0c-key', scope: 'tenant:ten_1', orderId: 'ord_01J', cartId: 'cart_9' },
    })
    const wrapper = await mountSuspended(Host)

    const chips = wrapper.findAll('[data-testid="id-chip"]')
    expect(chips.map(chip => [chip.attributes('data-name'), chip.attributes('data-value')])).toEqual([
      ['order', 'ord_01J'],
      ['key', '5f0c-key'],
      ['request', 'req_01J'],
      ['scope', 'tenant:ten_1'],
      ['job', 'job_01J'],
      ['cartId', 'cart_9'],
    ])
    expect(chips.map(chip => chip.find('.chip-search').exists())).toEqual([true, true, true, false, false, false])
    expect(wrapper.get('[data-testid="chip-orderId"]').text()).toBe('order ord_01J')
    expect(wrapper.get('[data-testid="chip-orderId"]').attributes('aria-label')).toBe('Show evidence for order ord_01J')
    expect(chips.map(chip => chip.get('[data-testid="chip-copy"]').attributes('aria-label'))).toEqual([
      'Copy order ord_01J',
      'Copy key 5f0c-key',
      'Copy request req_01J',
      'Copy scope tenant:ten_1',
      'Copy job job_01J',
      'Copy cartId cart_9',
    ])
  })

  it('a list of id sets is one row of chips', async () => {
    const { Host } = consoleHost(IdChips, { ids: [{ orderId: 'ord_A' }, { orderId: 'ord_B' }, { resource: 'tenant:ten_1' }] })
    const wrapper = await mountSuspended(Host)
    expect(wrapper.findAll('ul.chips')).toHaveLength(1)
    expect(wrapper.findAll('[data-testid="id-chip"]').map(chip => `${chip.get('.chip-name').text()} ${chip.get('.chip-value').text()}`)).toEqual(['order ord_A', 'order ord_B', 'resource tenant:ten_1'])
  })

  it('renders nothing for no ids', async () => {
    const { Host } = consoleHost(IdChips, { ids: { orderId: undefined, key: '' } })
    const wrapper = await mountSuspended(Host)
    expect(wrapper.find('ul').exists()).toBe(false)
  })

  it('a searchable chip asks the console for that evidence; a key keeps its scope', async () => {
    const { Host, context } = consoleHost(IdChips, { ids: { key: '5f0c-key', scope: 'provider:standard', orderId: 'ord_01J' } })
    const wrapper = await mountSuspended(Host)

    await wrapper.get('[data-testid="chip-key"]').trigger('click')
    expect(context().evidenceRequest.value).toEqual({ by: 'key', value: '5f0c-key', scope: 'provider:standard', seq: 1 })
    await wrapper.get('[data-testid="chip-orderId"]').trigger('click')
    expect(context().evidenceRequest.value).toEqual({ by: 'orderId', value: 'ord_01J', scope: undefined, seq: 2 })
  })

  it('an order chip also opens the order (its refunds, a refund); no other chip does', async () => {
    const { Host, context } = consoleHost(IdChips, { ids: { orderId: 'ord_01J', key: '5f0c-key', jobId: 'job_01J' } })
    const wrapper = await mountSuspended(Host)

    const open = wrapper.findAll('[data-testid="chip-open-order"]')
    expect(open.map(button => [button.text(), button.attributes('aria-label')])).toEqual([['open', 'Open order ord_01J']])
    await open[0]!.trigger('click')
    expect(context().orderRequest.value).toEqual({ orderId: 'ord_01J', seq: 1 })
    expect(context().evidenceRequest.value).toBeUndefined()
  })

  it('copy puts exactly the id on the clipboard and says so on that chip only', async () => {
    await navigator.clipboard.writeText('before')
    const { Host } = consoleHost(IdChips, { ids: { orderId: 'ord_01J', jobId: 'job_01J' } })
    const wrapper = await mountSuspended(Host)

    const [order, job] = wrapper.findAll('[data-testid="chip-copy"]')
    expect(job!.text()).toBe('')
    expect(job!.find('svg').exists()).toBe(true)
    await job!.trigger('click')
    await vi.waitFor(() => expect(job!.text()).toBe('copied'))
    expect(await navigator.clipboard.readText()).toBe('job_01J')
    expect(order!.text()).toBe('')
    expect(order!.find('svg').exists()).toBe(true)
  })
})
