import fc from 'fast-check'
import type { OpenApiDocument } from './prism'

/**
 * fast-check arbitraries derived from an OpenAPI 3.1 document: for each operation, requests whose
 * parameters and body follow the document's JSON schemas, and the same requests mutated the ways
 * clients get them wrong (wrong types, missing required fields, extra fields, bad path parameters,
 * a bad or missing Idempotency-Key, huge strings). openapi-fuzzer-core reads Swagger 2.0 only (body
 * parameters, `definitions`), so it finds no request bodies in a 3.1 document.
 */

export type JsonSchema = Record<string, any>

export interface Parameter { name: string, in: 'path' | 'query' | 'header' | 'cookie', required?: boolean, schema?: JsonSchema }

export interface Operation {
  method: string
  /** The document's path template, e.g. /api/orders/{id}. */
  path: string
  operationId: string
  parameters: Parameter[]
  /** The JSON request body's schema, when the operation takes one. */
  bodySchema?: JsonSchema
  bodyRequired: boolean
  /** Status (or "default", "4XX") → content type → schema (undefined: any body of that type). */
  responses: Record<string, Record<string, JsonSchema | undefined>>
  security: Array<Record<string, string[]>>
}

/** A request as sent: everything needed to replay it. */
export interface FuzzRequest {
  /** "valid", or the mutation that made it invalid. */
  variant: string
  method: string
  /** With path parameters filled in and the query string. */
  path: string
  headers: Record<string, string>
  /** Exact JSON text; undefined sends no body. */
  body?: string
  /** Whether the caller should leave out its credentials. */
  withoutCredentials?: boolean
  /**
   * The path holds encoded router characters or dot segments, to be sent byte for byte (fetch would
   * resolve `%2E%2E`): no resource is named so, so the answer must be 404 whichever route the path
   * would reach once decoded or resolved.
   */
  pathAsSent?: boolean
}

const httpMethods = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'] as const

/** Follows local `$ref`s (#/components/...) until a node that is not one. */
function resolve<T = JsonSchema>(document: OpenApiDocument, node: any): T {
  let current = node
  for (let hops = 0; current && typeof current === 'object' && typeof current.$ref === 'string'; hops++) {
    if (hops > 20 || !current.$ref.startsWith('#/')) throw new Error(`cannot resolve $ref ${current.$ref}`)
    current = current.$ref.slice(2).split('/').map((part: string) => part.replaceAll('~1', '/').replaceAll('~0', '~'))
      .reduce((parent: any, part: string) => parent?.[part], document)
  }
  return current as T
}

export function operationsOf(document: OpenApiDocument): Operation[] {
  const operations: Operation[] = []
  for (const [path, rawItem] of Object.entries<any>(document.paths ?? {})) {
    const item = resolve<any>(document, rawItem)
    for (const method of httpMethods) {
      const operation = item[method]
      if (!operation) continue
      const parameters = [...(item.parameters ?? []), ...(operation.parameters ?? [])].map(parameter => resolve<Parameter>(document, parameter))
      const requestBody = operation.requestBody && resolve<any>(document, operation.requestBody)
      const responses: Operation['responses'] = {}
      for (const [status, rawResponse] of Object.entries<any>(operation.responses ?? {})) {
        const response = resolve<any>(document, rawResponse)
        responses[status] = Object.fromEntries(Object.entries<any>(response.content ?? {}).map(([type, media]) => [type, media.schema]))
      }
      operations.push({
        method: method.toUpperCase(),
        path,
        operationId: operation.operationId ?? `${method.toUpperCase()} ${path}`,
        parameters,
        bodySchema: requestBody?.content?.['application/json']?.schema,
        bodyRequired: Boolean(requestBody?.required),
        responses,
        security: operation.security ?? document.security ?? [],
      })
    }
  }
  return operations
}

const maxDepth = 6

/** Values the schema accepts, as far as a JSON schema can say (cross-field rules are the server's). */
function valueArbitrary(document: OpenApiDocument, rawSchema: JsonSchema | boolean | undefined, depth = 0): fc.Arbitrary<unknown> {
  if (rawSchema === undefined || rawSchema === true) return fc.jsonValue({ maxDepth: 1 })
  if (rawSchema === false) return fc.constant(undefined)
  const schema = resolve(document, rawSchema)
  const examples: unknown[] = [...(schema.examples ?? []), ...('example' in schema ? [schema.example] : [])]
  const generated = generatedValue(document, schema, depth)
  return examples.length ? fc.oneof(fc.constantFrom(...examples), generated) : generated
}

