import { describe, expect, it } from 'vitest'
import { appMaintenance, storeMaintenance } from '../../../server/composition/maintenance'
import { parseConfig } from '../../../server/config/index'
import { runnableTasks } from '../../../server/ops/schemas'

const config = parseConfig({ JOB_MAINTENANCE_INTERVAL_MS: '15000' })
const unopened = () => Promise.reject(new Error('not opened in this test'))

describe('the maintenance services', () => {
  it('the app has one service for every task the ops API runs, and no other', () => {
    expect(appMaintenance(config, unopened, unopened).map(service => service.name).sort()).toEqual([...runnableTasks].sort())
  })

  it('their schedules, set in one place: rescue by JOB_MAINTENANCE_INTERVAL_MS, expiry every 30 s, retention staggered within each minute, cleanup on demand only', () => {
    const schedule = Object.fromEntries(appMaintenance(config, unopened, unopened).map(service => [service.name, [service.intervalMs, service.offsetMs ?? 0]]))
    expect(schedule).toEqual({
      'jobs:rescue': [15_000, 0],
      'orders:expire': [30_000, 0],
      'retention:records': [60_000, 0],
      'retention:jobs': [60_000, 20_000],
      'retention:request-log': [60_000, 40_000],
      'retention:cleanup': [undefined, 0],
      'payments:reconcile': [60_000, 0],
      'payments:ledger-check': [300_000, 30_000],
    })
  })

  it('`npm run worker` runs rescue, the expiry of unpaid orders and the three retention services, which need no payment provider', () => {
    expect(storeMaintenance(config, unopened).map(service => service.name)).toEqual(['jobs:rescue', 'orders:expire', 'retention:records', 'retention:jobs', 'retention:request-log'])
  })

  it('a run opens the database when it starts, not when the service is built: a failure to open is that run\'s', async () => {
    const [rescue] = storeMaintenance(config, unopened)
    await expect(rescue!.runOnce()).rejects.toThrow('not opened in this test')
  })
})
