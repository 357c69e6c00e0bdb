import { idempotencyReady } from 'nuxt-idempotency/server'
import { useConfig } from '../config'
import { databaseReady } from '../db'
import { appMaintenance } from './maintenance'

let services: ReturnType<typeof appMaintenance> | undefined

/**
 * This app process's maintenance services (the scheduler's, and the ops API's to run one now),
 * on the database and locks the idempotency layer was handed. Nitro only: `npm run worker` builds
 * its own from storeMaintenance.
 */
export function useAppMaintenance(): ReturnType<typeof appMaintenance> {
  services ??= appMaintenance(
    useConfig(),
    async () => ({ handle: await databaseReady(), locks: (await idempotencyReady()).locks }),
    idempotencyReady,
  )
  return services
}