function generatedValue(document: OpenApiDocument, schema: JsonSchema, depth: number): fc.Arbitrary<unknown> {
  const excluded: unknown[] | undefined = schema.not?.enum
  if (Array.isArray(excluded)) {
    const { not: _, ...allowed } = schema
    return generatedValue(document, allowed, depth).filter(value => !excluded.includes(value))
  }
  if ('const' in schema) return fc.constant(schema.const)
  if (Array.isArray(schema.enum)) return fc.constantFrom(...schema.enum)
  const alternatives = schema.oneOf ?? schema.anyOf
  if (Array.isArray(alternatives)) return fc.oneof(...alternatives.map((alternative: JsonSchema) => valueArbitrary(document, alternative, depth + 1)))
  if (Array.isArray(schema.allOf)) return valueArbitrary(document, mergeAllOf(document, schema), depth)
  const types: string[] = Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : [inferType(schema)]
  return fc.oneof(...types.map(type => valueOfType(document, schema, type, depth)))
}

function inferType(schema: JsonSchema): string {
  if (schema.properties || schema.additionalProperties || schema.required) return 'object'
  if (schema.items) return 'array'
  return 'any'
}

function mergeAllOf(document: OpenApiDocument, schema: JsonSchema): JsonSchema {
  const { allOf, ...rest } = schema
  return [rest, ...allOf.map((part: JsonSchema) => resolve(document, part))].reduce((merged: JsonSchema, part: JsonSchema) => ({
    ...merged,
    ...part,
    properties: { ...merged.properties, ...part.properties },
    required: [...(merged.required ?? []), ...(part.required ?? [])],
  }), {})
}

function valueOfType(document: OpenApiDocument, schema: JsonSchema, type: string, depth: number): fc.Arbitrary<unknown> {
  switch (type) {
    case 'null': return fc.constant(null)
    case 'boolean': return fc.boolean()
    case 'integer': return fc.integer(numberBounds(schema, 1, 1_000_000))
    case 'number': return fc.double({ ...numberBounds(schema, Number.EPSILON, 1_000_000), noNaN: true, noDefaultInfinity: true })
    case 'string': return stringArbitrary(schema)
    case 'array': {
      const minLength = schema.minItems ?? 0
      const maxLength = Math.min(schema.maxItems ?? minLength + 3, minLength + 3)
      return depth > maxDepth ? fc.constant([]) : fc.array(valueArbitrary(document, schema.items, depth + 1), { minLength, maxLength })
    }
    case 'object': {
      const properties: Record<string, JsonSchema> = schema.properties ?? {}
      if (depth > maxDepth) return fc.constant({})
      const model = Object.fromEntries(Object.entries(properties).map(([name, property]) => [name, valueArbitrary(document, property, depth + 1)]))
      return fc.record(model, { requiredKeys: (schema.required ?? []).filter((name: string) => name in properties) })
    }
    default: return fc.jsonValue({ maxDepth: 1 })
  }
}

function numberBounds(schema: JsonSchema, step: number, span: number): { min: number, max: number } {
  const exclusiveMin = typeof schema.exclusiveMinimum === 'number' ? schema.exclusiveMinimum + step : undefined
  const exclusiveMax = typeof schema.exclusiveMaximum === 'number' ? schema.exclusiveMaximum - step : undefined
  const min = Math.max(schema.minimum ?? -span, exclusiveMin ?? -Infinity, -Number.MAX_SAFE_INTEGER)
  const max = Math.min(schema.maximum ?? min + 2 * span, exclusiveMax ?? Infinity, Number.MAX_SAFE_INTEGER)
  return { min, max: Math.max(min, max) }
}

