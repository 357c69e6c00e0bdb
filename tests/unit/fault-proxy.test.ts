import http from 'node:http'
import type net from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { type FaultProxy, type ProxiedRequest, startFaultProxy } from '../support/fault-proxy'

// The fault proxy against a tiny node:http server that counts what reaches it: each scripted action
// forwards exactly as often as it says, when it says, and the caller sees what it says.

interface Received { method: string, path: string, body: string, at: number }

let server: http.Server
let received: Received[]
let proxy: FaultProxy
/** The far side's statuses for the next requests, in order; 201 when empty. */
let answerStatuses: number[] = []

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      received.push({ method: req.method!, path: req.url!, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() })
      res.writeHead(answerStatuses.shift() ?? 201, { 'content-type': 'application/json', 'x-far': 'yes' })
      res.end(JSON.stringify({ n: received.length }))
    })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  proxy = await startFaultProxy({ target: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}` })
})

afterAll(async () => {
  await proxy.close()
  await new Promise(resolve => server.close(resolve))
})

beforeEach(() => {
  received = []
  answerStatuses = []
  proxy.script.length = 0
  proxy.exchanges.length = 0
})

/** POST through the proxy; the status and body, or the error's code when no answer came. */
async function post(path: string, body: string, timeoutMs = 2_000): Promise<{ status: number, body: string, far?: string } | { error: string }> {
  try {
    const response = await fetch(`${proxy.url}${path}`, { method: 'POST', body, headers: { 'content-type': 'application/json' }, signal: AbortSignal.timeout(timeoutMs) })
    return { status: response.status, body: await response.text(), ...(response.headers.get('x-far') && { far: response.headers.get('x-far')! }) }
  }
  catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause
    return { error: (error as Error).name === 'TimeoutError' ? 'timeout' : cause?.code ?? (error as Error).message }
  }
}

const toPath = (path: string) => (request: ProxiedRequest) => request.path === path

describe('fault proxy', () => {
  it('passes an unscripted request through: method, path with query, body and the far side\'s status, headers and body', async () => {
    expect(await post('/a?x=1', '{"k":1}')).toEqual({ status: 201, body: '{"n":1}', far: 'yes' })
    expect(received.map(({ method, path, body }) => [method, path, body])).toEqual([['POST', '/a?x=1', '{"k":1}']])
    expect(proxy.exchanges.map(exchange => [exchange.action, exchange.forwarded, exchange.answered])).toEqual([['pass', [201], 201]])
  })

  it('status: answers 500, 429 and 406 without forwarding, once each, then passes again', async () => {
    proxy.script.push(
      { match: toPath('/r'), action: { kind: 'status', status: 500, body: { error: 'boom' } } },
      { match: toPath('/r'), action: { kind: 'status', status: 429, headers: { 'retry-after': '1' } } },
      { match: toPath('/r'), action: { kind: 'status', status: 406 } },
    )
    expect(await post('/r', '{}')).toEqual({ status: 500, body: '{"error":"boom"}' })
    expect(await post('/r', '{}')).toEqual({ status: 429, body: '{}' })
    expect(await post('/r', '{}')).toEqual({ status: 406, body: '{}' })
    expect(received).toHaveLength(0)
    expect(await post('/r', '{}')).toMatchObject({ status: 201 })
    expect(received).toHaveLength(1)
    expect(proxy.script).toHaveLength(0)
  })

  it('a rule applies only to the requests it matches, `times` times', async () => {
    proxy.script.push({ match: toPath('/only'), action: { kind: 'status', status: 503 }, times: 2 })
    expect(await post('/other', '{}')).toMatchObject({ status: 201 })
    expect(await post('/only', '{}')).toMatchObject({ status: 503 })
    expect(await post('/only', '{}')).toMatchObject({ status: 503 })
    expect(await post('/only', '{}')).toMatchObject({ status: 201 })
    expect(received.map(request => request.path)).toEqual(['/other', '/only'])
  })

  it('delay past the caller\'s timeout: the caller times out, the far side still gets the request once, after the delay', async () => {
    proxy.script.push({ match: toPath('/slow'), action: { kind: 'delay', ms: 600 } })
    const sent = Date.now()
    expect(await post('/slow', '{"v":2}', 200)).toEqual({ error: 'timeout' })
    expect(received).toHaveLength(0)
    await proxy.idle()
    expect(received).toHaveLength(1)
    expect(received[0]!.at - sent).toBeGreaterThanOrEqual(590)
    expect(received[0]!.body).toBe('{"v":2}')
    await sleep(50)
    expect(proxy.exchanges.map(exchange => [exchange.action, exchange.forwarded, exchange.answered])).toEqual([['delay', [201], 'gone']])
  })

  it('delay within the caller\'s patience: answered late with the far side\'s answer', async () => {
    proxy.script.push({ match: toPath('/late'), action: { kind: 'delay', ms: 200 } })
    const sent = Date.now()
    expect(await post('/late', '{}')).toMatchObject({ status: 201 })
    expect(Date.now() - sent).toBeGreaterThanOrEqual(190)
    expect(received).toHaveLength(1)
  })

  it('hold-answer: the far side acts at once, the caller times out waiting for its answer', async () => {
    proxy.script.push({ match: toPath('/held'), action: { kind: 'hold-answer', ms: 1_000 } })
    const sent = Date.now()
    expect(await post('/held', '{}', 300)).toEqual({ error: 'timeout' })
    expect(received).toHaveLength(1)
    expect(received[0]!.at - sent).toBeLessThan(250)
    await sleep(50)
    expect(proxy.exchanges.map(exchange => [exchange.action, exchange.forwarded, exchange.answered])).toEqual([['hold-answer', [201], 'gone']])
  })

  it('drop-answer: the far side acts once, the caller\'s connection is closed without an answer', async () => {
    proxy.script.push({ match: toPath('/drop'), action: { kind: 'drop-answer' } })
    const result = await post('/drop', '{}')
    expect(result).toHaveProperty('error')
    expect(result).not.toEqual({ error: 'timeout' })
    expect(received).toHaveLength(1)
    expect(proxy.exchanges.map(exchange => [exchange.action, exchange.forwarded, exchange.answered])).toEqual([['drop-answer', [201], 'dropped']])
  })

  it('duplicate: the caller gets the first answer, the far side gets 1 + copies requests', async () => {
    proxy.script.push({ match: toPath('/hook'), action: { kind: 'duplicate', copies: 2, gapMs: 20 } })
    expect(await post('/hook', '{"id":"evt_1"}')).toEqual({ status: 201, body: '{"n":1}', far: 'yes' })
    await proxy.idle()
    expect(received.map(request => request.body)).toEqual(['{"id":"evt_1"}', '{"id":"evt_1"}', '{"id":"evt_1"}'])
    expect(proxy.exchanges[0]!.forwarded).toEqual([201, 201, 201])
  })

  it('queue and release: answered 200 at once, nothing forwarded until released, then in the order asked (reversed), each once', async () => {
    proxy.script.push({ match: request => request.path.startsWith('/q'), action: { kind: 'queue' }, times: Infinity })
    for (const n of [1, 2, 3]) expect(await post(`/q${n}`, `{"n":${n}}`)).toEqual({ status: 200, body: '{}' })
    expect(received).toHaveLength(0)
    expect(proxy.queued().map(request => request.path)).toEqual(['/q1', '/q2', '/q3'])

    await proxy.release({ which: request => request.path !== '/q2', order: queued => [...queued].reverse() })
    expect(received.map(request => request.path)).toEqual(['/q3', '/q1'])
    expect(proxy.queued().map(request => request.path)).toEqual(['/q2'])
    await proxy.release()
    expect(received.map(request => request.path)).toEqual(['/q3', '/q1', '/q2'])
    expect(proxy.queued()).toEqual([])
  })

  it('a released request answered other than 2xx is sent again, up to `retries` times', async () => {
    proxy.script.push({ match: toPath('/q'), action: { kind: 'queue' } })
    await post('/q', '{}')
    answerStatuses = [503, 503, 503, 503]
    await proxy.release({ retries: 2, retryGapMs: 10 })
    expect(received).toHaveLength(3)
    expect(proxy.exchanges[0]!.forwarded).toEqual([503, 503, 503])

    proxy.script.push({ match: toPath('/q'), action: { kind: 'queue' } })
    await post('/q', '{}')
    received = []
    answerStatuses = [500]
    await proxy.release({ retries: 5, retryGapMs: 10 })
    expect(received).toHaveLength(2)
  })
})
