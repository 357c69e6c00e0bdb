import type { AppConfig } from '../config'
import { problem } from '../problems'
import { midtransProvider } from './providers/midtrans'
import { standardProvider } from './providers/standard'
import { stripeProvider } from './providers/stripe'
import type { WebhookProvider } from './types'

export interface RegisteredProvider extends WebhookProvider {
  secret: (config: AppConfig) => string
}

const providers: Record<string, RegisteredProvider> = {
  standard: { ...standardProvider, secret: config => config.WEBHOOK_STANDARD_SECRET },
  stripe: { ...stripeProvider, secret: config => config.WEBHOOK_STRIPE_SECRET },
  midtrans: { ...midtransProvider, secret: config => config.MIDTRANS_SERVER_KEY },
}

export const webhookProviderNames = Object.keys(providers)

/** The provider named in the URL, or 404. */
export function requireWebhookProvider(name: string | undefined): RegisteredProvider {
  const provider = name !== undefined && Object.hasOwn(providers, name) ? providers[name] : undefined
  if (!provider) throw problem('not-found', `No webhook provider "${name}". Point the provider at /api/webhooks/{${webhookProviderNames.join('|')}}.`)
  return provider
}
