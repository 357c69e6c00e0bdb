import postgres from 'postgres'
import { afterAll, describe, expect, it } from 'vitest'
import { literal, withLiterals } from '../src/literals'

/**
 * Behind a transaction pooler statements go with their values written into the text. Each value
 * must reach Postgres as the same value it would have been as a parameter: checked against a real
 * Postgres, the literal's text and the parameter's compared by Postgres itself.
 */

const url = process.env.TEST_POSTGRES_URL ?? 'postgres://root@127.0.0.1:5432/postgres'
const sql = postgres(url, { max: 1, onnotice: () => {} })
// As drizzle sets up postgres.js: a JSON value arrives as its text, and is sent as it is.
for (const json of [114, 3802]) sql.options.serializers[json] = (value: unknown) => value as string
afterAll(() => sql.end({ timeout: 1 }))

describe('values written into the statement text', () => {
  it.each([
    ['a plain string', 'hello', 'text'],
    ['quotes and backslashes', `it's a \\ back\\slash and ''two'' and \\'`, 'text'],
    ['an injection attempt', `'); drop table x; --`, 'text'],
    ['unicode', 'Grüße 🧾 東京', 'text'],
    ['an integer', 42, 'int'],
    ['a negative decimal', -12.5, 'numeric'],
    ['a bigint', 9007199254740993n, 'bigint'],
    ['true', true, 'boolean'],
    ['false', false, 'boolean'],
    ['a date', new Date('2026-12-06T10:11:12.345Z'), 'timestamptz'],
    ['JSON text', JSON.stringify({ a: 'it\'s', b: [1, 2], c: '\\' }), 'jsonb'],
    ['an object as JSON', { a: 'it\'s', nested: { b: null } }, 'jsonb'],
    ['bytes', Buffer.from([0, 1, 39, 92, 255]), 'bytea'],
    ['a text array', ['a', 'b,c', 'd"e', 'f\\g', 'h\'i', ''], 'text[]'],
    ['an integer array', [1, 2, 3], 'int[]'],
    ['an array with a null', ['x', null], 'text[]'],
  ])('%s reaches Postgres as the parameter would', async (_, value, cast) => {
    const [row] = await sql.unsafe(`select (${literal(value)}::${cast})::text as literal`, [] as never[])
    const parameterValue = typeof value === 'object' && value !== null && !(value instanceof Date) && !(value instanceof Uint8Array) && !Array.isArray(value) ? JSON.stringify(value) : value
    const [byParameter] = await sql.unsafe(`select ($1::${cast})::text as value`, [parameterValue] as never[])
    expect(row!.literal).toBe(byParameter!.value)
  })

  it('null is NULL, unquoted', async () => {
    expect(literal(null)).toBe('NULL')
    const [row] = await sql.unsafe(withLiterals({ text: 'select $1::text is null as missing', params: [null] }), [] as never[])
    expect(row!.missing).toBe(true)
  })

  it('a literal is typed by its context, as a parameter is', async () => {
    // `'5'` (unknown) compares with text and with integers alike; a bare 5 would not compare with text.
    const [row] = await sql.unsafe(withLiterals({ text: `select 'x5' = 'x' || $1 as with_text, 7 = $2 + 2 as with_integer, 'b' = any($3) as in_array`, params: [5, 5, ['a', 'b']] }), [] as never[])
    expect(row).toEqual({ with_text: true, with_integer: true, in_array: true })
  })

  it('replaces $10 as a whole, not $1 followed by 0', () => {
    const params = Array.from({ length: 10 }, (_, index) => `v${index + 1}`)
    expect(withLiterals({ text: 'select $1, $10', params })).toBe(`select E'v1', E'v10'`)
  })

  it('refuses a placeholder without a value and a value Postgres cannot hold', () => {
    expect(() => withLiterals({ text: 'select $2', params: ['a'] })).toThrow('Statement parameter $2 has no value (1 given).')
    expect(() => literal('a\0b')).toThrow('NUL')
    expect(() => literal(Symbol('s'))).toThrow('cannot be sent')
  })

  it('leaves a text without parameters as it is', () => {
    expect(withLiterals({ text: 'select 1', params: [] })).toBe('select 1')
  })
})
