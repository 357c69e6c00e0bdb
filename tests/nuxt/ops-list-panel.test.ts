import { mountSuspended } from '@nuxt/test-utils/runtime'
import { describe, expect, it } from 'vitest'
import { h } from 'vue'
import ListPanel from '~/components/ops/ListPanel.vue'

interface Row { id: string }

const base = {
  name: 'things',
  title: 'Things',
  description: 'Every thing, newest first.',
  empty: 'No things match.',
  noun: ['thing', 'things'] as [string, string],
}

function mountPanel(props: { items: Row[], loading: boolean, loaded: boolean, error?: string }) {
  return mountSuspended(ListPanel, {
    props: { ...base, ...props },
    slots: {
      filters: () => h('input', { 'data-testid': 'things-filter' }),
      default: ({ items }: { items: unknown[] }) => h('ul', { 'data-testid': 'things-rows' }, (items as Row[]).map(row => h('li', row.id))),
    },
  })
}

describe('ListPanel: one listing\'s filters, loading, error, empty state and rows', () => {
  it('shows the rows through its slot, counted for screen readers, with the filters in one form', async () => {
    const wrapper = await mountPanel({ items: [{ id: 'a' }, { id: 'b' }], loading: false, loaded: true })

    expect(wrapper.get('h2').text()).toBe('Things')
    expect(wrapper.get('section').attributes('id')).toBe('things')
    expect(wrapper.findAll('[data-testid="things-rows"] li').map(item => item.text())).toEqual(['a', 'b'])
    expect(wrapper.get('[data-testid="things-count"]').text()).toBe('2 things.')
    expect(wrapper.get('[data-testid="things-count"]').attributes('role')).toBe('status')
    expect(wrapper.get('form').find('[data-testid="things-filter"]').exists()).toBe(true)
    expect(wrapper.get('[data-testid="things-refresh"]').text()).toBe('Refresh')
    expect(wrapper.find('[data-testid="things-empty"]').exists()).toBe(false)
    expect(wrapper.find('[data-testid="things-error"]').exists()).toBe(false)
  })

  it('says the list is empty when it loaded no rows, and counts one row in the singular', async () => {
    const empty = await mountPanel({ items: [], loading: false, loaded: true })
    expect(empty.get('[data-testid="things-empty"]').text()).toBe('No things match.')
    expect(empty.find('[data-testid="things-rows"]').exists()).toBe(false)
    expect(empty.get('[data-testid="things-count"]').text()).toBe('0 things.')

    const one = await mountPanel({ items: [{ id: 'a' }], loading: false, loaded: true })
    expect(one.get('[data-testid="things-count"]').text()).toBe('1 thing.')
  })

  it('shows the error as an alert instead of the rows', async () => {
    const wrapper = await mountPanel({ items: [{ id: 'a' }], loading: false, loaded: true, error: 'The server could not be reached: connection refused' })
    const error = wrapper.get('[data-testid="things-error"]')
    expect(error.text()).toBe('The server could not be reached: connection refused')
    expect(error.attributes('role')).toBe('alert')
    expect(wrapper.find('[data-testid="things-rows"]').exists()).toBe(false)
    expect(wrapper.find('[data-testid="things-empty"]').exists()).toBe(false)
  })

  it('while the first load runs: a loading line and a busy button, no empty state', async () => {
    const wrapper = await mountPanel({ items: [], loading: true, loaded: false })
    expect(wrapper.get('[data-testid="things-loading"]').text()).toBe('Loading things…')
    expect(wrapper.get('[data-testid="things-refresh"]').text()).toBe('Loading…')
    expect(wrapper.get('[data-testid="things-refresh"]').attributes('disabled')).toBe('')
    expect(wrapper.find('[data-testid="things-empty"]').exists()).toBe(false)
  })

  it('asks for a reload when its form is submitted', async () => {
    const wrapper = await mountPanel({ items: [], loading: false, loaded: true })
    await wrapper.get('form').trigger('submit')
    expect(wrapper.emitted('refresh')).toEqual([[]])
  })
})
