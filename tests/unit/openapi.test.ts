import { execFile } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { parseConfig, webhookProviderNames } from '../../server/config'
import { buildOpenApiDocument } from '../../server/openapi/document'
import { apiOperations } from '../../server/openapi/operations'
import { problemCatalog } from '../../server/problems'
import { midtransProvider } from '../../server/webhooks/providers/midtrans'
import { standardProvider } from '../../server/webhooks/providers/standard'
import { stripeProvider } from '../../server/webhooks/providers/stripe'
import type { WebhookProvider } from '../../server/webhooks/types'

// The OpenAPI document (server/openapi) against the route files it describes: one operation per
// file and method, no operation without its file, only catalogued problems, the Idempotency-Key on
// every route that requires one, and Redocly's recommended rules without an error.

const projectRoot = fileURLToPath(new URL('../..', import.meta.url))
const apiDir = join(projectRoot, 'server/api')
const document = buildOpenApiDocument()
const methods = ['get', 'post', 'put', 'patch', 'delete'] as const

interface RouteFile { file: string, method: string, path: string, source: string }

/** `server/api/orders/[id]/refunds.post.ts` → POST /api/orders/{id}/refunds; `inventory/index.get.ts` → GET /api/inventory. */
function routeFiles(dir = apiDir): RouteFile[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = join(dir, entry.name)
    if (entry.isDirectory()) return routeFiles(full)
    const name = relative(apiDir, full).replace(/\.ts$/, '')
    const method = name.slice(name.lastIndexOf('.') + 1)
    const path = `/api/${name.slice(0, name.lastIndexOf('.'))}`.replace(/\/index$/, '').replace(/\[(\w+)\]/g, '{$1}')
    return [{ file: relative(projectRoot, full), method, path, source: readFileSync(full, 'utf8') }]
  })
}

/** A documented path is served by a route file whose `{param}` segments take any one segment. */
const servedBy = (documented: string, route: RouteFile) => {
  const pattern = new RegExp(`^${route.path.replace(/[.]/g, '\\.').replace(/\{\w+\}/g, '[^/]+')}$`)
  return pattern.test(documented)
}

const documentedOperations = Object.entries(document.paths ?? {}).flatMap(([path, item]) =>
  methods.filter(method => item[method]).map(method => ({ path, method, operation: item[method]! })))

