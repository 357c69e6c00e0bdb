import type { H3Event } from 'h3'
import { describe, expect, it } from 'vitest'
import { escapeHeaderValue, escapeLogFields, escapeText } from '../../server/observability/logger'
import { MAX_PATH_LENGTH, requestPath } from '../../server/observability/request-log'

// What a client chose reaches a request_log row and a log line escaped by one rule, percent-encoding:
// control characters and lone surrogates as the %XX of their UTF-8 bytes, bytes that are not UTF-8
// as %XX each; nothing dropped, nothing a text column refuses.

/** Percent-decoding, bytes first: what the rule promises to give back. */
const percentDecode = (text: string) => Buffer.concat(text.split(/(%[0-9A-F]{2})/).map(part =>
  /^%[0-9A-F]{2}$/.test(part) ? Buffer.from([Number.parseInt(part.slice(1), 16)]) : Buffer.from(part, 'utf8')))

describe('escapeText', () => {
  it('writes C0 (NUL included), DEL and C1 controls as the %XX of their UTF-8 bytes, and keeps everything else', () => {
    expect(escapeText('/api/\u0000')).toBe('/api/%00')
    expect(escapeText('a\u0001b\tc\nd\re\u001F')).toBe('a%01b%09c%0Ad%0De%1F')
    expect(escapeText('\u007F\u0080\u0085\u009F')).toBe('%7F%C2%80%C2%85%C2%9F')
    // Printable ASCII, `%`, backslashes, quotes, letters of any script, emoji: as they are.
    const kept = '/api/orders/ord_a,b{c}"d\\e\'f,%25 é ü 日本 😀 \u00A0\u00FF'
    expect(escapeText(kept)).toBe(kept)
  })

  it('writes a lone surrogate as the three bytes it would take, and keeps a pair', () => {
    expect(escapeText('a\uD800b')).toBe('a%ED%A0%80b')
    expect(escapeText('a\uDFFF')).toBe('a%ED%BF%BF')
    expect(escapeText('\uD83D')).toBe('%ED%A0%BD')
    expect(escapeText('\uD83D\uDE00')).toBe('😀')
  })

  it('is reversible by percent-decoding where `%` already means an escape', () => {
    for (const text of ['/api/\u0000', '/api/\u0001\u007F\u0085/é', '/api/%25\u0000x']) {
      expect(percentDecode(escapeText(text)).toString('utf8')).toBe(text.replace('%25', '%'))
    }
  })

  it('with percent: `%` becomes %25, so an escape never reads as text the client sent', () => {
    expect(escapeText('%00\u0000', { percent: true })).toBe('%2500%00')
  })

  it('never exceeds maxLength and never cuts an escape or a surrogate pair', () => {
    expect(escapeText('ab\u0000cd', { maxLength: 4 })).toBe('ab')
    expect(escapeText('ab\u0000cd', { maxLength: 5 })).toBe('ab%00')
    expect(escapeText('a\u0085', { maxLength: 6 })).toBe('a')
    expect(escapeText('ab😀', { maxLength: 3 })).toBe('ab')
    expect(escapeText('ab😀\u0000', { maxLength: 4 })).toBe('ab😀')
  })
})

