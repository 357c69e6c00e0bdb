import { randomUUID } from 'node:crypto'
import http from 'node:http'
import fc from 'fast-check'
import { afterAll, beforeAll, expect, it } from 'vitest'
import type { ProblemSlug } from '../../server/problems/catalog'
import { SKU_PATTERN } from '../../server/stock/schema'
import { hmacSha256 } from 'nuxt-idempotency/core'
import { stopAll, testSecrets } from '../support/app'
import { statusAndHeaders, type TestResponse } from '../support/http'
import { orderTopLevelFields, unknownFieldsArbitrary, validOrderArbitrary, visibleAscii } from '../support/order-arbitraries'
import { countRows, expectProblem, type OrdersStack, startOrdersStack } from '../support/orders'
import { describeWithServices } from '../support/services'
import { nowSeconds, webhookRowCounts } from '../support/webhooks'

// The idempotency contract, webhooks and bad input (docs/api.md, docs/webhooks.md) under generated
// input: random and adversarial headers (keys, request ids, content types, authorization,
// signatures) and bodies (deep nesting, huge numbers, wrong types, invalid UTF-8, 64 KiB ± 1)
// against the built server. Each generated request knows by construction how it must be refused:
// never a 5xx, always its exact problem+json, and no write. A share of the requests is valid, so
// the same run shows that the write checks can see a write.

const MAX_BODY_BYTES = 64 * 1024
/** Runs per property: bounded so the file stays well under a minute on two shared cores. */
const RUNS = { orders: 300, forgedWebhooks: 200, signedWebhooks: 200 } as const

type Transport = 'content-length' | 'chunked'
/** `created`/`received`: the request is valid; otherwise the exact problem it must get. */
type Expected = ProblemSlug | 'created' | 'received'

/**
 * Sends exact header and body bytes with node:http (fetch refuses Latin-1 header bytes and labels
 * bodies on its own), with an honest Content-Length or chunked. Connection: close, so a socket the
 * server answered before reading the whole body is never reused.
 */
function send(baseUrl: string, path: string, headers: Record<string, string>, body: Buffer, transport: Transport): Promise<TestResponse> {
  return new Promise((resolve, reject) => {
    const framing = transport === 'chunked' ? { 'transfer-encoding': 'chunked' } : { 'content-length': String(body.length) }
    const outgoing = http.request(new URL(path, baseUrl), { method: 'POST', headers: { ...headers, ...framing, connection: 'close' } }, (incoming) => {
      const chunks: Buffer[] = []
      incoming.on('data', (chunk: Buffer) => chunks.push(chunk))
      incoming.once('end', () => {
        const text = Buffer.concat(chunks).toString('utf8')
        const response = statusAndHeaders(incoming)
        let json: unknown
        try {
          json = /[/+]json\b/.test(response.headers.get('content-type') ?? '') && text ? JSON.parse(text) : undefined
        }
        catch {
          json = undefined
        }
        resolve({ ...response, text, json })
      })
    })
    outgoing.setTimeout(15_000, () => outgoing.destroy(new Error(`POST ${path} timed out`)))
    outgoing.once('error', reject)
    for (let offset = 0; offset < body.length; offset += 8 * 1024) outgoing.write(body.subarray(offset, offset + 8 * 1024))
    outgoing.end()
  })
}

// ── header values ─────────────────────────────────────────────────────────────────────────────

/** `value` with a space, a tab or a non-ASCII character inside (the HTTP parser trims only the ends). */
const withInside = (inside: fc.Arbitrary<string>) => fc.tuple(visibleAscii(1, 40), inside, visibleAscii(1, 40)).map(([a, b, c]) => `${a}${b}${c}`)
/** One Latin-1 byte 0x80–0xFF, sent as that byte. */
const latin1Char = fc.integer({ min: 0x80, max: 0xFF }).map(code => String.fromCharCode(code))
/** Any Unicode text sent as its UTF-8 bytes (node:http writes header strings as Latin-1, byte per char). */
const utf8Bytes = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 10 })
  // eslint-disable-next-line no-control-regex -- the point: any byte outside ASCII, NUL included
  .filter(text => /[^\x00-\x7F]/.test(text))
  .map(text => Buffer.from(text, 'utf8').toString('latin1'))
const notVisibleAscii = fc.oneof(fc.constantFrom(' ', '\t', '  '), latin1Char, utf8Bytes)

interface HeaderCase { value: string | undefined, valid: boolean }
const valid = (value: string | undefined): HeaderCase => ({ value, valid: true })
const invalid = (value: string | undefined): HeaderCase => ({ value, valid: false })

/** A valid key is a fresh UUID (unique, so a valid order is new) followed by random visible ASCII. */
const idempotencyKeyCase = fc.oneof(
  { weight: 12, arbitrary: visibleAscii(0, 219).map(suffix => valid(suffix)) },
  { weight: 1, arbitrary: fc.constantFrom(undefined, '').map(invalid) },
  { weight: 1, arbitrary: visibleAscii(256, 4000).map(invalid) },
  { weight: 2, arbitrary: withInside(notVisibleAscii).map(invalid) },
)

const requestIdCase = fc.oneof(
  { weight: 3, arbitrary: fc.constant(valid(undefined)) },
  { weight: 3, arbitrary: visibleAscii(1, 128).map(valid) },
  { weight: 1, arbitrary: visibleAscii(129, 2000).map(invalid) },
  { weight: 2, arbitrary: withInside(notVisibleAscii).map(invalid) },
)

