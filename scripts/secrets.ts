/**
 * `npm run secrets`: fresh secrets in the formats the configuration checks, as env lines ready to
 * paste into a deployment's environment or env file, and where the provider keys come from (they
 * cannot be generated: the provider issues them). Reads no environment and writes no file.
 */
import { generateSecret, type GeneratableSecretName, signingKeyOf } from '../server/config'

const generated: Array<[GeneratableSecretName, string]> = [
  ['OPS_TOKEN', 'Operators\' bearer token for /api/ops and /api/metrics (required with DATABASE_URL).'],
  ['WEBHOOK_STANDARD_SECRET', 'Standard Webhooks signing secret, for a sender of /api/webhooks/standard (give it the same one); unset, that endpoint is off.'],
  ['MOCKPAY_WEBHOOK_SECRET', 'mockpay\'s own signing secret, only while mockpay is on (demo and tests).'],
  ['SESSION_PASSWORD', 'Seals the checkout session cookie, only with CHECKOUT_DEMO_ENABLED=true.'],
]

const values = new Map(generated.map(([name]) => [name, generateSecret(name)]))
// Two keys from 24 random bytes each are never the same in practice; the configuration refuses it, so check anyway.
while (signingKeyOf(values.get('MOCKPAY_WEBHOOK_SECRET')!)!.equals(signingKeyOf(values.get('WEBHOOK_STANDARD_SECRET')!)!)) {
  values.set('MOCKPAY_WEBHOOK_SECRET', generateSecret('MOCKPAY_WEBHOOK_SECRET'))
}

const lines = [
  `# Fresh secrets (${new Date().toISOString()}). The same values on every instance and standalone worker; never commit them.`,
  ...generated.flatMap(([name, note]) => [`# ${note}`, `${name}=${values.get(name)}`]),
  '',
  '# Issued by the payment providers, never generated: copy them from their dashboards.',
  '# STRIPE_SECRET_KEY=sk_live_…  (Stripe Dashboard → Developers → API keys; sk_test_… in test mode)',
  '# WEBHOOK_STRIPE_SECRET=whsec_…  (Stripe Dashboard → Developers → Webhooks → the endpoint https://<your host>/api/webhooks/stripe → Signing secret; `stripe listen` prints one locally)',
  '# MIDTRANS_SERVER_KEY=…  (Midtrans Dashboard → Settings → Access Keys → Server Key; SB-Mid-server-… in the sandbox)',
]
console.log(lines.join('\n'))
