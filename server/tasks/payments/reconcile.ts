import { useConfig } from '../../config'
import { databaseReady } from '../../db'
import { idempotencyReady } from 'nuxt-idempotency/server'
import { usePaymentProvider } from '../../payments'
import { reconcilePayments } from '../../payments/reconcile'

export default defineTask({
  meta: { name: 'payments:reconcile', description: 'Ask the payment provider about orders left awaiting payment, and apply what no webhook reported' },
  async run() {
    const handle = await databaseReady()
    const config = useConfig()
    return {
      result: await reconcilePayments({
        handle,
        provider: usePaymentProvider(),
        idempotency: await idempotencyReady(),
        afterSeconds: config.PAYMENT_RECONCILE_AFTER_SECONDS,
        ttlSeconds: config.WEBHOOK_IDEMPOTENCY_TTL_SECONDS,
      }),
    }
  },
})
