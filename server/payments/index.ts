import { type AppConfig, useConfig } from '../config'
import { useDatabaseHandle } from '../db'
import type { Database } from '@idempotent-checkout/db-kit'
import { createMockpayProvider } from './mockpay/provider'
import { createMidtransProvider } from './midtrans'
import { createStripeProvider } from './stripe'
import { metrics } from '../observability/metrics'
import { PaymentRefused, type PaymentProvider, ProviderUnavailable } from './types'

/** The provider PAYMENT_PROVIDER names: the only one orders ask, each call timed and counted. */
export function createPaymentProvider(config: AppConfig, db: Database): PaymentProvider {
  switch (config.PAYMENT_PROVIDER) {
    case 'stripe': return measured(createStripeProvider(config))
    case 'midtrans': return measured(createMidtransProvider(config))
    case 'mockpay': return measured(createMockpayProvider(db))
  }
}

const resultOf = (error: unknown) => error instanceof ProviderUnavailable ? 'unavailable' : error instanceof PaymentRefused ? 'refused' : 'error'

function measured(provider: PaymentProvider): PaymentProvider {
  const timed = <T>(operation: 'create' | 'read' | 'refund' | 'cancel', call: () => Promise<T>): Promise<T> => {
    const started = performance.now()
    const observe = (result: string) => {
      metrics.paymentProviderCalls.observe({ provider: provider.name, operation, result }, (performance.now() - started) / 1000)
      metrics.paymentProviderFailing.set({ provider: provider.name }, result === 'unavailable' ? 1 : 0)
    }
    return call().then((value) => {
      observe('ok')
      return value
    }, (error: unknown) => {
      observe(resultOf(error))
      throw error
    })
  }
  return {
    name: provider.name,
    createPayment: (request, signal) => timed('create', () => provider.createPayment(request, signal)),
    readPayment: (payment, signal) => timed('read', () => provider.readPayment(payment, signal)),
    refundPayment: (request, signal) => timed('refund', () => provider.refundPayment(request, signal)),
    cancelPayment: (payment, signal) => timed('cancel', () => provider.cancelPayment(payment, signal)),
    readRefund: (refund, signal) => timed('read', () => provider.readRefund(refund, signal)),
  }
}

export { paymentIdempotencyKey, refundIdempotencyKey } from './keys'

let provider: PaymentProvider | undefined

/** This process's provider client (the app's; the worker builds its own from the same config). */
export function usePaymentProvider(): PaymentProvider {
  provider ??= createPaymentProvider(useConfig(), useDatabaseHandle().db)
  return provider
}
