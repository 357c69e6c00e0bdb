import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { parseConfig, settingProblem, signingKeyOf, type ConfigVariable } from '../../server/config/index'

/** `npm run secrets`, as the package script runs it (jiti), with nothing of this environment. */
const projectRoot = fileURLToPath(new URL('../..', import.meta.url))
async function runSecrets(): Promise<string> {
  const { stdout, stderr } = await promisify(execFile)(process.execPath, ['node_modules/.bin/jiti', 'scripts/secrets.ts'], {
    cwd: projectRoot,
    env: { PATH: process.env.PATH },
    timeout: 30_000,
  })
  expect(stderr).toBe('')
  return stdout
}

/** The output as an env file reads it: `NAME=value` lines; blank lines and `#` comments skipped. Anything else fails. */
function envLines(text: string): Record<string, string> {
  const env: Record<string, string> = {}
  for (const line of text.split('\n')) {
    if (line.trim() === '' || line.startsWith('#')) continue
    const match = /^([A-Z][A-Z0-9_]*)=(\S+)$/.exec(line)
    expect(match, `not an env line: ${JSON.stringify(line)}`).not.toBeNull()
    expect(env[match![1]!], `${match![1]} twice`).toBeUndefined()
    env[match![1]!] = match![2]!
  }
  return env
}

describe('npm run secrets', () => {
  it('prints fresh secrets as env lines, each in its format and valid for the configuration', { timeout: 60_000 }, async () => {
    const [first, second] = await Promise.all([runSecrets(), runSecrets()])
    const env = envLines(first)
    expect(Object.keys(env)).toEqual(['OPS_TOKEN', 'WEBHOOK_STANDARD_SECRET', 'MOCKPAY_WEBHOOK_SECRET', 'SESSION_PASSWORD'])
    expect(env.OPS_TOKEN).toMatch(/^ops_[\w-]{32}$/)
    expect(env.WEBHOOK_STANDARD_SECRET).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/)
    expect(env.MOCKPAY_WEBHOOK_SECRET).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/)
    expect(signingKeyOf(env.WEBHOOK_STANDARD_SECRET!)).toHaveLength(24)
    expect(signingKeyOf(env.MOCKPAY_WEBHOOK_SECRET!)).not.toEqual(signingKeyOf(env.WEBHOOK_STANDARD_SECRET!))
    expect(env.SESSION_PASSWORD!.length).toBeGreaterThanOrEqual(32)
    for (const [name, value] of Object.entries(env)) expect(settingProblem(name as ConfigVariable, value), name).toBeUndefined()

    // A deployment that turns on everything they are for starts on them as printed.
    const config = parseConfig({ DATABASE_URL: 'postgres://root@127.0.0.1:5432/checkout', PAYMENT_PROVIDER: 'mockpay', CHECKOUT_DEMO_ENABLED: 'true', ...env })
    expect(config).toMatchObject({ ...env, generatedSecrets: [] })
    expect(config.webhookProviders).toEqual(['standard', 'mockpay'])

    // Fresh every time.
    const again = envLines(second)
    for (const name of Object.keys(env)) expect(again[name], name).not.toBe(env[name])
  })

  it('says where the provider keys come from, as comments only', async () => {
    const output = await runSecrets()
    for (const name of ['STRIPE_SECRET_KEY', 'WEBHOOK_STRIPE_SECRET', 'MIDTRANS_SERVER_KEY']) {
      expect(output).toMatch(new RegExp(`^# ${name}=\\S+ {2}\\(.*Dashboard`, 'm'))
      expect(envLines(output)[name]).toBeUndefined()
    }
  })
})