describe('the OpenAPI document and the route files', () => {
  const files = routeFiles()

  it('is OpenAPI 3.1.0 and lists every route file', () => {
    expect(document.openapi).toBe('3.1.0')
    expect(files.length).toBeGreaterThan(20)
    for (const route of files) {
      expect(documentedOperations.filter(({ path, method }) => method === route.method && servedBy(path, route)), `${route.file} is not documented`).not.toHaveLength(0)
    }
  })

  it('documents no operation without its route file', () => {
    for (const { path, method } of documentedOperations) {
      expect(files.filter(route => route.method === method && servedBy(path, route)), `${method.toUpperCase()} ${path} has no route file`).toHaveLength(1)
    }
  })

  it('documents each webhook provider the server knows as its own path', () => {
    const webhookPaths = documentedOperations.filter(({ path }) => path.startsWith('/api/webhooks/')).map(({ path }) => path)
    expect(webhookPaths.sort()).toEqual([...webhookProviderNames.map(name => `/api/webhooks/${name}`), '/api/webhooks/{provider}'].sort())
  })

  it('answers only problems of the catalogue, each under its own status', () => {
    for (const operation of apiOperations) {
      for (const slug of operation.problems) expect(Object.keys(problemCatalog), `${operation.operationId}: ${slug}`).toContain(slug)
    }
    for (const { path, method, operation } of documentedOperations) {
      for (const [status, response] of Object.entries(operation.responses ?? {})) {
        const text = JSON.stringify(response)
        for (const [slug] of text.matchAll(/(?<=\/problems\/)[\w-]+/g)) {
          expect(problemCatalog[slug as keyof typeof problemCatalog]?.status, `${method} ${path} ${status}: ${slug}`).toBe(Number(status))
        }
      }
    }
  })

  it('declares the Idempotency-Key header on every route that requires one', () => {
    // A route requires the key itself or through the refund, cancel, adjustment and webhook endpoint helpers (server/refunds/route.ts, server/stock/route.ts, server/webhook-endpoints/route.ts).
    const keyed = files.filter(route => /requireIdempotencyKey|refundOrder|cancelOrderRoute|postAdjustment|postWebhookEndpoint|postRotateSecret/.test(route.source))
    expect(keyed.map(route => `${route.method} ${route.path}`).sort()).toEqual([
      'post /api/inventory/{sku}/adjustments',
      'post /api/ops/orders/{id}/refunds',
      'post /api/orders',
      'post /api/orders/{id}/cancel',
      'post /api/orders/{id}/refunds',
      'post /api/webhook-endpoints',
      'post /api/webhook-endpoints/{id}/rotate-secret',
    ])
    for (const { path, method, operation } of documentedOperations) {
      const declares = JSON.stringify(operation.parameters ?? []).includes('#/components/parameters/IdempotencyKey')
      const requires = keyed.some(route => route.method === method && servedBy(path, route))
      expect(declares, `${method.toUpperCase()} ${path}`).toBe(requires)
    }
    expect(document.components?.parameters?.IdempotencyKey).toMatchObject({ name: 'Idempotency-Key', in: 'header', required: true })
  })

  it('says how long a key is remembered, and which setting changes it, where the Idempotency-Key header is described', () => {
    const { IDEMPOTENCY_TTL_SECONDS } = parseConfig({})
    const description = (document.components?.parameters?.IdempotencyKey as { description?: string } | undefined)?.description ?? ''
    expect(description).toContain(`${IDEMPOTENCY_TTL_SECONDS / 3600} hours`)
    expect(description).toContain(`\`IDEMPOTENCY_TTL_SECONDS\`, ${IDEMPOTENCY_TTL_SECONDS} seconds`)
  })

  it('gives every operation an id, a summary, security and a success (but the unknown webhook provider\'s 404)', () => {
    for (const { path, method, operation } of documentedOperations) {
      expect(operation.operationId, `${method} ${path}`).toBeTruthy()
      expect(operation.summary, `${method} ${path}`).toBeTruthy()
      expect(operation.security, `${method} ${path}`).toBeDefined()
      const succeeds = Object.keys(operation.responses ?? {}).some(status => status.startsWith('2'))
      expect(succeeds, `${method} ${path}`).toBe(path !== '/api/webhooks/{provider}')
    }
  })
})

describe('the documented webhook payloads', () => {
  const delivery = { body: Buffer.alloc(0), header: (name: string) => (name === 'webhook-id' ? 'msg_example' : undefined), nowSeconds: 0 }
  const schemas = document.components?.schemas as Record<string, { example?: unknown }>

  it.each([
    ['StandardWebhookEvent', standardProvider],
    ['StripeWebhookEvent', stripeProvider],
    ['MidtransNotification', midtransProvider],
  ] as Array<[string, WebhookProvider]>)('%s: its example is an event the provider\'s own parser understands', (component, provider) => {
    const example = schemas[component]?.example
    expect(example).toBeDefined()
    expect(provider.parse(example, delivery)).toMatchObject({ ok: true })
  })
})

describe('Redocly lint', () => {
  it('finds no error in the document (recommended rules, redocly.yaml)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'openapi-'))
    try {
      const file = join(dir, 'openapi.json')
      await writeFile(file, JSON.stringify(document))
      const cli = join(projectRoot, 'node_modules/@redocly/cli/bin/cli.js')
      // Exit code 1 on any error; warnings are printed but pass.
      const { stdout, stderr } = await promisify(execFile)(process.execPath, [cli, 'lint', file, '--format', 'json'], { cwd: projectRoot, maxBuffer: 16 * 1024 * 1024 })
      const report = JSON.parse(stdout.slice(stdout.indexOf('{'))) as { totals: { errors: number, warnings: number }, problems: unknown[] }
      expect(report.totals.errors, `${stderr}\n${JSON.stringify(report.problems, null, 2)}`).toBe(0)
    }
    finally {
      await rm(dir, { recursive: true, force: true })
    }
  }, 60_000)
})
