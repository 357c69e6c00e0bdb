import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { canonicalJson } from '../../packages/nuxt-idempotency/src/runtime/core/fingerprint'
import { fingerprint, type FingerprintInput } from 'nuxt-idempotency/core'
import { CreateOrderSchema } from '../../server/orders/schema'
import {
  orderCustomerFields, orderItemFields, orderTopLevelFields, exampleOrder, unknownFieldsArbitrary,
  validOrderArbitrary,
} from '../support/order-arbitraries'

type Json = null | boolean | number | string | Json[] | { [key: string]: Json }
type PathStep = string | number
type PickIndex = (length: number) => number

const ORDERS_ROUTE = 'POST /api/orders'
const SCOPE = 'tenant:ten_fingerprint'

const jsonObject = fc.dictionary(fc.string(), fc.jsonValue(), { minKeys: 1 }) as fc.Arbitrary<Record<string, Json>>

const isObject = (value: Json): value is { [key: string]: Json } =>
  value !== null && typeof value === 'object' && !Array.isArray(value)

/** The same value with the keys of every object re-inserted in a shuffled order. */
function shuffleKeysDeep(value: Json, pickIndex: PickIndex): Json {
  if (Array.isArray(value)) return value.map(element => shuffleKeysDeep(element, pickIndex))
  if (!isObject(value)) return value
  const entries = Object.entries(value)
  for (let i = entries.length - 1; i > 0; i--) {
    const j = pickIndex(i + 1)
    ;[entries[i], entries[j]] = [entries[j]!, entries[i]!]
  }
  // fromEntries defines own properties, so a "__proto__" key stays an ordinary key.
  return Object.fromEntries(entries.map(([key, child]) => [key, shuffleKeysDeep(child, pickIndex)]))
}

/** Paths to every leaf: primitives and empty arrays or objects. */
function leafPaths(value: Json, path: PathStep[] = []): PathStep[][] {
  if (Array.isArray(value) && value.length > 0) return value.flatMap((child, i) => leafPaths(child, [...path, i]))
  if (isObject(value) && Object.keys(value).length > 0) {
    return Object.entries(value).flatMap(([key, child]) => leafPaths(child, [...path, key]))
  }
  return [path]
}

function valueAt(value: Json, path: PathStep[]): Json {
  return path.reduce<Json>((node, step) => (node as Record<PathStep, Json>)[step]!, value)
}

/** A copy of `value` with the node at `path` replaced; the original is left untouched. */
function replaceAt(value: Json, path: PathStep[], replacement: Json): Json {
  if (path.length === 0) return replacement
  const [step, ...rest] = path
  if (Array.isArray(value)) return value.map((child, i) => (i === step ? replaceAt(child, rest, replacement) : child))
  return Object.fromEntries(Object.entries(value as Record<string, Json>)
    .map(([key, child]) => [key, key === step ? replaceAt(child, rest, replacement) : child]))
}

const fingerprintOf = (payload: unknown, overrides: Partial<FingerprintInput> = {}) =>
  fingerprint({ method: 'POST', route: ORDERS_ROUTE, scope: SCOPE, payload, ...overrides })

describe('canonicalJson', () => {
  it('sorts keys at every depth, keeps array order and drops whitespace', () => {
    expect(canonicalJson({ b: [3, { z: 1, a: 2 }, 1], a: { d: null, c: 'x y' } }))
      .toBe('{"a":{"c":"x y","d":null},"b":[3,{"a":2,"z":1},1]}')
  })
})

describe('fingerprint', () => {
  it('matches the known answer for the example order of docs/api.md', () => {
    // sha256 of ["POST","POST /api/orders","tenant:ten_known_answer",<canonical example order>], computed once with sha256sum.
    expect(fingerprint({ method: 'POST', route: ORDERS_ROUTE, scope: 'tenant:ten_known_answer', payload: exampleOrder }))
      .toBe('cba58b1b472b527b27521b9a568281aee48adb82bbdfa4e856422b99c57e30a2')
  })

  it('is a lower-case SHA-256 hex digest', () => {
    fc.assert(fc.property(fc.jsonValue(), (payload) => {
      expect(fingerprintOf(payload)).toMatch(/^[0-9a-f]{64}$/)
    }))
  })

  it('ignores key order at every depth and whitespace', () => {
    fc.assert(fc.property(jsonObject, fc.array(fc.nat(), { minLength: 1 }), (payload, choices) => {
      let draw = 0
      const shuffled = shuffleKeysDeep(payload, length => choices[draw++ % choices.length]! % length)
      const reparsed = JSON.parse(JSON.stringify(shuffled, null, 2)) as Json
      expect(fingerprintOf(reparsed)).toBe(fingerprintOf(payload))
    }))
  })

  it('changes when any one leaf value changes', () => {
    // Independent arbitraries (no fc.gen or filter on the payload): shrinking a failure stays fast.
    fc.assert(fc.property(jsonObject, fc.nat(), fc.jsonValue() as fc.Arbitrary<Json>, (payload, choice, replacement) => {
      const paths = leafPaths(payload)
      const path = paths[choice % paths.length]!
      fc.pre(JSON.stringify(replacement) !== JSON.stringify(valueAt(payload, path)))
      expect(fingerprintOf(replaceAt(payload, path, replacement))).not.toBe(fingerprintOf(payload))
    }))
  })

  it('changes with the method, treating its case as irrelevant', () => {
    const methods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE']
    fc.assert(fc.property(jsonObject, fc.uniqueArray(fc.constantFrom(...methods), { minLength: 2, maxLength: 2 }), (payload, [first, second]) => {
      expect(fingerprintOf(payload, { method: first })).not.toBe(fingerprintOf(payload, { method: second }))
    }))
    expect(fingerprintOf(exampleOrder, { method: 'post' })).toBe(fingerprintOf(exampleOrder, { method: 'POST' }))
  })

  it.each(['route', 'scope'] as const)('changes with the %s', (field) => {
    fc.assert(fc.property(jsonObject, fc.uniqueArray(fc.string(), { minLength: 2, maxLength: 2 }), (payload, [first, second]) => {
      expect(fingerprintOf(payload, { [field]: first })).not.toBe(fingerprintOf(payload, { [field]: second }))
    }))
  })

  it('keeps route and scope apart: moving text across the boundary changes it', () => {
    expect(fingerprintOf(exampleOrder, { route: 'POST /api/orders', scope: 'tenant:a' }))
      .not.toBe(fingerprintOf(exampleOrder, { route: 'POST /api/orderstenant:', scope: 'a' }))
  })

  it('ignores unknown fields once the payload went through CreateOrderSchema', () => {
    const withUnknownFields = fc.record({
      topLevel: unknownFieldsArbitrary(orderTopLevelFields),
      customer: unknownFieldsArbitrary(orderCustomerFields),
      items: fc.array(unknownFieldsArbitrary(orderItemFields), { minLength: 100, maxLength: 100 }),
    })
    fc.assert(fc.property(validOrderArbitrary, withUnknownFields, (order, extra) => {
      const padded = {
        ...extra.topLevel,
        ...order,
        customer: { ...extra.customer, ...order.customer },
        items: order.items.map((item, i) => ({ ...item, ...extra.items[i] })),
      }
      const plain = CreateOrderSchema.safeParse(order)
      const stripped = CreateOrderSchema.safeParse(padded)
      expect(plain.success).toBe(true)
      expect(stripped.success).toBe(true)
      expect(stripped.data).toEqual(order)
      expect(fingerprintOf(stripped.data)).toBe(fingerprintOf(plain.data))
    }))
  })
})