function stringArbitrary(schema: JsonSchema): fc.Arbitrary<string> {
  const minLength = schema.minLength ?? 0
  const maxLength = Math.min(schema.maxLength ?? minLength + 24, minLength + 24)
  const withinLength = (value: string) => value.length >= minLength && value.length <= (schema.maxLength ?? Infinity)
  switch (schema.format) {
    case 'date-time': return fc.date({ min: new Date('2000-01-01'), max: new Date('2099-12-31'), noInvalidDate: true }).map(date => date.toISOString())
    case 'email': return fc.emailAddress().filter(withinLength)
    case 'uuid': return fc.uuid()
    case 'uri': return fc.webUrl()
  }
  if (typeof schema.pattern === 'string') {
    const pattern = new RegExp(schema.pattern, 'u')
    return fc.stringMatching(pattern).filter(withinLength)
  }
  return fc.string({ minLength, maxLength })
}

/** A JSON value of another type than any `schema` allows (for the wrong-type mutation). */
function wrongTypeArbitrary(document: OpenApiDocument, rawSchema: JsonSchema | undefined): fc.Arbitrary<unknown> {
  const schema = rawSchema ? resolve(document, rawSchema) : {}
  const allowed = new Set<string>(Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : [])
  const byType: Record<string, fc.Arbitrary<unknown>> = {
    string: fc.string({ maxLength: 8 }),
    integer: fc.integer(),
    number: fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e6, max: 1e6 }).filter(value => !Number.isInteger(value)),
    boolean: fc.boolean(),
    null: fc.constant(null),
    array: fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 2 }),
    object: fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 2 }),
  }
  // A number schema takes integers too; anything typeless is left with the types it does not name.
  if (allowed.has('number')) allowed.add('integer')
  const others = Object.entries(byType).filter(([type]) => !allowed.has(type)).map(([, arbitrary]) => arbitrary)
  return fc.oneof(...others)
}

/** The parts of a request before it is assembled: values by parameter, and the body as a value. */
interface RequestParts {
  pathValues: Record<string, string>
  query: Record<string, string>
  headers: Record<string, string>
  body: unknown
}

export interface RequestArbitraryOptions {
  /** Values a path parameter may take besides the schema's, by name (ids of resources that exist). */
  knownPathValues?: Record<string, string[]>
  /** Bodies the server accepts (rules a schema cannot say, e.g. a sum), offered beside generated ones. */
  knownBodies?: fc.Arbitrary<unknown>
}

const idempotencyKeyHeader = 'idempotency-key'

/** A fresh Idempotency-Key: a valid request is a new operation each time, not a replay. */
const freshKey = fc.uuid()

function partsArbitrary(document: OpenApiDocument, operation: Operation, options: RequestArbitraryOptions): fc.Arbitrary<RequestParts> {
  const parameter = (where: Parameter['in']) => operation.parameters.filter(candidate => candidate.in === where)
  const valueOf = (candidate: Parameter): fc.Arbitrary<string> => {
    if (candidate.in === 'header' && candidate.name.toLowerCase() === idempotencyKeyHeader) return freshKey
    const known = options.knownPathValues?.[candidate.name] ?? []
    const fromSchema = valueArbitrary(document, candidate.schema).map(value => typeof value === 'string' ? value : JSON.stringify(value))
    return candidate.in === 'path' && known.length ? fc.oneof({ arbitrary: fc.constantFrom(...known), weight: 3 }, { arbitrary: fromSchema, weight: 1 }) : fromSchema
  }
  const record = (where: Parameter['in']) => fc.record(
    Object.fromEntries(parameter(where).map(candidate => [candidate.name, valueOf(candidate)])),
    { requiredKeys: parameter(where).filter(candidate => candidate.required || where === 'path').map(candidate => candidate.name) },
  ) as fc.Arbitrary<Record<string, string>>
  const generatedBody = operation.bodySchema ? valueArbitrary(document, operation.bodySchema) : fc.constant(undefined)
  const body = operation.bodySchema && options.knownBodies ? fc.oneof(options.knownBodies, generatedBody) : generatedBody
  return fc.record({ pathValues: record('path'), query: record('query'), headers: record('header'), body })
}

/** `encodedPathValues` go into the path as they are, already percent-encoded; the others are encoded. */
function assemble(operation: Operation, parts: RequestParts, variant: string, withoutCredentials = false, encodedPathValues: Record<string, string> = {}): FuzzRequest {
  const path = operation.path.replace(/\{([^}]+)\}/g, (_, name: string) => encodedPathValues[name] ?? encodeURIComponent(parts.pathValues[name] ?? ''))
  const query = new URLSearchParams(parts.query).toString()
  const headers = Object.fromEntries(Object.entries(parts.headers).map(([name, value]) => [name.toLowerCase(), value]))
  const body = parts.body === undefined ? undefined : JSON.stringify(parts.body)
  if (body !== undefined) headers['content-type'] = 'application/json'
  const pathAsSent = Object.keys(encodedPathValues).length > 0
  return { variant, method: operation.method, path: query ? `${path}?${query}` : path, headers, body, ...(withoutCredentials && { withoutCredentials }), ...(pathAsSent && { pathAsSent }) }
}