/** `valid`: the server reads JSON. Anything not application/json or application/*+json is 415. */
const contentTypeCase = fc.oneof(
  { weight: 10, arbitrary: fc.constantFrom(
    'application/json',
    'application/json; charset=utf-8',
    'Application/JSON',
    'application/json;charset=iso-8859-1',
    'application/vnd.api+json',
    'application/merge-patch+json; x=y',
  ).map(valid) },
  { weight: 1, arbitrary: fc.constantFrom(undefined, '').map(invalid) },
  { weight: 1, arbitrary: fc.constantFrom(
    'text/plain',
    'text/json',
    'application/jsonl',
    'application/json-seq',
    'application/x-json',
    'application/javascript',
    'json',
    '*/*',
    'application/+json',
    'multipart/form-data; boundary=json',
    'application/x-www-form-urlencoded;type=application/json',
  ).map(invalid) },
  { weight: 1, arbitrary: visibleAscii(0, 80).map(rest => invalid(`x-${rest}`)) },
  { weight: 1, arbitrary: withInside(notVisibleAscii).map(value => invalid(`application/${value}`)) },
)

// ── bodies ────────────────────────────────────────────────────────────────────────────────────

/** Every body carries this cart id; each request swaps in a fresh one of the same length (sizes stay exact). */
const CART_PLACEHOLDER = `crt_${'X'.repeat(32)}`
const freshCartId = () => `crt_${randomUUID().replaceAll('-', '')}`
/** Marks where invalid UTF-8 bytes go into a JSON text. */
const BYTES_MARK = `@${randomUUID()}@`

interface BodyCase { what: string, bytes: Buffer, expected: 'created' | 'malformed-json' | 'validation-failed' }

const json = (value: unknown) => Buffer.from(JSON.stringify(value), 'utf8')

/** Byte sequences no UTF-8 decoder may accept: stray continuation, overlong, surrogate, past U+10FFFF, truncated. */
const invalidUtf8 = fc.constantFrom(
  [0xFF], [0xFE], [0x80], [0xBF], [0xC0, 0x80], [0xC1, 0xBF], [0xE2, 0x82], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xF8, 0x88, 0x80, 0x80, 0x80],
).map(bytes => Buffer.from(bytes))

/** `value` nested `depth` levels deep in arrays or objects (or both, alternating). */
const deepNesting = fc.record({ depth: fc.integer({ min: 1, max: 5000 }), shape: fc.constantFrom('array', 'object', 'mixed') }).map(({ depth, shape }) => {
  const open = (level: number) => shape === 'array' || (shape === 'mixed' && level % 2 === 0) ? '[' : '{"a":'
  const close = (level: number) => shape === 'array' || (shape === 'mixed' && level % 2 === 0) ? ']' : '}'
  let head = ''
  let tail = ''
  for (let level = 0; level < depth; level++) {
    head += open(level)
    tail = close(level) + tail
  }
  return { depth, shape, text: `${head}0${tail}` }
})

const orderArbitrary = validOrderArbitrary.map(order => ({ ...order, cartId: CART_PLACEHOLDER }))

/** Values of the wrong JSON type for a field of the given type. */
const wrongTypeFor = (type: 'number' | 'string' | 'array' | 'object') => fc.oneof(
  fc.constant(null),
  fc.boolean(),
  ...(type === 'number' ? [] : [fc.double({ noNaN: true, noDefaultInfinity: true })]),
  ...(type === 'string' ? [] : [fc.string({ maxLength: 20 })]),
  ...(type === 'array' ? [] : [fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 3 })]),
  ...(type === 'object' ? [] : [fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 })]),
)

/** Numbers no minor-unit field takes: negative, fractional, beyond 2^53 − 1, or a number in a string. */
const badMinorUnits = fc.oneof(
  fc.double({ noNaN: true, noDefaultInfinity: true }).filter(n => n < 0 || !Number.isInteger(n) || n > Number.MAX_SAFE_INTEGER),
  fc.constantFrom(1e308, -1e308, 2 ** 53, 2 ** 53 + 2, Number.MAX_SAFE_INTEGER + 1, -1, 0.5, Number.MIN_VALUE),
  fc.integer({ min: 0 }).map(String),
  wrongTypeFor('number'),
)

const badQuantity = fc.oneof(badMinorUnits, fc.constantFrom(0, 10_001), fc.integer({ min: 10_001, max: 2 ** 31 }))

const badString = (valid: RegExp) => fc.oneof(fc.string({ maxLength: 300 }), fc.string({ unit: 'grapheme', maxLength: 20 })).filter(text => !valid.test(text))

/** For each field, values that break it by construction. */
const badTopLevel: Record<typeof orderTopLevelFields[number], fc.Arbitrary<unknown>> = {
  cartId: fc.oneof(badString(/^[\x21-\x7E]{1,128}$/), wrongTypeFor('string')),
  currency: fc.oneof(badString(/^[A-Z]{3}$/), wrongTypeFor('string')),
  amount: badMinorUnits,
  paymentMethod: fc.oneof(fc.string({ maxLength: 20 }).filter(text => !['card', 'bank_transfer', 'ewallet'].includes(text)), fc.constantFrom('CARD', 'card ', 'Bank_Transfer'), wrongTypeFor('string')),
  items: fc.oneof(fc.constant([]), wrongTypeFor('array'), fc.array(wrongTypeFor('object'), { minLength: 1, maxLength: 3 })),
  customer: fc.oneof(wrongTypeFor('object'), fc.constant({}), fc.record({ email: fc.oneof(fc.string({ maxLength: 40 }).filter(text => !text.includes('@')), wrongTypeFor('string')) })),
}

