import { useConfig, type WebhookProviderName, webhookProviderNames } from '../config'
import { problem } from '../problems'
import { midtransProvider } from './providers/midtrans'
import { standardProvider } from './providers/standard'
import { stripeProvider } from './providers/stripe'
import type { WebhookProvider } from './types'

/** A provider this deployment serves, with the secret its deliveries are verified with. */
export interface RegisteredProvider extends WebhookProvider {
  secret: string
}

const providers: Record<WebhookProviderName, WebhookProvider> = {
  standard: standardProvider,
  stripe: stripeProvider,
  midtrans: midtransProvider,
  // The simulated provider: the Standard Webhooks scheme under its own name (events, records and
  // metrics apart from the real provider's) and its own key, so that what anyone can make mockpay
  // send is never accepted at /api/webhooks/standard.
  mockpay: { ...standardProvider, name: 'mockpay' },
}

const isProviderName = (name: string | undefined): name is WebhookProviderName =>
  name !== undefined && (webhookProviderNames as readonly string[]).includes(name)

/** The 404's detail: the webhook URLs this deployment serves, spelled out (none while no provider's secret is set). */
export function unknownWebhookProviderDetail(name: string | undefined, served: readonly string[]): string {
  const urls = served.map(provider => `/api/webhooks/${provider}`)
  if (urls.length === 0) return `No webhook provider "${name}" here: none is on (a provider is on once its webhook secret is set).`
  const listed = urls.length === 1 ? urls[0] : `one of ${urls.slice(0, -1).join(', ')} or ${urls.at(-1)}`
  return `No webhook provider "${name}" here. Point the provider at ${listed}.`
}

/**
 * The provider named in the URL with its secret, or 404: an unknown provider, and a known one that
 * is off here because its secret is not set (nothing verifies with a made-up key) — Midtrans too
 * unless PAYMENT_PROVIDER=midtrans, whose worker confirms its notifications (server/config).
 */
export function requireWebhookProvider(name: string | undefined): RegisteredProvider {
  const config = useConfig()
  const secret = isProviderName(name) ? config.webhookSecrets[name] : undefined
  if (isProviderName(name) && secret !== undefined) return { ...providers[name], secret }
  throw problem('not-found', unknownWebhookProviderDetail(name, config.webhookProviders))
}
