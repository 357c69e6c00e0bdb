import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { describe, expect, it } from 'vitest'
import { endpointUrlRefusal, nonPublicKind } from '../../server/webhook-endpoints/address-guard'
import { retryDelayMs } from '../../server/webhook-endpoints/retry-schedule'
import { postWebhook } from '../../server/webhook-endpoints/send'

// Where webhook deliveries may go (docs/events.md#which-addresses-an-endpoint-may-have), the wait
// between attempts, and one POST bounded in time and size.

describe('nonPublicKind', () => {
  it.each([
    ['0.0.0.0', 'unspecified'], ['0.1.2.3', 'unspecified'], ['::', 'unspecified'],
    ['127.0.0.1', 'loopback'], ['127.255.255.254', 'loopback'], ['::1', 'loopback'],
    ['10.0.0.1', 'private'], ['172.16.0.1', 'private'], ['172.31.255.255', 'private'], ['192.168.1.1', 'private'], ['100.64.0.1', 'private'], ['100.127.255.255', 'private'],
    ['fc00::1', 'private'], ['fd12:3456::1', 'private'],
    ['169.254.169.254', 'link-local'], ['fe80::1', 'link-local'], ['febf::1', 'link-local'],
    ['224.0.0.1', 'multicast'], ['239.255.255.250', 'multicast'], ['ff02::1', 'multicast'],
    ['240.0.0.1', 'reserved'], ['255.255.255.255', 'reserved'], ['192.0.2.10', 'reserved'], ['198.51.100.1', 'reserved'], ['203.0.113.1', 'reserved'],
    ['198.18.0.1', 'reserved'], ['2001:db8::1', 'reserved'], ['fec0::1', 'reserved'], ['::1.2.3.4', 'reserved'],
    // IPv4-mapped IPv6, dotted and as a URL writes it: judged as the IPv4 address.
    ['::ffff:127.0.0.1', 'loopback'], ['::ffff:7f00:1', 'loopback'], ['::ffff:10.1.2.3', 'private'], ['::ffff:a9fe:a9fe', 'link-local'],
    ['not an address', 'reserved'],
  ])('%s is %s', (address, kind) => {
    expect(nonPublicKind(address)).toBe(kind)
  })

  it.each(['8.8.8.8', '1.1.1.1', '172.15.255.255', '172.32.0.0', '100.63.255.255', '100.128.0.0', '169.253.0.1', '192.169.0.1', '223.255.255.255',
    '2606:4700:4700::1111', '2001:4860:4860::8888', '::ffff:8.8.8.8', '::ffff:808:808'])('%s is public', (address) => {
    expect(nonPublicKind(address)).toBeUndefined()
  })
})

describe('endpointUrlRefusal', () => {
  const allow = 'WEBHOOK_ENDPOINTS_ALLOW_PRIVATE=true allows it, for tests and a laptop'

  it('refuses http: and addresses that are not public unless private addresses are allowed', async () => {
    expect(await endpointUrlRefusal(new URL('http://8.8.8.8/hook'), false)).toBe(`must be an https: URL (${allow})`)
    expect(await endpointUrlRefusal(new URL('https://127.0.0.1/hook'), false))
      .toBe(`its host "127.0.0.1" resolves to 127.0.0.1, a loopback address; endpoints must be reachable on the public internet (${allow})`)
    expect(await endpointUrlRefusal(new URL('https://[::ffff:169.254.169.254]/'), false))
      .toBe(`its host "::ffff:a9fe:a9fe" resolves to ::ffff:a9fe:a9fe, a link-local address; endpoints must be reachable on the public internet (${allow})`)
    // Other spellings of an IPv4 address are normalised by the URL parser.
    expect(await endpointUrlRefusal(new URL('https://2130706433/'), false)).toContain('resolves to 127.0.0.1, a loopback address')
    expect(await endpointUrlRefusal(new URL('https://localhost/hook'), false)).toMatch(/^its host "localhost" resolves to (127\.0\.0\.1|::1), a loopback address;/)
    expect(await endpointUrlRefusal(new URL('https://8.8.8.8/hook'), false)).toBeUndefined()
  })

  it('refuses a host that does not resolve', async () => {
    expect(await endpointUrlRefusal(new URL('https://no-such-host.invalid/'), false))
      .toBe('its host "no-such-host.invalid" does not resolve (ENOTFOUND): use a name with a public DNS record')
  })

  it('allows any http: or https: URL with WEBHOOK_ENDPOINTS_ALLOW_PRIVATE', async () => {
    expect(await endpointUrlRefusal(new URL('http://127.0.0.1:9/hook'), true)).toBeUndefined()
    expect(await endpointUrlRefusal(new URL('https://no-such-host.invalid/'), true)).toBeUndefined()
  })
})