describe('escapeHeaderValue (Node reads header bytes as latin1)', () => {
  const header = (...bytes: number[]) => Buffer.from(bytes).toString('latin1')
  const ascii = (text: string) => [...Buffer.from(text)]

  it('keeps a visible ASCII value as it is', () => {
    expect(escapeHeaderValue('req-logs-1234_ABC.x:y')).toBe('req-logs-1234_ABC.x:y')
  })

  it('overlong and invalid UTF-8 byte by byte; well-formed UTF-8 as its characters; controls and `%` escaped', () => {
    expect(escapeHeaderValue(header(...ascii('a'), 0xC0, 0xAF, ...ascii('b')))).toBe('a%C0%AFb')
    expect(escapeHeaderValue(header(0xE0, 0x80, 0xAF))).toBe('%E0%80%AF')
    expect(escapeHeaderValue(header(0xFF, 0xFE))).toBe('%FF%FE')
    // A surrogate encoded in UTF-8, a code point past U+10FFFF, a truncated sequence.
    expect(escapeHeaderValue(header(0xED, 0xA0, 0x80))).toBe('%ED%A0%80')
    expect(escapeHeaderValue(header(0xF4, 0x90, 0x80, 0x80))).toBe('%F4%90%80%80')
    expect(escapeHeaderValue(header(0xE2, 0x82))).toBe('%E2%82')
    expect(escapeHeaderValue(header(...ascii('é€😀')))).toBe('é€😀')
    expect(escapeHeaderValue(header(0xC2, 0x85, 0x09, 0x7F))).toBe('%C2%85%09%7F')
    expect(escapeHeaderValue(header(0x85))).toBe('%85')
    expect(escapeHeaderValue('%00')).toBe('%2500')
    expect(escapeHeaderValue(header(...ascii('100% é')))).toBe('100%25 é')
    // A lone latin1 byte is not UTF-8.
    expect(escapeHeaderValue('\u00E9')).toBe('%E9')
  })

  it('percent-decoding gives the bytes back', () => {
    const bytes = [0x61, 0xC0, 0xAF, 0x25, 0x30, 0x30, 0xC3, 0xA9, 0x09, 0xFF]
    expect([...percentDecode(escapeHeaderValue(header(...bytes)))]).toEqual(bytes)
  })

  it('never exceeds maxLength and never cuts an escape', () => {
    expect(escapeHeaderValue(header(0x61, 0xC0, 0xAF), 5)).toBe('a%C0')
    expect(escapeHeaderValue('r'.repeat(400), 300)).toBe('r'.repeat(300))
  })
})

describe('requestPath', () => {
  /** What requestPath reads: the router's decoded path and the URL as it came over the wire. */
  const event = (wire: string, decoded: string) => ({ path: decoded, node: { req: { url: decoded, originalUrl: wire } } }) as unknown as H3Event

  it('the decoded path with its controls escaped, back to the wire form', () => {
    expect(requestPath(event('/api/%00', '/api/\u0000'))).toBe('/api/%00')
    expect(requestPath(event('/api/%01/%7f?x=%00', '/api/\u0001/\u007F?x=%00'))).toBe('/api/%01/%7F')
    expect(requestPath(event('/api/%C2%85', '/api/\u0085'))).toBe('/api/%C2%85')
    expect(requestPath(event('/api/%E6%97%A5', '/api/日'))).toBe('/api/日')
    expect(requestPath(event('/api/%25%00', '/api/%25\u0000'))).toBe('/api/%25%00')
  })

  it('an encoded ? stays in the path, as %3F, and only the query as sent is cut off', () => {
    expect(requestPath(event('/api/orders/a%3fb?x=1?y', '/api/orders/a?b?x=1?y'))).toBe('/api/orders/a%3Fb')
    expect(requestPath(event('/api/orders/a%3F', '/api/orders/a?'))).toBe('/api/orders/a%3F')
    expect(requestPath(event('/api/orders?', '/api/orders?'))).toBe('/api/orders')
  })

  it('a path that does not decode to UTF-8 as it came over the wire (not the router\'s doubled %2525)', () => {
    expect(requestPath(event('/api/%C0%AF', '/api/%C0%AF'))).toBe('/api/%C0%AF')
    expect(requestPath(event('/api/%E0%80%AF', '/api/%E0%80%AF'))).toBe('/api/%E0%80%AF')
    expect(requestPath(event('/api/%FF', '/api/%FF'))).toBe('/api/%FF')
    expect(requestPath(event('/api/%25/%FF', '/api/%2525/%FF'))).toBe('/api/%25/%FF')
  })

  it(`at most ${MAX_PATH_LENGTH} characters, escapes whole`, () => {
    const path = requestPath(event(`/api/${'%00'.repeat(400)}`, `/api/${'\u0000'.repeat(400)}`))
    expect(path).toBe(`/api/${'%00'.repeat(165)}`)
    expect(path.length).toBe(500)
  })
})

describe('log lines', () => {
  it('escape every string field, two levels down, and leave errors to their serializer', () => {
    const error = new Error('a\u0000b')
    const fields = { path: '/api/\u0000', nested: { key: 'k\u0085', list: ['\uD800', 'ok'] }, error, count: 3, empty: null }
    expect(escapeLogFields(fields)).toEqual({ path: '/api/%00', nested: { key: 'k%C2%85', list: ['%ED%A0%80', 'ok'] }, error, count: 3, empty: null })
    expect(escapeLogFields(fields).error).toBe(error)
    // Untouched input stays the same object: no copy per line.
    const clean = { path: '/api/orders', nested: { a: 'b' } }
    expect(escapeLogFields(clean)).toBe(clean)
    expect(fields.path).toBe('/api/\u0000')
  })
})
