import { type AppConfig, useConfig } from '../config'
import { problem } from '../problems'
import { midtransProvider } from './providers/midtrans'
import { standardProvider } from './providers/standard'
import { stripeProvider } from './providers/stripe'
import type { WebhookProvider } from './types'

export interface RegisteredProvider extends WebhookProvider {
  secret: (config: AppConfig) => string
  /** Absent: always served. */
  enabled?: (config: AppConfig) => boolean
}

const providers: Record<string, RegisteredProvider> = {
  standard: { ...standardProvider, secret: config => config.WEBHOOK_STANDARD_SECRET },
  stripe: { ...stripeProvider, secret: config => config.WEBHOOK_STRIPE_SECRET },
  midtrans: { ...midtransProvider, secret: config => config.MIDTRANS_SERVER_KEY },
  // The simulated provider: the Standard Webhooks scheme under its own name (events, records and
  // metrics apart from the real provider's) and its own key, so that what anyone can make mockpay
  // send is never accepted at /api/webhooks/standard.
  mockpay: {
    ...standardProvider,
    name: 'mockpay',
    enabled: config => config.MOCKPAY_ENABLED,
    secret: (config) => {
      if (!config.MOCKPAY_WEBHOOK_SECRET) throw new Error('MOCKPAY_WEBHOOK_SECRET is unset although mockpay is enabled')
      return config.MOCKPAY_WEBHOOK_SECRET
    },
  },
}

export const webhookProviderNames = Object.keys(providers)

/** The provider named in the URL, or 404 (mockpay's too while MOCKPAY_ENABLED is off). */
export function requireWebhookProvider(name: string | undefined): RegisteredProvider {
  const config = useConfig()
  const provider = name !== undefined && Object.hasOwn(providers, name) ? providers[name] : undefined
  if (!provider || provider.enabled?.(config) === false) {
    const served = webhookProviderNames.filter(served => providers[served]!.enabled?.(config) !== false)
    throw problem('not-found', `No webhook provider "${name}" here. Point the provider at /api/webhooks/{${served.join('|')}}.`)
  }
  return provider
}
