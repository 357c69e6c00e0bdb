import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

/**
 * README.md is read on npm, where a relative link leads nowhere, and its "Testing your app" block is
 * the test CI runs (test/testing-your-app.test.ts), quoted whole under a `<!-- file: <path> -->` line.
 */

const packageDir = fileURLToPath(new URL('..', import.meta.url))
const readme = readFileSync(join(packageDir, 'README.md'), 'utf8')

describe('README.md', () => {
  it('quotes the testing-your-app test verbatim', () => {
    const quoted = [...readme.matchAll(/^<!-- file: (\S+) -->\n```[^\n]*\n([\s\S]*?)^```$/gm)].map(([, file = '', code = '']) => ({ file, code: code.trimEnd() }))
    expect(quoted.map(block => block.file)).toEqual(['test/testing-your-app.test.ts'])
    for (const { file, code } of quoted) {
      expect(existsSync(join(packageDir, file)), file).toBe(true)
      expect(code, file).toBe(readFileSync(join(packageDir, file), 'utf8').trimEnd())
    }
  })

  it('links only to absolute https URLs and to its own headings', () => {
    const links = [...readme.matchAll(/\]\(([^)]+)\)/g)].map(([, target = '']) => target)
    expect(links.length).toBeGreaterThan(5)
    expect(links.filter(target => !target.startsWith('https://') && !target.startsWith('#'))).toEqual([])
    const headings = new Set([...readme.matchAll(/^#{2,4} (.+)$/gm)].map(([, title = '']) => title.toLowerCase().replace(/[^\w\s-]/g, '').trim().replace(/\s+/g, '-')))
    expect(links.filter(target => target.startsWith('#') && !headings.has(target.slice(1)))).toEqual([])
  })

  it('carries none of the app\'s history (it is in the app\'s docs/idempotency-module.md)', () => {
    expect(readme).not.toMatch(/checkout app|server\/idempotency|bench\/run|Migrating from/i)
  })
})