const badItemField = {
  sku: fc.oneof(badString(SKU_PATTERN), wrongTypeFor('string')),
  quantity: badQuantity,
  unitPrice: badMinorUnits,
}

/** Large number literals as written in the text, not as JavaScript can print them. */
const hugeNumberLiteral = fc.oneof(
  fc.constantFrom('1e400', '-1e400', '9007199254740993', '123456789012345678901234567890', '1e309', '-0.5', '0.1e1000', '1E+308'),
  fc.tuple(fc.integer({ min: 1, max: 9 }), fc.integer({ min: 17, max: 400 })).map(([digit, zeros]) => `${digit}${'0'.repeat(zeros)}`),
)

const preview = (bytes: Buffer) => bytes.length > 300 ? `${bytes.subarray(0, 300).toString('latin1')}… (${bytes.length} bytes)` : bytes.toString('latin1')

/** Counterexamples print a body as its description and a short preview, not as a 64 KiB byte array. */
const printable = <T extends { what: string, bytes: Buffer }>(body: T): T => Object.assign(body, {
  [fc.toStringMethod]: () => `{what: ${JSON.stringify(body.what)}, bytes: ${JSON.stringify(preview(body.bytes))}}`,
})

const bodyCase: fc.Arbitrary<BodyCase> = fc.oneof(
  // Valid, with unknown fields (and sometimes a deeply nested one): the positive control.
  { weight: 4, arbitrary: fc.tuple(orderArbitrary, unknownFieldsArbitrary(orderTopLevelFields), fc.option(deepNesting, { freq: 4 })).map(([order, extra, nested]) => ({
    what: `valid order${nested ? ` with an unknown field nested ${nested.depth} levels` : ''}`,
    bytes: Buffer.from(JSON.stringify({ ...extra, ...order }).replace(/\}$/, nested ? `,"zzNested":${nested.text}}` : '}')),
    expected: 'created' as const,
  })) },
  { weight: 3, arbitrary: fc.tuple(orderArbitrary, fc.constantFrom(...orderTopLevelFields)).chain(([order, field]) => badTopLevel[field].map(bad => ({
    what: `${field} = ${JSON.stringify(bad)?.slice(0, 80)}`,
    bytes: json({ ...order, [field]: bad }),
    expected: 'validation-failed' as const,
  }))) },
  { weight: 1, arbitrary: fc.tuple(orderArbitrary, fc.constantFrom(...orderTopLevelFields)).map(([order, field]) => {
    const { [field]: _, ...rest } = order
    return { what: `no ${field}`, bytes: json(rest), expected: 'validation-failed' as const }
  }) },
  { weight: 2, arbitrary: fc.tuple(orderArbitrary, fc.constantFrom('sku', 'quantity', 'unitPrice') as fc.Arbitrary<keyof typeof badItemField>).chain(([order, field]) => badItemField[field].map((bad) => {
    const items = order.items.map((item, index) => index === order.items.length - 1 ? { ...item, [field]: bad } : item)
    return { what: `last item's ${field} = ${JSON.stringify(bad)?.slice(0, 80)}`, bytes: json({ ...order, items }), expected: 'validation-failed' as const }
  })) },
  { weight: 1, arbitrary: fc.tuple(orderArbitrary, fc.constantFrom('amount', 'quantity', 'unitPrice'), hugeNumberLiteral).map(([order, field, literal]) => {
    const text = field === 'amount'
      ? JSON.stringify({ ...order, amount: BYTES_MARK })
      : JSON.stringify({ ...order, items: [{ ...order.items[0]!, [field]: BYTES_MARK }] })
    return { what: `${field} written as ${literal}`, bytes: Buffer.from(text.replace(`"${BYTES_MARK}"`, literal)), expected: 'validation-failed' as const }
  }) },
  // A deeply nested value as the body or in place of a field.
  { weight: 1, arbitrary: fc.tuple(deepNesting, fc.option(fc.tuple(orderArbitrary, fc.constantFrom('items', 'customer', 'amount')), { freq: 2 })).map(([nested, into]) => into
    ? { what: `${into[1]} nested ${nested.depth} levels (${nested.shape})`, bytes: Buffer.from(JSON.stringify({ ...into[0], [into[1]]: BYTES_MARK }).replace(`"${BYTES_MARK}"`, nested.text)), expected: 'validation-failed' as const }
    : { what: `a body nested ${nested.depth} levels (${nested.shape})`, bytes: Buffer.from(nested.text), expected: 'validation-failed' as const }) },
  { weight: 1, arbitrary: fc.jsonValue().filter(value => typeof value !== 'object' || value === null || Array.isArray(value)).map(value => ({
    what: 'a JSON value that is no object', bytes: json(value), expected: 'validation-failed' as const,
  })) },
  // Malformed: a valid order cut short, with trailing garbage, or random text that is no JSON.
  { weight: 2, arbitrary: fc.oneof(
    orderArbitrary.chain(order => fc.integer({ min: 0, max: JSON.stringify(order).length - 1 }).map(cut => ({ what: `a valid order cut at ${cut}`, bytes: json(order).subarray(0, cut) }))),
    fc.tuple(orderArbitrary, fc.constantFrom('}', ']', 'x', ',', '{}', '"')).map(([order, garbage]) => ({ what: `a valid order followed by ${garbage}`, bytes: Buffer.from(JSON.stringify(order) + garbage) })),
    fc.string({ unit: 'grapheme', maxLength: 200 }).filter((text) => {
      try {
        JSON.parse(text)
        return false
      }
      catch {
        return true
      }
    }).map(text => ({ what: 'random text', bytes: Buffer.from(text) })),
  ).map(({ what, bytes }) => ({ what, bytes, expected: 'malformed-json' as const })) },
  // Invalid UTF-8 anywhere — outside any string, in a field, in an unknown field the schema would
  // strip — rejects the whole body: it is not JSON (RFC 8259 §8.1).
  { weight: 2, arbitrary: fc.tuple(orderArbitrary, invalidUtf8, fc.constantFrom('before the body', 'cartId', 'currency', 'sku', 'email', 'an unknown field')).map(([order, bytes, where]) => {
    const marked = where === 'before the body'
      ? `${BYTES_MARK}${JSON.stringify(order)}`
      : where === 'an unknown field'
        ? JSON.stringify({ ...order, note: `n${BYTES_MARK}` })
        : where === 'sku'
          ? JSON.stringify({ ...order, items: [{ ...order.items[0]!, sku: `SKU${BYTES_MARK}` }] })
          : where === 'email'
            ? JSON.stringify({ ...order, customer: { email: `a${BYTES_MARK}@b.co` } })
            : JSON.stringify({ ...order, [where]: where === 'cartId' ? `${CART_PLACEHOLDER}${BYTES_MARK}` : `I${BYTES_MARK}` })
    const [head, tail] = marked.split(BYTES_MARK) as [string, string]
    return { what: `bytes ${bytes.toString('hex')} in ${where}`, bytes: Buffer.concat([Buffer.from(head), bytes, Buffer.from(tail)]), expected: 'malformed-json' as const }
  }) },
).map(printable)

