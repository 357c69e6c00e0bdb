import { request as httpRequest } from 'node:http'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { stopAll } from '../support/app'
import { statusAndHeaders, type TestResponse } from '../support/http'
import { countRows, expectCreatedOrder, expectProblem, newIdempotencyKey, type OrdersStack, postOrder, startOrdersStack, validOrderBody } from '../support/orders'
import { describeWithServices } from '../support/services'

// draft-ietf-httpapi-idempotency-key-header §2.1: the key is an RFC 8941 sf-string. A quoted key is
// its unquoted string, so `"k1"` and `k1` are one key; an invalid sf-string, or the header sent twice,
// is a 400 that stores nothing.

/** Sends the Idempotency-Key header once per value, as separate header lines (fetch would join them first). */
function postWithKeyLines(baseUrl: string, secretKey: string, keys: string[], body: unknown): Promise<TestResponse> {
  const payload = JSON.stringify(body)
  return new Promise((resolve, reject) => {
    const sent = httpRequest(new URL('/api/orders', baseUrl), {
      method: 'POST',
      headers: { 'authorization': `Bearer ${secretKey}`, 'content-type': 'application/json', 'idempotency-key': keys },
    }, (response) => {
      let text = ''
      response.setEncoding('utf8').on('data', (chunk: string) => { text += chunk }).on('end', () => {
        resolve({ ...statusAndHeaders(response), text, json: text ? JSON.parse(text) : undefined })
      })
    })
    sent.on('error', reject)
    sent.end(payload)
  })
}

describeWithServices('Idempotency-Key as an RFC 8941 string (IETF draft)', ['postgres', 'redis'], () => {
  let stack: OrdersStack

  beforeAll(async () => {
    stack = await startOrdersStack('key-header')
  })

  afterAll(async () => {
    await stack?.close()
    await stopAll()
  })

  const post = (header: string, body: unknown) => postOrder(stack.app.url, { secretKey: stack.tenant.secretKey, key: header, body })

  it('a quoted key and the same key bare replay each other, in both orders: one order, one record', async () => {
    for (const [first, second] of [['quoted', 'bare'], ['bare', 'quoted']] as const) {
      const key = newIdempotencyKey()
      const header = { quoted: `"${key}"`, bare: key }
      const body = validOrderBody()
      const before = await countRows(stack.sql)

      const created = await post(header[first], body)
      expectCreatedOrder(created, body, key, false)
      const replayed = await post(header[second], body)
      expectCreatedOrder(replayed, body, key, true)
      expect(replayed.json.id).toBe(created.json.id)

      const after = await countRows(stack.sql)
      expect(after.orders - before.orders).toBe(1)
      const records = await stack.sql`select key from idempotency_records where key = ${key}`
      expect(records).toHaveLength(1)
    }
  })

  it('unescapes \\" and \\\\ inside the quotes: the stored key is the unquoted string', async () => {
    const key = `${newIdempotencyKey()}-"quoted"-\\back`
    const body = validOrderBody()
    const created = await post(`"${key.replace(/[\\"]/g, char => `\\${char}`)}"`, body)
    expectCreatedOrder(created, body, key, false)
    expectCreatedOrder(await post(key, body), body, key, true)
  })

  it.each([
    ['an unterminated string', '"k1'],
    ['an empty string', '""'],
    ['a space inside the quotes', '"order 1"'],
    ['an unescaped backslash', String.raw`"a\b"`],
    ['two strings in one line', '"k1", "k2"'],
  ])('%s is 400 idempotency-key-invalid and stores nothing', async (_, header) => {
    const before = await countRows(stack.sql)
    const response = await post(header, validOrderBody())
    expectProblem(response, 'idempotency-key-invalid')
    expect(response.json.detail).toContain('RFC 8941')
    expect(await countRows(stack.sql)).toEqual(before)
  })

  it('the header sent twice (draft §2.1: clients MUST NOT) is 400 idempotency-key-invalid, bare or quoted, and stores nothing', async () => {
    for (const keys of [[newIdempotencyKey(), newIdempotencyKey()], [`"${newIdempotencyKey()}"`, `"${newIdempotencyKey()}"`]]) {
      const before = await countRows(stack.sql)
      const response = await postWithKeyLines(stack.app.url, stack.tenant.secretKey, keys, validOrderBody())
      expectProblem(response, 'idempotency-key-invalid')
      expect(await countRows(stack.sql)).toEqual(before)
    }
  })
})
