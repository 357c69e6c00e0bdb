import { lookup as dnsLookup, type LookupAddress } from 'node:dns'
import { promises as dns } from 'node:dns'
import { BlockList, isIP, type LookupFunction } from 'node:net'

/**
 * Where webhook deliveries may go (docs/events.md#which-addresses-an-endpoint-may-have): a shop's
 * endpoint URL must not let it reach into the network the app runs in. Unless
 * WEBHOOK_ENDPOINTS_ALLOW_PRIVATE is on, a URL is `https:` and every address its host resolves to is
 * public — checked when the endpoint is created or changed, and again on the address each delivery
 * connects to (DNS can change in between, or answer differently on each lookup).
 */

export type AddressKind = 'unspecified' | 'loopback' | 'private' | 'link-local' | 'multicast' | 'reserved'

const ranges: Record<AddressKind, Array<[string, number, 'ipv4' | 'ipv6']>> = {
  'unspecified': [['0.0.0.0', 8, 'ipv4'], ['::', 128, 'ipv6']],
  'loopback': [['127.0.0.0', 8, 'ipv4'], ['::1', 128, 'ipv6']],
  'private': [['10.0.0.0', 8, 'ipv4'], ['172.16.0.0', 12, 'ipv4'], ['192.168.0.0', 16, 'ipv4'], ['100.64.0.0', 10, 'ipv4'], ['fc00::', 7, 'ipv6']],
  'link-local': [['169.254.0.0', 16, 'ipv4'], ['fe80::', 10, 'ipv6']],
  'multicast': [['224.0.0.0', 4, 'ipv4'], ['ff00::', 8, 'ipv6']],
  'reserved': [
    // IETF protocol assignments, documentation, benchmarking, the future-use block with the broadcast address.
    ['192.0.0.0', 24, 'ipv4'], ['192.0.2.0', 24, 'ipv4'], ['198.51.100.0', 24, 'ipv4'], ['203.0.113.0', 24, 'ipv4'], ['198.18.0.0', 15, 'ipv4'], ['240.0.0.0', 4, 'ipv4'],
    // ::/96 past the two above (the deprecated IPv4-compatible addresses), discard-only, documentation, deprecated site-local.
    ['::', 96, 'ipv6'], ['100::', 64, 'ipv6'], ['2001:db8::', 32, 'ipv6'], ['fec0::', 10, 'ipv6'],
  ],
}

// Checked in this order: an address in two ranges (::1 is also in ::/8) is named by the first.
const blockLists = Object.entries(ranges).map(([kind, subnets]) => {
  const list = new BlockList()
  for (const [network, prefix, type] of subnets) list.addSubnet(network, prefix, type)
  return { kind: kind as AddressKind, list }
})

const IPV4_MAPPED_DOTTED = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i
// How a URL writes one (new URL('http://[::ffff:127.0.0.1]').hostname is [::ffff:7f00:1]).
const IPV4_MAPPED_HEX = /^::ffff:([\da-f]{1,4}):([\da-f]{1,4})$/i

/** The IPv4 address an IPv4-mapped IPv6 address reaches, or undefined. */
function mappedIpv4(address: string): string | undefined {
  const dotted = IPV4_MAPPED_DOTTED.exec(address)?.[1]
  if (dotted) return dotted
  const hex = IPV4_MAPPED_HEX.exec(address)
  if (!hex) return undefined
  const [high, low] = [Number.parseInt(hex[1]!, 16), Number.parseInt(hex[2]!, 16)]
  return [high >> 8, high & 0xFF, low >> 8, low & 0xFF].join('.')
}

/**
 * What keeps an IP address from being a webhook target, or undefined for a public one. An
 * IPv4-mapped IPv6 address (`::ffff:127.0.0.1`) is judged as the IPv4 address it reaches.
 */
export function nonPublicKind(address: string): AddressKind | undefined {
  const ip = mappedIpv4(address) ?? address
  const family = isIP(ip)
  if (family === 0) return 'reserved'
  const type = family === 4 ? 'ipv4' : 'ipv6'
  return blockLists.find(({ list }) => list.check(ip, type))?.kind
}

/** A delivery's connection refused by the guard: the host resolved to an address that is not public. */
export class AddressRefusedError extends Error {
  readonly code = 'EADDRREFUSED'
  constructor(readonly host: string, readonly address: string, readonly kind: AddressKind) {
    super(`${host} resolves to ${address}, a ${kind} address: refused (WEBHOOK_ENDPOINTS_ALLOW_PRIVATE is off)`)
    this.name = 'AddressRefusedError'
  }
}

/** A URL's host as DNS and `net` take it: an IPv6 literal without its brackets. */
export const hostOf = (url: URL) => url.hostname.replace(/^\[(.*)\]$/, '$1')

const allowSetting = 'WEBHOOK_ENDPOINTS_ALLOW_PRIVATE=true allows it, for tests and a laptop'

/**
 * Why an endpoint URL is refused, as one sentence for the shop, or undefined when it may be used.
 * Resolves its host (a literal IP is its own address); with `allowPrivate`, any http: or https: URL
 * is accepted without a lookup.
 */
export async function endpointUrlRefusal(url: URL, allowPrivate: boolean): Promise<string | undefined> {
  if (allowPrivate) return undefined
  if (url.protocol !== 'https:') return `must be an https: URL (${allowSetting})`
  const host = hostOf(url)
  let addresses: LookupAddress[]
  try {
    addresses = isIP(host) ? [{ address: host, family: isIP(host) }] : await dns.lookup(host, { all: true, verbatim: true })
  }
  catch (error) {
    return `its host "${host}" does not resolve (${(error as { code?: string }).code ?? 'lookup failed'}): use a name with a public DNS record`
  }
  for (const { address } of addresses) {
    const kind = nonPublicKind(address)
    if (kind) return `its host "${host}" resolves to ${address}, a ${kind} address; endpoints must be reachable on the public internet (${allowSetting})`
  }
  return undefined
}

/**
 * A `lookup` for node:http(s) `request` that resolves as usual and refuses the connection when any
 * address is not public: the check runs on what the socket will connect to. A literal IP in the URL
 * is never looked up by node, so the caller checks that itself (see assertPublicLiteral).
 */
export const publicOnlyLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error) return callback(error, '', 4)
    const refused = addresses.map(({ address }) => ({ address, kind: nonPublicKind(address) })).find(({ kind }) => kind)
    if (refused) return callback(new AddressRefusedError(hostname, refused.address, refused.kind!), '', 4)
    if (options.all) return (callback as unknown as (error: null, addresses: LookupAddress[]) => void)(null, addresses)
    callback(null, addresses[0]!.address, addresses[0]!.family)
  })
}

/** Throws AddressRefusedError when the URL's host is a literal IP that is not public. */
export function assertPublicLiteral(url: URL): void {
  const host = hostOf(url)
  if (!isIP(host)) return
  const kind = nonPublicKind(host)
  if (kind) throw new AddressRefusedError(host, host, kind)
}