/** Pads a body to an exact size with JSON whitespace, which changes neither its meaning nor its validity. */
const sizeCase = fc.oneof(
  { weight: 6, arbitrary: fc.constant(undefined) },
  { weight: 1, arbitrary: fc.constantFrom(MAX_BODY_BYTES - 1, MAX_BODY_BYTES, MAX_BODY_BYTES + 1) },
)
const padded = (bytes: Buffer, size: number | undefined, filler: string) => size === undefined || size <= bytes.length
  ? bytes
  : Buffer.concat([bytes, Buffer.from(filler.repeat(Math.ceil((size - bytes.length) / filler.length)).slice(0, size - bytes.length))])
const whitespace = fc.constantFrom(' ', '\n', '\t', '\r\n', ' \t\n\r')

/** Replaces every copy of the cart placeholder by a fresh cart id of the same length. */
function withFreshCart(bytes: Buffer): { bytes: Buffer, cartId: string } {
  const cartId = freshCartId()
  const out = Buffer.from(bytes)
  for (let at = out.indexOf(CART_PLACEHOLDER); at !== -1; at = out.indexOf(CART_PLACEHOLDER, at + 1)) out.write(cartId, at, 'latin1')
  return { bytes: out, cartId }
}

/** A problem response: exact status and catalog title, the RFC 9457 members, its own content type. */
function expectAnyProblem(response: TestResponse, slugs: ProblemSlug[], context: string): void {
  expect(response.status, context).toBeGreaterThanOrEqual(400)
  expect(response.status, context).toBeLessThan(500)
  const slug = typeof response.json?.type === 'string' ? response.json.type.replace('/problems/', '') : undefined
  expect(slugs, context).toContain(slug)
  expectProblem(response, slug as ProblemSlug)
}

// ── webhooks ──────────────────────────────────────────────────────────────────────────────────

const standardKey = testSecrets.webhookStandardKey
const standardSignature = (key: Buffer | string, id: string, timestamp: string, body: Buffer) => `v1,${hmacSha256(key, `${id}.${timestamp}.`, body).toString('base64')}`
const stripeV1 = (secret: string, timestamp: string, body: Buffer) => hmacSha256(secret, `${timestamp}.`, body).toString('hex')
const randomBase64 = fc.uint8Array({ minLength: 1, maxLength: 64 }).map(bytes => Buffer.from(bytes).toString('base64'))
const randomHex64 = fc.uint8Array({ minLength: 32, maxLength: 32 }).map(bytes => Buffer.from(bytes).toString('hex'))

/** Timestamp headers the server must refuse, as offsets from now or as text. */
const badTimestamp = fc.oneof(
  fc.integer({ min: 301, max: 10 ** 9 }).map(skew => ({ late: skew })),
  fc.integer({ min: 302, max: 10 ** 9 }).map(skew => ({ early: skew })),
  fc.constantFrom('', '-5', '-1700000000', '99999999999999999999', '1e9', '0x6553F100', 'abc', '1700000000.5', '+1700000000', 'NaN').map(text => ({ text })),
  // Arabic-Indic digits, sent as their UTF-8 bytes.
  fc.constant({ text: Buffer.from('١٧٠٠٠٠٠٠٠٠', 'utf8').toString('latin1') }),
).map(spec => (now: number) => 'late' in spec ? String(now - spec.late) : 'early' in spec ? String(now + spec.early) : spec.text)

