/**
 * `npm run stand-in -- stripe|midtrans [--port N] [--webhook-url URL]`: the Stripe or Midtrans
 * stand-in the tests use, on a fixed port, to try the real payment adapters on one laptop (local
 * runs and tests only, never a deployment). Prints the environment that points the app at it
 * (`npm run dev`, or a built server's embedded `npm start`) and the controls that play the shopper
 * (pay, decline, refund in the dashboard); with --webhook-url each change is also sent to the app
 * as the provider's signed webhook. Ctrl-C stops it; nothing is kept.
 */
import { parseArgs } from 'node:util'
import { type ConfigVariable, settingProblem } from '../server/config'
import { MIDTRANS_CONTROLS, startMidtransApi } from './stand-ins/midtrans'
import { STRIPE_CONTROLS, startStripeApi } from './stand-ins/stripe'

const DEFAULT_PORTS = { stripe: 12111, midtrans: 12112 }
/** Test-mode keys of the stand-ins alone: fixed, so the app's environment stays valid across restarts. */
const DEFAULT_STRIPE_SECRET_KEY = 'sk_test_standin_local_development'
const DEFAULT_STRIPE_WEBHOOK_SECRET = 'whsec_standin_local_development'
const DEFAULT_MIDTRANS_SERVER_KEY = 'SB-Mid-server-standin-local-development'

const USAGE = `Usage: npm run stand-in -- stripe|midtrans [options]

  --port N              where it listens on 127.0.0.1 (Stripe ${DEFAULT_PORTS.stripe}, Midtrans ${DEFAULT_PORTS.midtrans}; 0: any free port)
  --webhook-url URL     send each change there as the provider's signed webhook
                        (the app's http://127.0.0.1:3000/api/webhooks/stripe or …/midtrans)
  --secret-key KEY      Stripe: the secret key it accepts (default ${DEFAULT_STRIPE_SECRET_KEY})
  --webhook-secret KEY  Stripe: the endpoint secret events are signed with (default ${DEFAULT_STRIPE_WEBHOOK_SECRET})
  --server-key KEY      Midtrans: the server key it accepts and signs notifications with (default ${DEFAULT_MIDTRANS_SERVER_KEY})
`

function fail(message: string): never {
  console.error(`${message}\n\n${USAGE}`)
  process.exit(1)
}

let parsed
try {
  parsed = parseArgs({
    allowPositionals: true,
    options: {
      'port': { type: 'string' },
      'webhook-url': { type: 'string' },
      'secret-key': { type: 'string', default: DEFAULT_STRIPE_SECRET_KEY },
      'webhook-secret': { type: 'string', default: DEFAULT_STRIPE_WEBHOOK_SECRET },
      'server-key': { type: 'string', default: DEFAULT_MIDTRANS_SERVER_KEY },
      'help': { type: 'boolean', short: 'h' },
    },
  })
}
catch (error) {
  fail(error instanceof Error ? error.message : String(error))
}
const { values, positionals } = parsed
if (values.help) {
  console.log(USAGE)
  process.exit(0)
}
const [provider, ...extra] = positionals
if (provider !== 'stripe' && provider !== 'midtrans') fail(provider ? `Unknown provider "${provider}": stripe or midtrans.` : 'Which provider: stripe or midtrans?')
if (extra.length > 0) fail(`Unexpected arguments: ${extra.join(' ')}`)
const port = values.port === undefined ? DEFAULT_PORTS[provider] : Number(values.port)
if (!Number.isInteger(port) || port < 0 || port > 65_535) fail(`--port must be a port number, not ${values.port}`)
const webhookUrl = values['webhook-url']
if (webhookUrl !== undefined && !URL.canParse(webhookUrl)) fail(`--webhook-url must be a URL, not ${webhookUrl}`)

/** The app's own check of each value printed for it: a key it would refuse is refused here first. */
function appSetting(name: ConfigVariable, value: string): string {
  const problem = settingProblem(name, value)
  if (problem) fail(`${name}=${value}: ${problem}`)
  return `${name}=${value}`
}

let stand: { url: string, close: () => Promise<void> }
let env: string[]
let controls: string[]
try {
  if (provider === 'stripe') {
    const secretKey = values['secret-key']
    const webhookSecret = values['webhook-secret']
    const keys = [appSetting('STRIPE_SECRET_KEY', secretKey), appSetting('WEBHOOK_STRIPE_SECRET', webhookSecret)]
    stand = await startStripeApi({ secretKey, port, ...(webhookUrl !== undefined && { webhook: { url: webhookUrl, secret: webhookSecret } }) })
    env = ['PAYMENT_PROVIDER=stripe', appSetting('STRIPE_API_BASE', stand.url), ...keys]
    controls = STRIPE_CONTROLS
  }
  else {
    const serverKey = values['server-key']
    const key = appSetting('MIDTRANS_SERVER_KEY', serverKey)
    stand = await startMidtransApi({ serverKey, port, ...(webhookUrl !== undefined && { webhookUrl }) })
    env = ['PAYMENT_PROVIDER=midtrans', appSetting('MIDTRANS_API_BASE', stand.url), key]
    controls = MIDTRANS_CONTROLS
  }
}
catch (error) {
  if ((error as NodeJS.ErrnoException).code === 'EADDRINUSE') fail(`Port ${port} is taken (another stand-in still running?): choose another with --port.`)
  throw error
}

const name = provider === 'stripe' ? 'Stripe' : 'Midtrans'
console.log([
  `${name} stand-in listening on ${stand.url}`,
  '',
  'Start the app against it, in another terminal:',
  `  ${env.join(' ')} npm run dev`,
  // The same settings suit a built server run embedded; with DATABASE_URL it is a deployment, which needs more.
  'or a built server (npm run build first), without DATABASE_URL (with it, a deployment\'s settings such as OPS_TOKEN are required too):',
  `  ${env.join(' ')} npm start`,
  '',
  webhookUrl === undefined
    ? `Webhooks: off. With --webhook-url http://127.0.0.1:3000/api/webhooks/${provider}, each change reaches the app as ${name} would send it.`
    : `Webhooks: each change is sent, signed, to ${webhookUrl}`,
  '',
  `Controls, as the shopper or the dashboard, at ${stand.url} (parameters such as amount=… as a query or a JSON body):`,
  ...controls.map(line => `  ${line}`),
  '',
  'Ctrl-C stops it; nothing is kept.',
].join('\n'))

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void stand.close().then(() => process.exit(0))
  })
}
