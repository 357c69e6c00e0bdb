import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { checkIdempotencyKey, parseIdempotencyKeyHeader } from 'nuxt-idempotency/core'

/** packages/nuxt-idempotency/README.md#the-key-contract: 1–255 visible ASCII characters (0x21–0x7E). */
const FIRST_VISIBLE = 0x21
const LAST_VISIBLE = 0x7E
const MAX_KEY_LENGTH = 255

const visibleChar = fc.integer({ min: FIRST_VISIBLE, max: LAST_VISIBLE }).map(code => String.fromCharCode(code))
// Any code point outside 0x21–0x7E: controls, space, DEL, Latin-1, BMP and astral characters.
const nonVisibleChar = fc.oneof(
  fc.integer({ min: 0, max: FIRST_VISIBLE - 1 }),
  fc.integer({ min: LAST_VISIBLE + 1, max: 0x10FFFF }).filter(code => code < 0xD800 || code > 0xDFFF),
).map(code => String.fromCodePoint(code))

describe('checkIdempotencyKey', () => {
  it.each([undefined, null, ''])('reports %j as missing', (header) => {
    expect(checkIdempotencyKey(header)).toEqual({ ok: false, reason: 'missing' })
  })

  it.each([
    ['a single visible character', '!'],
    ['255 characters', '~'.repeat(MAX_KEY_LENGTH)],
    ['a UUID v4', '3f2b8c1e-9d4a-4f6b-8e2a-7c5d9b1a0e34'],
  ])('accepts %s and returns the key unchanged', (_, key) => {
    expect(checkIdempotencyKey(key)).toEqual({ ok: true, key })
  })

  it.each([
    ['256 characters', 'a'.repeat(MAX_KEY_LENGTH + 1)],
    ['a space', 'order 1'],
    ['a tab', 'order\t1'],
    ['a newline', 'order\n1'],
    ['DEL (0x7F)', 'order\x7F1'],
    ['non-ASCII letters', 'ключ'],
    ['an emoji', 'order-🔑'],
    ['only a space', ' '],
  ])('rejects a key with %s as invalid', (_, key) => {
    expect(checkIdempotencyKey(key)).toEqual({ ok: false, reason: 'invalid' })
  })

  it('accepts every string of 1–255 visible ASCII characters', () => {
    fc.assert(fc.property(
      fc.string({ unit: visibleChar, minLength: 1, maxLength: MAX_KEY_LENGTH }),
      (key) => {
        expect(checkIdempotencyKey(key)).toEqual({ ok: true, key })
      },
    ))
  })

  it('rejects any string containing a character outside 0x21–0x7E', () => {
    fc.assert(fc.property(
      fc.string({ unit: visibleChar, maxLength: 100 }),
      nonVisibleChar,
      fc.string({ unit: visibleChar, maxLength: 100 }),
      (before, outsider, after) => {
        expect(checkIdempotencyKey(`${before}${outsider}${after}`)).toEqual({ ok: false, reason: 'invalid' })
      },
    ))
  })
})

describe('parseIdempotencyKeyHeader (draft-ietf-httpapi-idempotency-key-header: the key is an RFC 8941 sf-string)', () => {
  it.each([
    ['a quoted UUID', '"3f2b8c1e-9d4a-4f6b-8e2a-7c5d9b1a0e34"', '3f2b8c1e-9d4a-4f6b-8e2a-7c5d9b1a0e34'],
    ['an escaped quote and backslash', String.raw`"a\"b\\c"`, String.raw`a"b\c`],
    ['parameters, which mean nothing here', '"k1";v=1', 'k1'],
    ['255 characters inside the quotes', `"${'~'.repeat(MAX_KEY_LENGTH)}"`, '~'.repeat(MAX_KEY_LENGTH)],
  ])('reads %s as the unquoted string', (_, header, key) => {
    expect(parseIdempotencyKeyHeader(header)).toEqual({ ok: true, key })
  })

  it.each([
    ['an unterminated string', '"k1'],
    ['two keys (two headers, joined by a comma)', '"k1", "k2"'],
    ['an empty string', '""'],
    ['a space inside the quotes (a valid sf-string, not a valid key)', '"order 1"'],
    ['an unescaped backslash', String.raw`"a\b"`],
    ['256 characters inside the quotes', `"${'a'.repeat(MAX_KEY_LENGTH + 1)}"`],
    ['non-ASCII inside the quotes', '"ключ"'],
  ])('refuses %s as invalid', (_, header) => {
    expect(parseIdempotencyKeyHeader(header)).toEqual({ ok: false, reason: 'invalid' })
  })

  it.each([undefined, null, ''])('reports %j as missing', (header) => {
    expect(parseIdempotencyKeyHeader(header)).toEqual({ ok: false, reason: 'missing' })
  })

  it('reads a bare key that does not open with a quote exactly as checkIdempotencyKey does', () => {
    fc.assert(fc.property(
      fc.string({ unit: visibleChar, minLength: 1, maxLength: MAX_KEY_LENGTH }).filter(key => !key.startsWith('"')),
      (key) => {
        expect(parseIdempotencyKeyHeader(key)).toEqual({ ok: true, key })
      },
    ))
  })

  it('reads any valid key, quoted and escaped, as itself: "k" and k are one key', () => {
    fc.assert(fc.property(
      fc.string({ unit: visibleChar, minLength: 1, maxLength: MAX_KEY_LENGTH }),
      (key) => {
        const quoted = `"${key.replace(/[\\"]/g, char => `\\${char}`)}"`
        expect(parseIdempotencyKeyHeader(quoted)).toEqual({ ok: true, key })
      },
    ))
  })
})