/** Bodies of any kind: an event, JSON, bytes that are no UTF-8, deep nesting, nothing. */
const anyWebhookBody = fc.oneof(
  fc.record({ orderId: fc.string({ minLength: 1, maxLength: 20 }), amount: fc.nat() }).map(({ orderId, amount }) =>
    json({ type: 'payment.succeeded', timestamp: '2026-11-29T10:00:00.000Z', id: `evt_${orderId}`, data: { orderId, paymentId: 'pay_1', amount, currency: 'IDR', object: { id: 'pi_1', metadata: { order_id: orderId } } } })),
  fc.jsonValue().map(json),
  fc.uint8Array({ maxLength: 2000 }).map(bytes => Buffer.from(bytes)),
  deepNesting.map(nested => Buffer.from(nested.text)),
  fc.constant(Buffer.alloc(0)),
)

interface ForgedDelivery { what: string, headers: Record<string, string> }

/** Standard Webhooks headers that can never verify: no signature over exactly (id, timestamp, body) with the secret, or a timestamp out of bounds. */
function forgedStandard(body: Buffer): fc.Arbitrary<ForgedDelivery> {
  const id = fc.oneof(fc.constant(undefined), fc.constant(''), visibleAscii(1, 300), withInside(notVisibleAscii))
  const someoneElses = fc.oneof(
    fc.tuple(visibleAscii(1, 40)).map(([otherId]) => ({ what: 'signed for another webhook-id', sign: (i: string, t: string) => standardSignature(standardKey, `${i}${otherId}`, t, body) })),
    fc.integer({ min: 1, max: 300 }).map(shift => ({ what: 'signed for another timestamp', sign: (i: string, t: string) => standardSignature(standardKey, i, `${t}${shift}`, body) })),
    invalidUtf8.map(extra => ({ what: 'signed over another body', sign: (i: string, t: string) => standardSignature(standardKey, i, t, Buffer.concat([body, extra])) })),
    fc.uint8Array({ minLength: 16, maxLength: 32 }).map(key => ({ what: 'signed with another secret', sign: (i: string, t: string) => standardSignature(Buffer.from(key), i, t, body) })),
    fc.constantFrom('v2', 'V1', 'v1a', '', 'v0').map(version => ({ what: `the right bytes under version "${version}"`, sign: (i: string, t: string) => standardSignature(standardKey, i, t, body).replace(/^v1/, version) })),
    randomBase64.map(bytes => ({ what: 'v1 with random bytes', sign: () => `v1,${bytes}` })),
    fc.oneof(visibleAscii(1, 300), withInside(notVisibleAscii)).map(garbage => ({ what: 'garbage', sign: () => garbage })),
  )
  return fc.record({
    id,
    timestamp: fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 2, arbitrary: badTimestamp }),
    signature: fc.oneof(
      { weight: 1, arbitrary: fc.constant(undefined) },
      { weight: 6, arbitrary: fc.array(someoneElses, { minLength: 1, maxLength: 40 }) },
    ),
    rightSignatureOnBadTimestamp: fc.boolean(),
  }).map(({ id, timestamp, signature, rightSignatureOnBadTimestamp }) => {
    const now = nowSeconds()
    const timestampHeader = timestamp ? timestamp(now) : String(now)
    const headers: Record<string, string> = { 'content-type': 'application/json', 'webhook-timestamp': timestampHeader }
    if (id !== undefined) headers['webhook-id'] = id
    const signedId = id ?? ''
    // A replayed (or forward-dated) delivery: the exact signature, but a timestamp out of bounds.
    const entries = timestamp && rightSignatureOnBadTimestamp
      ? [standardSignature(standardKey, signedId, timestampHeader, body)]
      : (signature ?? []).map(entry => entry.sign(signedId, timestampHeader))
    if (signature !== undefined || entries.length) headers['webhook-signature'] = entries.join(' ')
    const what = `standard: id ${id === undefined ? 'missing' : JSON.stringify(id.slice(0, 40))}, timestamp ${timestampHeader.slice(0, 30)}, `
      + (timestamp && rightSignatureOnBadTimestamp ? 'the right signature' : signature ? signature.map(entry => entry.what).slice(0, 5).join(' + ') : 'no signature')
    return { what, headers }
  })
}

/** Stripe-Signature headers that can never verify. */
function forgedStripe(body: Buffer): fc.Arbitrary<ForgedDelivery> {
  const secret = testSecrets.webhookStripeSecret
  const header = fc.oneof(
    fc.constant({ what: 'no header', value: undefined }),
    fc.oneof(fc.constant(''), visibleAscii(1, 300), withInside(notVisibleAscii)).map(value => ({ what: 'garbage', value })),
    fc.array(randomHex64, { minLength: 1, maxLength: 60 }).map(v1s => ({ what: `${v1s.length} random v1`, value: (t: string) => [`t=${t}`, ...v1s.map(v1 => `v1=${v1}`)].join(',') })),
    fc.constant({ what: 't= twice', value: (t: string) => `t=${t},t=${t},v1=${stripeV1(secret, t, body)}` }),
    fc.constant({ what: 'no t=', value: (t: string) => `v1=${stripeV1(secret, t, body)}` }),
    fc.constant({ what: 'the right bytes as v0', value: (t: string) => `t=${t},v0=${stripeV1(secret, t, body)}` }),
    fc.integer({ min: 1, max: 300 }).map(shift => ({ what: 'signed for another t', value: (t: string) => `t=${t},v1=${stripeV1(secret, String(Number(t) - shift), body)}` })),
    invalidUtf8.map(extra => ({ what: 'signed over another body', value: (t: string) => `t=${t},v1=${stripeV1(secret, t, Buffer.concat([body, extra]))}` })),
    visibleAscii(1, 40).map(other => ({ what: 'signed with another secret', value: (t: string) => `t=${t},v1=${stripeV1(`${secret}${other}`, t, body)}` })),
  )
  return fc.record({ header, timestamp: fc.option(badTimestamp, { freq: 3 }) }).map(({ header, timestamp }) => {
    const now = nowSeconds()
    const t = timestamp ? timestamp(now) : String(now)
    // With a bad timestamp even the exact signature over it must not verify (a replayed delivery).
    const value = typeof header.value === 'function' ? header.value(t) : timestamp ? `t=${t},v1=${stripeV1(secret, t, body)}` : header.value
    const headers: Record<string, string> = { 'content-type': 'application/json' }
    if (value !== undefined) headers['stripe-signature'] = value
    return { what: `stripe: ${typeof header.value === 'function' || !timestamp ? header.what : 'the right signature'}, t ${t.slice(0, 30)}`, headers }
  })
}