/** Paths to every property of a body value, for mutations to pick one (at most two levels deep). */
function propertyPaths(value: unknown, prefix: string[] = [], depth = 0): string[][] {
  if (value === null || typeof value !== 'object' || depth > 1) return []
  return Object.entries(value).flatMap(([key, child]) => [[...prefix, key], ...propertyPaths(child, [...prefix, key], depth + 1)])
}

function withProperty(value: unknown, path: string[], replace: (parent: Record<string, unknown>, key: string) => void): unknown {
  const copy = structuredClone(value) as Record<string, unknown>
  const parent = path.slice(0, -1).reduce<any>((node, key) => node[key], copy)
  replace(parent, path.at(-1)!)
  return copy
}

/** The schema of the property at `path` in `schema` (undefined when the document does not say). */
function schemaAt(document: OpenApiDocument, schema: JsonSchema | undefined, path: string[]): JsonSchema | undefined {
  return path.reduce<JsonSchema | undefined>((node, key) => {
    const resolved = node && resolve(document, node)
    if (!resolved) return undefined
    return /^\d+$/.test(key) ? resolved.items : resolved.properties?.[key]
  }, schema)
}

/**
 * Requests for one operation: valid ones and mutated ones, about evenly. Credentials and
 * signatures are the caller's to add (it knows the secrets).
 */
