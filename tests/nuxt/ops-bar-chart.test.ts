import { mountSuspended } from '@nuxt/test-utils/runtime'
import { describe, expect, it } from 'vitest'
import BarChart from '~/components/ops/BarChart.vue'

describe('BarChart: counts as bars of the live outcomes panel', () => {
  it('names each bar by its data attribute, shows its number, and scales it to the largest', async () => {
    const wrapper = await mountSuspended(BarChart, {
      props: {
        caption: 'Webhook deliveries by result',
        bars: [{ label: 'accepted', value: 8, tone: 'ok' }, { label: 'signature_invalid', value: 2, tone: 'bad' }, { label: 'duplicate', value: 0, tone: 'info' }],
        testid: 'webhook-bars',
        labelAttribute: 'result',
      },
    })
    expect(wrapper.get('figcaption').text()).toBe('Webhook deliveries by result')
    const bars = wrapper.get('[data-testid="webhook-bars"]').findAll('li')
    expect(bars.map(bar => [bar.attributes('data-result'), bar.get('.bar-label').text(), bar.get('[data-testid="bar-value"]').text()])).toEqual([
      ['accepted', 'accepted', '8'],
      ['signature_invalid', 'signature_invalid', '2'],
      ['duplicate', 'duplicate', '0'],
    ])
    expect(bars.map(bar => bar.get('.fill').attributes('style'))).toEqual(['width: 100%;', 'width: 25%;', 'width: 0%;'])
    expect(bars.map(bar => bar.get('.fill').classes())).toEqual([['fill', 'tone-ok'], ['fill', 'tone-bad'], ['fill', 'tone-info']])
  })

  it('all bars at zero stay empty instead of dividing by zero', async () => {
    const wrapper = await mountSuspended(BarChart, {
      props: { caption: 'Idempotent requests by outcome · 0 in all', bars: [{ label: 'miss', value: 0, tone: 'ok' }], testid: 'outcome-bars', labelAttribute: 'outcome' },
    })
    expect(wrapper.get('[data-outcome="miss"] .fill').attributes('style')).toBe('width: 0%;')
  })
})