/** Every Stripe event id in a generated body; each request swaps in a fresh one of the same length. */
const EVENT_PLACEHOLDER = `evt_${'Y'.repeat(32)}`
const freshEventId = () => `evt_${randomUUID().replaceAll('-', '')}`

interface SignedBodyCase { what: string, bytes: Buffer, expected: 'received' | 'payload-invalid', badId?: string }

const standardEvent = fc.record({
  type: fc.constantFrom('payment.succeeded', 'payment.failed', 'payment.refunded'),
  timestamp: fc.constant('2026-11-29T10:00:00.000Z'),
  data: fc.record({ orderId: visibleAscii(1, 64), paymentId: visibleAscii(1, 128), amount: fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), currency: fc.stringMatching(/^[A-Z]{3}$/) }),
})
const stripeEvent = fc.record({
  id: fc.constant(EVENT_PLACEHOLDER),
  object: fc.constant('event'),
  type: fc.constantFrom('payment_intent.succeeded', 'payment_intent.payment_failed', 'charge.refunded'),
  data: fc.record({ object: fc.record({ id: visibleAscii(1, 64), object: fc.constant('payment_intent'), amount: fc.nat(), currency: fc.constantFrom('usd', 'idr', 'EUR'), metadata: fc.record({ order_id: visibleAscii(1, 64) }) }) }),
})

/** What can be signed correctly and still be no event the provider understands. */
const notAnEvent = fc.oneof(
  fc.jsonValue().filter(value => typeof value !== 'object' || value === null || Array.isArray(value) || !('data' in value)).map(value => ({ what: 'JSON without data', bytes: json(value) })),
  fc.uint8Array({ minLength: 1, maxLength: 2000 }).filter((bytes) => {
    try {
      new TextDecoder('utf-8', { fatal: true }).decode(bytes)
      return false
    }
    catch {
      return true
    }
  }).map(bytes => ({ what: 'random bytes that are no UTF-8', bytes: Buffer.from(bytes) })),
  deepNesting.map(nested => ({ what: `nested ${nested.depth} levels (${nested.shape})`, bytes: Buffer.from(nested.text) })),
  fc.constant({ what: 'an empty body', bytes: Buffer.alloc(0) }),
)

const badEventId = fc.oneof(visibleAscii(256, 1000), withInside(notVisibleAscii))

/** With `[marked, BYTES_MARK]` in a JSON text, the text with `bytes` in place of the mark. */
const spliced = (marked: string, bytes: Buffer) => {
  const [head, tail] = marked.split(BYTES_MARK) as [string, string]
  return Buffer.concat([Buffer.from(head), bytes, Buffer.from(tail)])
}

const signedStandardCase: fc.Arbitrary<SignedBodyCase> = fc.oneof(
  { weight: 3, arbitrary: standardEvent.map(event => ({ what: 'a valid event', bytes: json(event), expected: 'received' as const })) },
  { weight: 1, arbitrary: fc.tuple(standardEvent, badEventId).map(([event, badId]) => ({ what: 'a valid event under a bad webhook-id', bytes: json(event), expected: 'payload-invalid' as const, badId })) },
  { weight: 3, arbitrary: fc.tuple(standardEvent, fc.constantFrom('type', 'timestamp', 'data', 'orderId', 'paymentId', 'amount', 'currency')).chain(([event, field]) => {
    const bad: Record<string, fc.Arbitrary<unknown>> = {
      type: fc.oneof(fc.string({ maxLength: 30 }).filter(type => !['payment.succeeded', 'payment.failed', 'payment.refunded'].includes(type)), wrongTypeFor('string')),
      timestamp: fc.oneof(visibleAscii(0, 30).map(text => `x${text}`), wrongTypeFor('string')),
      data: wrongTypeFor('object'),
      orderId: fc.oneof(fc.constant(''), visibleAscii(65, 200), wrongTypeFor('string')),
      paymentId: fc.oneof(fc.constant(''), visibleAscii(129, 300), wrongTypeFor('string')),
      amount: badMinorUnits,
      currency: fc.oneof(badString(/^[A-Z]{3}$/), wrongTypeFor('string')),
    }
    return bad[field]!.map(value => ({
      what: `${field} = ${JSON.stringify(value)?.slice(0, 60)}`,
      bytes: json(['type', 'timestamp', 'data'].includes(field) ? { ...event, [field]: value } : { ...event, data: { ...event.data, [field]: value } }),
      expected: 'payload-invalid' as const,
    }))
  }) },
  { weight: 1, arbitrary: fc.tuple(standardEvent, invalidUtf8).map(([event, bytes]) => ({
    what: `bytes ${bytes.toString('hex')} in data.orderId`,
    bytes: spliced(JSON.stringify({ ...event, data: { ...event.data, orderId: `o${BYTES_MARK}` } }), bytes),
    expected: 'payload-invalid' as const,
  })) },
  { weight: 2, arbitrary: notAnEvent.map(body => ({ ...body, expected: 'payload-invalid' as const })) },
).map(printable)

