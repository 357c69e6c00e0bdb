import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { configVariableNames, parseConfig, settingProblem, type ConfigVariable } from '../../server/config/index'

/**
 * `.env.example` is the list a team starts from: it must name every variable the configuration
 * reads and nothing else, show defaults that are the real ones, and work as it is when copied.
 */

const text = readFileSync(new URL('../../.env.example', import.meta.url), 'utf8')
const lines = text.split('\n')

interface Setting {
  name: string
  value: string
  /** `# NAME=value`: left at its default (or an example), not set. */
  commented: boolean
  /** The comment line above says "e.g.": the value is an example, not the default. */
  example: boolean
  line: number
}

const settings: Setting[] = lines.flatMap((line, index) => {
  const match = /^(# )?([A-Z][A-Z0-9_]*)=(.*)$/.exec(line)
  if (!match) return []
  return [{ name: match[2]!, value: match[3]!, commented: match[1] !== undefined, example: /\be\.g\./.test(lines[index - 1] ?? ''), line: index + 1 }]
})

describe('.env.example', () => {
  it('names every variable the configuration reads, and nothing it does not, each once', () => {
    const named = settings.map(setting => setting.name)
    expect(new Set(named).size, 'a variable named twice').toBe(named.length)
    expect({
      missingFromTheFile: configVariableNames.filter(name => !named.includes(name)),
      notReadByTheConfiguration: named.filter(name => !(configVariableNames as string[]).includes(name)),
    }).toEqual({ missingFromTheFile: [], notReadByTheConfiguration: [] })
  })

  it('gives each variable a one-line comment just above it', () => {
    for (const setting of settings) {
      const above = lines[setting.line - 2] ?? ''
      expect(above, `${setting.name} (line ${setting.line})`).toMatch(/^# \S/)
      expect(above, `${setting.name} (line ${setting.line}): its comment is another setting`).not.toMatch(/^# [A-Z][A-Z0-9_]*=/)
    }
  })

  it('has only valid values, and the defaults it shows are the configuration\'s', () => {
    for (const setting of settings.filter(setting => setting.value !== '')) {
      const name = setting.name as ConfigVariable
      expect(settingProblem(name, setting.value), `${name}=${setting.value}`).toBeUndefined()
      if (setting.commented && !setting.example) {
        // Embedded, where nothing is required: the shown value changes nothing.
        expect(parseConfig({ [name]: setting.value })[name], `${name}: the default shown is not the default`).toEqual(parseConfig({})[name])
      }
    }
  })

  it('sets nothing when copied as it is (every line to fill in is empty), so `nuxt dev` still runs embedded', () => {
    const active = settings.filter(setting => !setting.commented)
    expect(active.map(setting => setting.name)).toEqual(['DATABASE_URL', 'REDIS_URL', 'OPS_TOKEN', 'PAYMENT_PROVIDER'])
    expect(active.every(setting => setting.value === '')).toBe(true)
    const copied = Object.fromEntries(active.map(setting => [setting.name, setting.value]))
    expect(parseConfig(copied)).toMatchObject({ embedded: true, PAYMENT_PROVIDER: 'mockpay' })
  })

  it('puts no secret in the repository: every secret is left empty', () => {
    for (const name of ['OPS_TOKEN', 'WEBHOOK_STANDARD_SECRET', 'WEBHOOK_STRIPE_SECRET', 'MIDTRANS_SERVER_KEY', 'MOCKPAY_WEBHOOK_SECRET', 'SESSION_PASSWORD', 'STRIPE_SECRET_KEY', 'REDIS_PASSWORD']) {
      expect(settings.find(setting => setting.name === name)?.value, name).toBe('')
    }
  })
})