describe('retryDelayMs', () => {
  const schedule = [5000, 60_000, 300_000]

  it('waits the schedule\'s entry for the failed attempt, ±20 %, and nothing once it is spent', () => {
    expect(retryDelayMs(schedule, 1, () => 0.5)).toBe(5000)
    expect(retryDelayMs(schedule, 1, () => 0)).toBe(4000)
    expect(retryDelayMs(schedule, 1, () => 0.999_999)).toBe(6000)
    expect(retryDelayMs(schedule, 2, () => 0)).toBe(48_000)
    expect(retryDelayMs(schedule, 3, () => 1)).toBe(360_000)
    expect(retryDelayMs(schedule, 4, () => 0.5)).toBeUndefined()
  })

  it('stays within the jitter for any draw', () => {
    for (let draw = 0; draw < 1; draw += 0.01) {
      const wait = retryDelayMs(schedule, 2, () => draw)!
      expect(wait).toBeGreaterThanOrEqual(48_000)
      expect(wait).toBeLessThanOrEqual(72_000)
    }
  })
})

describe('postWebhook', () => {
  async function withServer(handler: Parameters<typeof createServer>[1], run: (url: string) => Promise<void>) {
    const server = createServer(handler)
    await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
    try {
      await run(`http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`)
    }
    finally {
      server.closeAllConnections()
      await new Promise(resolve => server.close(resolve))
    }
  }
  const post = (url: string, overrides: Partial<Parameters<typeof postWebhook>[0]> = {}) =>
    postWebhook({ url, headers: { 'content-type': 'application/json' }, body: '{"a":1}', timeoutMs: 2000, allowPrivate: true, ...overrides })

  it('answers the status and the first 1 KiB of the body, and reads no more than 64 KiB of an endless one', async () => {
    await withServer((_request, response) => {
      response.writeHead(500)
      const chunk = 'x'.repeat(16 * 1024)
      // Never ends: the sender must stop reading by itself.
      const timer = setInterval(() => response.write(chunk), 1)
      response.on('close', () => clearInterval(timer))
    }, async (url) => {
      const answer = await post(url)
      expect(answer.statusCode).toBe(500)
      expect(answer.responseExcerpt).toBe('x'.repeat(1024))
      expect(answer.error).toBeUndefined()
    })
  })

  it('does not follow a redirect', async () => {
    await withServer((_request, response) => {
      response.writeHead(302, { location: 'http://127.0.0.1:1/elsewhere' }).end('moved')
    }, async (url) => {
      expect(await post(url)).toMatchObject({ statusCode: 302, responseExcerpt: 'moved' })
    })
  })

  it('gives up after the timeout', async () => {
    await withServer(() => {}, async (url) => {
      const answer = await post(url, { timeoutMs: 200 })
      expect(answer).toMatchObject({ error: 'timeout: no complete answer within 200 ms' })
      expect(answer.statusCode).toBeUndefined()
      expect(answer.latencyMs).toBeGreaterThanOrEqual(190)
    })
  })

  it('refuses to connect to a loopback address unless private addresses are allowed, by literal and by name', async () => {
    let received = 0
    await withServer((_request, response) => {
      received++
      response.end()
    }, async (url) => {
      expect(await post(url, { allowPrivate: false })).toMatchObject({ error: `address refused: 127.0.0.1 resolves to 127.0.0.1, a loopback address: refused (WEBHOOK_ENDPOINTS_ALLOW_PRIVATE is off)` })
      const byName = await post(url.replace('127.0.0.1', 'localhost'), { allowPrivate: false })
      expect(byName.error).toMatch(/^address refused: localhost resolves to (127\.0\.0\.1|::1), a loopback address/)
      expect(received).toBe(0)
      expect((await post(url)).statusCode).toBe(200)
      expect(received).toBe(1)
    })
  })
})