const signedStripeCase: fc.Arbitrary<SignedBodyCase> = fc.oneof(
  { weight: 3, arbitrary: stripeEvent.map(event => ({ what: 'a valid event', bytes: json(event), expected: 'received' as const })) },
  { weight: 1, arbitrary: fc.tuple(stripeEvent, badEventId).map(([event, id]) => ({ what: 'a valid event under a bad id', bytes: json({ ...event, id }), expected: 'payload-invalid' as const })) },
  { weight: 1, arbitrary: fc.tuple(stripeEvent, fc.string({ maxLength: 40 }).filter(type => !['payment_intent.succeeded', 'payment_intent.payment_failed', 'charge.refunded'].includes(type))).map(([event, type]) => ({
    what: `an unhandled type ${JSON.stringify(type)}`, bytes: json({ ...event, type }), expected: 'payload-invalid' as const,
  })) },
  { weight: 1, arbitrary: fc.tuple(stripeEvent, fc.oneof(fc.constant(undefined), fc.constant({}), fc.record({ order_id: fc.oneof(fc.constant(''), visibleAscii(65, 100), wrongTypeFor('string')) }))).map(([event, metadata]) => ({
    what: `metadata ${JSON.stringify(metadata)?.slice(0, 60)}`,
    bytes: json({ ...event, data: { object: { ...event.data.object, metadata } } }),
    expected: 'payload-invalid' as const,
  })) },
  { weight: 1, arbitrary: fc.tuple(stripeEvent, invalidUtf8).map(([event, bytes]) => ({
    what: `bytes ${bytes.toString('hex')} in metadata.order_id`,
    bytes: spliced(JSON.stringify({ ...event, data: { object: { ...event.data.object, metadata: { order_id: `o${BYTES_MARK}` } } } }), bytes),
    expected: 'payload-invalid' as const,
  })) },
  { weight: 2, arbitrary: notAnEvent.map(body => ({ ...body, expected: 'payload-invalid' as const })) },
).map(printable)

/** Replaces every copy of a placeholder by a fresh value of the same length. */
function replaced(bytes: Buffer, placeholder: string, fresh: string): Buffer {
  const out = Buffer.from(bytes)
  for (let at = out.indexOf(placeholder); at !== -1; at = out.indexOf(placeholder, at + 1)) out.write(fresh, at, 'latin1')
  return out
}

