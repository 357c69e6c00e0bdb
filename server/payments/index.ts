import { type AppConfig, useConfig } from '../config'
import { useDatabaseHandle } from '../db'
import type { Database } from '../db/client'
import { createMockpayProvider } from '../mockpay/provider'
import { createMidtransProvider } from './midtrans'
import { createStripeProvider } from './stripe'
import type { PaymentProvider } from './types'

/** The provider PAYMENT_PROVIDER names: the only one orders ask. */
export function createPaymentProvider(config: AppConfig, db: Database): PaymentProvider {
  switch (config.PAYMENT_PROVIDER) {
    case 'stripe': return createStripeProvider(config)
    case 'midtrans': return createMidtransProvider(config)
    case 'mockpay': return createMockpayProvider(db)
  }
}

/** The key the provider dedupes the payment's creation by: one per order, whichever run asks. */
export const paymentIdempotencyKey = (orderId: string) => `order:${orderId}:payment`

let provider: PaymentProvider | undefined

/** This process's provider client (the app's; the worker builds its own from the same config). */
export function usePaymentProvider(): PaymentProvider {
  provider ??= createPaymentProvider(useConfig(), useDatabaseHandle().db)
  return provider
}