export function requestArbitrary(document: OpenApiDocument, operation: Operation, options: RequestArbitraryOptions = {}): fc.Arbitrary<FuzzRequest> {
  const parts = partsArbitrary(document, operation, options)
  const valid = parts.map(p => assemble(operation, p, 'valid'))
  const mutations: Array<fc.Arbitrary<FuzzRequest>> = [
    parts.map(p => assemble(operation, p, 'without credentials', true)),
  ]
  const pathNames = operation.parameters.filter(candidate => candidate.in === 'path').map(candidate => candidate.name)
  if (pathNames.length) {
    // Not `.` or `..` (fc.string may make them too): a client's URL parser resolves such a segment
    // before sending (`/refunds/..` is `/api/orders/{id}`), so it reaches another operation. The
    // characters a router may take for the path's own (`?`, `#`, `/`, `../`) are sent encoded:
    // `/api/orders/%3Fx/cancel` must not reach POST /api/orders.
    const routerCharacters = fc.constantFrom('?', '?x', 'a?b', '#', '#x', '/', 'a/b', '../x', '..%2Fx', '%3F')
    const badPathValue = fc.oneof(fc.string({ minLength: 1 }).filter(value => value !== '.' && value !== '..'), routerCharacters, fc.constantFrom('...', '%', '%00', ' ', 'ord_\u00e9', '\u202e'), fc.constant('x'.repeat(2000)))
    mutations.push(fc.tuple(parts, fc.constantFrom(...pathNames), badPathValue)
      .map(([p, name, value]) => assemble(operation, { ...p, pathValues: { ...p.pathValues, [name]: value } }, `bad path parameter ${name}`)))
    // The same characters encoded by hand, and dot segments (`%2E%2E` too, which fetch resolves),
    // in place of a value or after one naming a resource that exists: `/api/inventory/SKU-1%2Fadjustments`,
    // `/api/inventory/%2E%2E/adjustments`, `/api/inventory/SKU-1/%2E%2E`. Every route must match on the path as sent.
    const encodedRouterCharacters = fc.constantFrom('%3F', '%3Fx', 'a%3Fb', '%23', '%23x', 'a%23b', '%2F', 'a%2Fb', '%2F..', '..%2Fx')
    const dotSegments = fc.constantFrom('%2E%2E', '%2e%2e', '.%2E', '%2E', '..', '.')
    const encodedPathValue = fc.oneof(
      fc.tuple(encodedRouterCharacters, fc.boolean()).map(([encoded, afterValue]) => ({ encoded, afterValue, separator: '' })),
      fc.tuple(dotSegments, fc.boolean()).map(([encoded, afterValue]) => ({ encoded, afterValue, separator: '/' })),
    )
    mutations.push(fc.tuple(parts, fc.constantFrom(...pathNames), encodedPathValue)
      .map(([p, name, { encoded, afterValue, separator }]) => assemble(operation, p, `encoded ${encoded} in path parameter ${name}`, false, {
        [name]: afterValue ? `${encodeURIComponent(p.pathValues[name] ?? '')}${separator}${encoded}` : encoded,
      })))
  }
  if (operation.parameters.some(candidate => candidate.in === 'header' && candidate.name.toLowerCase() === idempotencyKeyHeader)) {
    // Only values fetch sends: tab, 0x20–0x7E and 0x80–0xFF (the other control characters are fuzz.test.ts's, over node:http).
    const headerCharacter = fc.oneof(fc.integer({ min: 0x20, max: 0x7E }), fc.integer({ min: 0x80, max: 0xFF })).map(code => String.fromCharCode(code))
    const badKey = fc.oneof(
      fc.constant(undefined),
      fc.constantFrom('', ' ', 'a b', 'k'.repeat(256), '"unterminated', '"a", "b"', '\u00e9t\u00e9', '\t'),
      fc.string({ unit: headerCharacter, minLength: 1, maxLength: 300 }),
    )
    mutations.push(fc.tuple(parts, badKey).map(([p, key]) => {
      const { [Object.keys(p.headers).find(name => name.toLowerCase() === idempotencyKeyHeader) ?? idempotencyKeyHeader]: _, ...headers } = p.headers
      return assemble(operation, { ...p, headers: key === undefined ? headers : { ...headers, [idempotencyKeyHeader]: key } }, key === undefined ? 'missing Idempotency-Key' : 'bad Idempotency-Key')
    }))
  }
  if (operation.bodySchema) {
    const bodySchema = operation.bodySchema
    mutations.push(
      fc.tuple(parts, wrongTypeArbitrary(document, bodySchema)).map(([p, body]) => assemble(operation, { ...p, body }, 'body of a wrong type')),
      fc.tuple(parts, fc.nat(), fc.jsonValue({ maxDepth: 1 })).chain(([p, index, filler]) => {
        const paths = propertyPaths(p.body)
        if (!paths.length) return fc.constant(assemble(operation, { ...p, body: filler }, 'body of a wrong type'))
        const path = paths[index % paths.length]!
        return wrongTypeArbitrary(document, schemaAt(document, bodySchema, path))
          .map(value => assemble(operation, { ...p, body: withProperty(p.body, path, (parent, key) => { parent[key] = value }) }, `wrong type at ${path.join('.')}`))
      }),
      fc.tuple(parts, fc.nat()).map(([p, index]) => {
        const paths = propertyPaths(p.body)
        if (!paths.length) return assemble(operation, { ...p, body: undefined }, 'no body')
        const path = paths[index % paths.length]!
        return assemble(operation, { ...p, body: withProperty(p.body, path, (parent, key) => { Reflect.deleteProperty(parent, key) }) }, `without ${path.join('.')}`)
      }),
      fc.tuple(parts, fc.string({ minLength: 1, maxLength: 12 }), fc.jsonValue({ maxDepth: 2 })).map(([p, name, value]) => {
        const body = p.body !== null && typeof p.body === 'object' && !Array.isArray(p.body) ? { ...p.body, [`x_${name}`]: value } : p.body
        return assemble(operation, { ...p, body }, 'extra field')
      }),
      fc.tuple(parts, fc.nat(), fc.constantFrom(300, 10_000, 70_000)).map(([p, index, length]) => {
        const huge = 'x'.repeat(length)
        const paths = propertyPaths(p.body)
        if (!paths.length) return assemble(operation, { ...p, body: huge }, `huge string (${length})`)
        const path = paths[index % paths.length]!
        return assemble(operation, { ...p, body: withProperty(p.body, path, (parent, key) => { parent[key] = huge }) }, `huge string (${length}) at ${path.join('.')}`)
      }),
    )
  }
  return fc.oneof({ arbitrary: valid, weight: mutations.length }, ...mutations.map(arbitrary => ({ arbitrary, weight: 1 })))
}
