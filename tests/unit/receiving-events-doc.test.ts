import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

/**
 * docs/receiving-events.md shows the receiver the delivery chaos test runs: each code block under a
 * `<!-- fixture: <path> -->` line is that file of tests/fixtures/event-receiver, verbatim.
 */

const root = fileURLToPath(new URL('../../', import.meta.url))
const page = readFileSync(join(root, 'docs/receiving-events.md'), 'utf8')

const quoted = [...page.matchAll(/^<!-- fixture: (\S+) -->\n```[^\n]*\n([\s\S]*?)^```$/gm)].map(([, fixture = '', code = '']) => ({ fixture, code: code.trimEnd() }))

describe('docs/receiving-events.md', () => {
  it('quotes the receiver and its migration from the fixture app, whole and verbatim', () => {
    expect(quoted.map(block => block.fixture)).toEqual([
      'tests/fixtures/event-receiver/server/api/checkout-events.post.ts',
      'tests/fixtures/event-receiver/migrations/0000_applied_events.sql',
    ])
    for (const { fixture, code } of quoted) {
      expect(existsSync(join(root, fixture)), fixture).toBe(true)
      expect(code, fixture).toBe(readFileSync(join(root, fixture), 'utf8').trimEnd())
    }
  })
})
