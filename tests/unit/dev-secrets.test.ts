import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { ConfigError, parseConfig } from '../../server/config/index'
import { keptSecrets, type SecretMaker } from '../../server/config/dev-secrets'

let dir: string
let file: string
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'dev-secrets-'))
  file = join(dir, 'nested', 'dev-secrets.json')
})
afterEach(() => rmSync(dir, { recursive: true, force: true }))

let counter = 0
const maker: SecretMaker = {
  generate: name => `${name}-${++counter}`,
  valid: (_name, value) => value !== 'invalid',
}
const stored = () => JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>

describe('keptSecrets', () => {
  it('generates the secrets once into a file only its owner can read, then reuses them', () => {
    const first = keptSecrets(file, ['A', 'B'], maker)
    expect(Object.keys(first)).toEqual(['A', 'B'])
    expect(statSync(file).mode & 0o777).toBe(0o600)
    expect(stored()).toEqual(first)
    const written = readFileSync(file, 'utf8')
    expect(keptSecrets(file, ['A', 'B'], maker)).toEqual(first)
    expect(readFileSync(file, 'utf8')).toBe(written)
  })

  it('adds a name the file lacks, replaces an invalid value and keeps the rest', () => {
    const first = keptSecrets(file, ['A'], maker)
    writeFileSync(file, JSON.stringify({ ...stored(), B: 'invalid', OTHER: 'kept as it is' }), { mode: 0o600 })
    const second = keptSecrets(file, ['A', 'B', 'C'], maker)
    expect(second.A).toBe(first.A)
    expect(second.B).toMatch(/^B-\d+$/)
    expect(second.C).toMatch(/^C-\d+$/)
    expect(stored()).toEqual({ ...second, OTHER: 'kept as it is' })
    expect(statSync(file).mode & 0o777).toBe(0o600)
  })

  it('refuses a file that is not a JSON object, saying how to start over', () => {
    keptSecrets(file, ['A'], maker)
    writeFileSync(file, '["not", "an object"]')
    expect(() => keptSecrets(file, ['A'], maker)).toThrow(`${file} is not a JSON object of secrets. Delete it to generate new development secrets`)
  })
})

describe('parseConfig with keepSecrets', () => {
  const embedded = () => ({ DEV_SECRETS_FILE: file })

  it('embedded: the generated secrets, the session password included, are the same on the next start', () => {
    const first = parseConfig(embedded(), { keepSecrets: true })
    const second = parseConfig(embedded(), { keepSecrets: true })
    expect(first.secretsFile).toBe(file)
    for (const name of ['OPS_TOKEN', 'WEBHOOK_STANDARD_SECRET', 'WEBHOOK_STRIPE_SECRET', 'MIDTRANS_SERVER_KEY', 'MOCKPAY_WEBHOOK_SECRET', 'SESSION_PASSWORD'] as const) {
      expect(second[name], name).toBe(first[name])
      expect(stored()[name], name).toBe(first[name])
    }
    expect(first.OPS_TOKEN).toMatch(/^ops_[\w-]{32}$/)
    expect(first.SESSION_PASSWORD).toMatch(/^[\w-]{43}$/)
  })

  it('a secret set in the environment wins and is not written to the file', () => {
    const config = parseConfig({ ...embedded(), OPS_TOKEN: 'ops_from_the_environment_0123' }, { keepSecrets: true })
    expect(config.OPS_TOKEN).toBe('ops_from_the_environment_0123')
    expect(config.generatedSecrets).not.toContain('OPS_TOKEN')
    expect(stored().OPS_TOKEN).toBeUndefined()
  })

  it('an invalid kept secret is generated again', () => {
    const first = parseConfig(embedded(), { keepSecrets: true })
    writeFileSync(file, JSON.stringify({ ...stored(), WEBHOOK_STANDARD_SECRET: 'whsec_!!!!' }))
    const second = parseConfig(embedded(), { keepSecrets: true })
    expect(second.WEBHOOK_STANDARD_SECRET).not.toBe(first.WEBHOOK_STANDARD_SECRET)
    expect(second.WEBHOOK_STANDARD_SECRET).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/)
    expect(second.OPS_TOKEN).toBe(first.OPS_TOKEN)
  })

  it('a deployment (DATABASE_URL, not development) never generates nor writes the file', () => {
    expect(() => parseConfig({ ...embedded(), DATABASE_URL: 'postgres://root@127.0.0.1:5432/checkout' }, { keepSecrets: true })).toThrow(ConfigError)
    expect(existsSync(file)).toBe(false)
  })

  it('without keepSecrets nothing is written (tests, the standalone worker)', () => {
    const config = parseConfig(embedded())
    expect(config.secretsFile).toBeUndefined()
    expect(existsSync(file)).toBe(false)
  })

  it('a file that cannot be read stops start-up naming DEV_SECRETS_FILE', () => {
    parseConfig(embedded(), { keepSecrets: true })
    writeFileSync(file, 'not json')
    expect(() => parseConfig(embedded(), { keepSecrets: true })).toThrow(`Cannot keep the development secrets in ${file} (DEV_SECRETS_FILE): ${file} is not a JSON object of secrets.`)
  })
})