describeWithServices('HTTP fuzzing', ['postgres', 'redis'], () => {
  let stack: OrdersStack

  beforeAll(async () => {
    stack = await startOrdersStack('fuzz')
  })

  afterAll(async () => {
    await stack?.close()
    await stopAll()
  })

  it('POST /api/orders: generated headers and bodies get their exact problem and write nothing; the valid ones create one order each', async () => {
    const before = await countRows(stack.sql)
    let created = 0
    const authorizationCase = fc.oneof(
      { weight: 15, arbitrary: fc.constant(valid(undefined)) },
      { weight: 1, arbitrary: fc.oneof(
        fc.constant(undefined),
        visibleAscii(1, 600).map(token => `Bearer ${token}`),
        fc.constantFrom('Bearer', 'Bearer ', 'Basic KEY', 'Bearer  KEY', 'Bearer KEY x', 'Bearer KEYx', 'Bearer KE'),
      ).map(invalid) },
    )

    await fc.assert(fc.asyncProperty(
      authorizationCase, idempotencyKeyCase, requestIdCase, contentTypeCase, bodyCase, sizeCase, whitespace, fc.constantFrom<Transport>('content-length', 'chunked'),
      async (authorization, key, requestId, contentType, body, size, filler, transport) => {
        const secretKey = stack.tenant.secretKey
        const authorizationValue = authorization.valid ? `Bearer ${secretKey}` : authorization.value?.replace('KEY', secretKey)
        const keyValue = key.valid ? `${randomUUID()}${key.value}` : key.value
        const { bytes, cartId } = withFreshCart(padded(body.bytes, size, filler))
        const headers: Record<string, string> = {}
        if (authorizationValue !== undefined) headers.authorization = authorizationValue
        if (keyValue !== undefined) headers['idempotency-key'] = keyValue
        if (requestId.value !== undefined) headers['x-request-id'] = requestId.value
        if (contentType.value !== undefined) headers['content-type'] = contentType.value

        // The order of checks: authenticate, key, content type, size, JSON, schema.
        const expected: Expected = !authorization.valid
          ? 'unauthorized'
          : !key.valid
              ? (key.value ? 'idempotency-key-invalid' : 'idempotency-key-missing')
              : !contentType.valid
                  ? 'unsupported-media-type'
                  : bytes.length > MAX_BODY_BYTES ? 'payload-too-large' : body.expected

        const response = await send(stack.app.url, '/api/orders', headers, bytes, transport)
        const context = `${body.what}; expected ${expected}; ${transport}; headers ${JSON.stringify(headers)}; body ${preview(bytes)}\n→ ${response.status} ${response.text.slice(0, 500)}`
        expect(response.status, context).toBeLessThan(500)
        if (expected === 'created') {
          expect(response.status, context).toBe(201)
          expect(response.json, context).toMatchObject({ object: 'order', status: 'pending_payment', cartId, idempotency: { key: keyValue, replayed: false } })
          expect(response.headers.get('location'), context).toBe(`/api/orders/${response.json.id}`)
          created++
        }
        else {
          expectAnyProblem(response, [expected as ProblemSlug], context)
        }
        // A valid X-Request-Id is echoed; any other is replaced by a generated one.
        if (requestId.value !== undefined && requestId.valid) expect(response.headers.get('x-request-id'), context).toBe(requestId.value)
        else expect(response.headers.get('x-request-id'), context).toMatch(/^req_[0-9a-f-]{36}$/)
      },
    ), { numRuns: RUNS.orders, endOnFailure: true })

    expect(created).toBeGreaterThan(0)
    expect(await countRows(stack.sql)).toEqual({ ...before, orders: before.orders + created, idempotencyRecords: before.idempotencyRecords + created })
  })

  it.each(['standard', 'stripe'] as const)('POST /api/webhooks/%s: forged, replayed and garbled signature headers on any body are 401 (413 past 64 KiB) and store nothing', async (provider) => {
    const before = await webhookRowCounts(stack.sql)
    const delivery = fc.tuple(anyWebhookBody, sizeCase, whitespace, fc.constantFrom<Transport>('content-length', 'chunked')).chain(([body, size, filler, transport]) => {
      const bytes = padded(body, size, filler)
      return (provider === 'standard' ? forgedStandard(bytes) : forgedStripe(bytes)).map(forged => ({ ...forged, bytes, transport, [fc.toStringMethod]: () => `${forged.what}; ${transport}; body ${JSON.stringify(preview(bytes))}` }))
    })
    await fc.assert(fc.asyncProperty(delivery, async ({ what, headers, bytes, transport }) => {
      const response = await send(stack.app.url, `/api/webhooks/${provider}`, headers, bytes, transport)
      const expected: ProblemSlug = bytes.length > MAX_BODY_BYTES ? 'payload-too-large' : 'webhook-signature-invalid'
      const context = `${what}; expected ${expected}; ${transport}; headers ${JSON.stringify(headers).slice(0, 1000)}; body ${preview(bytes)}\n→ ${response.status} ${response.text.slice(0, 500)}`
      expect(response.status, context).toBeLessThan(500)
      expectAnyProblem(response, [expected], context)
    }), { numRuns: RUNS.forgedWebhooks, endOnFailure: true })
    expect(await webhookRowCounts(stack.sql)).toEqual(before)
  })

  it.each(['standard', 'stripe'] as const)('POST /api/webhooks/%s: correctly signed bodies that are no event are 400 payload-invalid and store nothing; valid events are stored once each', async (provider) => {
    const before = await webhookRowCounts(stack.sql)
    let received = 0
    await fc.assert(fc.asyncProperty(
      provider === 'standard' ? signedStandardCase : signedStripeCase, sizeCase, whitespace, fc.constantFrom<Transport>('content-length', 'chunked'),
      async (body, size, filler, transport) => {
        const eventId = freshEventId()
        const bytes = replaced(padded(body.bytes, size, filler), EVENT_PLACEHOLDER, eventId)
        const at = String(nowSeconds())
        const webhookId = body.badId ?? `msg_${randomUUID().replaceAll('-', '')}`
        const headers: Record<string, string> = provider === 'standard'
          ? { 'content-type': 'application/json', 'webhook-id': webhookId, 'webhook-timestamp': at, 'webhook-signature': standardSignature(standardKey, webhookId, at, bytes) }
          : { 'content-type': 'application/json', 'stripe-signature': `t=${at},v1=${stripeV1(testSecrets.webhookStripeSecret, at, bytes)}` }
        const expected = bytes.length > MAX_BODY_BYTES ? 'payload-too-large' : body.expected
        const response = await send(stack.app.url, `/api/webhooks/${provider}`, headers, bytes, transport)
        const context = `${body.what}; expected ${expected}; ${transport}; headers ${JSON.stringify(headers).slice(0, 1000)}; body ${preview(bytes)}\n→ ${response.status} ${response.text.slice(0, 500)}`
        expect(response.status, context).toBeLessThan(500)
        if (expected === 'received') {
          expect(response.status, context).toBe(200)
          expect(response.json, context).toMatchObject({ received: true, eventId: provider === 'standard' ? webhookId : eventId, idempotency: { replayed: false } })
          received++
        }
        else {
          expectAnyProblem(response, [expected], context)
        }
      },
    ), { numRuns: RUNS.signedWebhooks, endOnFailure: true })

    expect(received).toBeGreaterThan(0)
    // One event, one idempotency record and one webhook.apply job per accepted event; no worker runs, so no history.
    expect(await webhookRowCounts(stack.sql)).toEqual({
      ...before,
      webhookEvents: before.webhookEvents + received,
      idempotencyRecords: before.idempotencyRecords + received,
      jobs: before.jobs + received,
    })
  })
})
