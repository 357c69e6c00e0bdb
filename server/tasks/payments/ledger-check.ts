import { useConfig } from '../../config'
import { databaseReady } from '../../db'
import { idempotencyReady } from 'nuxt-idempotency/server'
import { runLedgerCheck } from '../../ledger/check'
import { useLedgerReader } from '../../ledger/providers'

export default defineTask({
  meta: { name: 'payments:ledger-check', description: 'Compare the ledgers of orders whose money moved lately with the provider\'s, heal what is safe to heal and record the rest as discrepancies' },
  async run() {
    const handle = await databaseReady()
    const config = useConfig()
    return {
      result: await runLedgerCheck({
        handle,
        locks: (await idempotencyReady()).locks,
        reader: useLedgerReader(),
        days: config.LEDGER_CHECK_DAYS,
        settleSeconds: config.LEDGER_CHECK_SETTLE_SECONDS,
      }),
    }
  },
})
