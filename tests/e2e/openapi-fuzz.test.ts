import { randomUUID } from 'node:crypto'
import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020'
import fc from 'fast-check'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { midtransSignature } from 'nuxt-idempotency/core'
import { fastJobsEnv, stopAll, testSecrets } from '../support/app'
import { request, requestAsSent } from '../support/http'
import { type FuzzRequest, type JsonSchema, type Operation, operationsOf, requestArbitrary } from '../support/openapi-arbitraries'
import { opsHeaders, opsRequest } from '../support/ops'
import { newIdempotencyKey, type OrdersStack, postOrder, startOrdersStack, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { fetchOpenApiDocument, type OpenApiDocument } from '../support/prism'
import { describeWithServices } from '../support/services'
import { newWebhookId, standardDelivery, stripeDelivery } from '../support/webhooks'

// Requests generated from the OpenAPI document the server serves, for every operation in it: valid
// ones and ones mutated the ways clients get them wrong (support/openapi-arbitraries.ts), with the
// credentials and webhook signatures each operation needs. Whatever the request, the server must not
// fail (no 5xx) and must not answer outside its own document: every status one the operation
// documents, every body valid against the documented schema for that status and content type. The
// requests go to the server directly: Prism would re-serialize some bodies before forwarding them.
// FUZZ_SEED=<seed> replays a run (the seed is printed with any finding).

/** Requests per operation: bounded so the whole file stays well under a minute. */
const RUNS_PER_OPERATION = 30
const seed = Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31)
const documentId = 'https://idempotent-checkout.test/openapi.json'

interface Finding { operation: string, request: FuzzRequest, status: number, contentType: string | null, problem: string, body: string }

describeWithServices('requests generated from the OpenAPI document', ['postgres', 'redis'], () => {
  let stack: OrdersStack
  let document: OpenApiDocument
  /** Path parameter values naming resources that exist, so generated requests reach past the 404. */
  let knownPathValues: Record<string, string[]>

  beforeAll(async () => {
    stack = await startOrdersStack('openapi-fuzz', fastJobsEnv)
    document = await fetchOpenApiDocument(stack.app.url)
    knownPathValues = await existingResources(stack)
  })

  afterAll(async () => {
    await stack?.close()
    await stopAll()
  })

  it(`answers ${RUNS_PER_OPERATION} generated requests per documented operation with no 5xx and nothing outside the document`, async () => {
    const operations = operationsOf(document)
    expect(operations.length).toBeGreaterThan(0)
    const validator = responseValidator(document)
    /** Findings by operation and what was wrong: one replayable request of each, and how often it happened. */
    const findings = new Map<string, { first: Finding, count: number }>()
    const statuses = new Map<string, Set<number>>()

    for (const operation of operations) {
      const operationName = `${operation.method} ${operation.path}`
      const arbitrary = requestArbitrary(document, operation, {
        knownPathValues,
        knownBodies: operation.method === 'POST' && operation.path === '/api/orders' ? fc.uuid().map(id => validOrderBody({ cartId: `crt_${id}` })) : undefined,
      })
      for (const generated of fc.sample(arbitrary, { numRuns: RUNS_PER_OPERATION, seed })) {
        const sent = withCredentials(operation, generated)
        const response = await (sent.pathAsSent ? requestAsSent : request)(stack.app.url, sent.path, { method: sent.method, headers: sent.headers, body: sent.body })
        statuses.set(operationName, (statuses.get(operationName) ?? new Set()).add(response.status))
        const contentType = response.headers.get('content-type')
        const problem = response.status >= 500
          ? `status ${response.status}`
          : sent.pathAsSent && response.status !== 404
            ? `status ${response.status} for a path no resource has: it reached a route as decoded or resolved, not as sent`
            : validator.check(operation, response.status, contentType, response.text)
        if (problem) {
          const same = findings.get(`${operationName} ${problem}`)
          if (same) same.count++
          else findings.set(`${operationName} ${problem}`, { first: { operation: operationName, request: sent, status: response.status, contentType, problem, body: response.text }, count: 1 })
        }
      }
    }

    console.info(`[openapi-fuzz] seed ${seed}, ${operations.length} operations × ${RUNS_PER_OPERATION}; statuses seen: ${[...statuses].map(([name, seen]) => `${name} ${[...seen].sort().join('/')}`).join('; ')}`)
    expect([...findings.values()].map(({ first, count }) => describeFinding(first, count)), `replay the run with FUZZ_SEED=${seed}`).toEqual([])
  }, 120_000)

  /** The tenant key, the ops token or a webhook signature, as the route asks; none for a mutation that drops them. */
  function withCredentials(operation: Operation, generated: FuzzRequest): FuzzRequest {
    if (generated.withoutCredentials) return generated
    const headers = { ...generated.headers }
    if (/^\/api\/(ops\/|metrics$)/.test(operation.path)) Object.assign(headers, opsHeaders)
    else if (/^\/api\/(orders|inventory|webhook-endpoints|events)(\/|$)/.test(operation.path)) headers.authorization = `Bearer ${stack.tenant.secretKey}`
    else if (operation.path.startsWith('/api/webhooks/')) return signed(generated)
    return { ...generated, headers }
  }

  /** Signed as the provider in the path signs, whatever the body: the server must get past the signature. */
  function signed(generated: FuzzRequest): FuzzRequest {
    const provider = generated.path.split('/')[3]
    const body = generated.body ?? ''
    if (provider === 'standard' || provider === 'mockpay') {
      const secret = provider === 'mockpay' ? testSecrets.mockpayWebhookSecret : testSecrets.webhookStandardSecret
      const delivery = standardDelivery(generated.headers['webhook-id'] || newWebhookId(), body, { secret })
      return { ...generated, headers: { ...generated.headers, ...delivery.headers } }
    }
    if (provider === 'stripe') return { ...generated, headers: { ...generated.headers, ...stripeDelivery(body).headers } }
    if (provider === 'midtrans') {
      let notification: unknown
      try {
        notification = JSON.parse(body)
      }
      catch {
        return generated
      }
      if (notification === null || typeof notification !== 'object' || Array.isArray(notification)) return generated
      const fields = notification as Record<string, unknown>
      const signature = midtransSignature(testSecrets.midtransServerKey, String(fields.order_id), String(fields.status_code), String(fields.gross_amount))
      return { ...generated, body: JSON.stringify({ ...fields, signature_key: signature }) }
    }
    return generated
  }
})

/** An order (paid, with a refund), a second key of the tenant, a job, a tracked SKU and a webhook endpoint: ids for the path parameters. */
async function existingResources(stack: OrdersStack): Promise<Record<string, string[]>> {
  const auth = { authorization: `Bearer ${stack.tenant.secretKey}` }
  const created = await postOrder(stack.app.url, { secretKey: stack.tenant.secretKey, key: newIdempotencyKey(), body: validOrderBody() })
  expect(created.status, created.text).toBe(201)
  const orderId: string = created.json.id
  let intentId = ''
  await pollUntil('the order has its payment intent', async () => {
    intentId = (await request(stack.app.url, `/api/orders/${orderId}`, { headers: auth })).json?.paymentIntentId ?? ''
    return intentId !== ''
  })
  const paid = await request(stack.app.url, `/api/mockpay/intents/${intentId}/confirm`, { method: 'POST', body: { outcome: 'succeed', chaos: { duplicates: 0, maxDelayMs: 0 } } })
  expect(paid.status, paid.text).toBe(200)
  await pollUntil('the order is paid', async () => (await request(stack.app.url, `/api/orders/${orderId}`, { headers: auth })).json?.status === 'paid')
  const refund = await request(stack.app.url, `/api/orders/${orderId}/refunds`, { method: 'POST', headers: { ...auth, 'idempotency-key': randomUUID() }, body: { amount: 1000 } })
  expect(refund.status, refund.text).toBe(201)
  // A key the fuzzer may revoke: never the one it authenticates with.
  const spareKey = await opsRequest(stack.app.url, `/api/ops/tenants/${stack.tenant.tenantId}/keys`, { method: 'POST' })
  expect(spareKey.status, spareKey.text).toBe(201)
  const stock = await request(stack.app.url, '/api/inventory/FUZZ-1', { method: 'PUT', headers: auth, body: { onHand: 1_000_000 } })
  expect(stock.status, stock.text).toBe(200)
  // Disabled: the fuzzer's changes to it send nothing anywhere.
  const endpoint = await request(stack.app.url, '/api/webhook-endpoints', { method: 'POST', headers: { ...auth, 'idempotency-key': randomUUID() }, body: { url: 'https://8.8.8.8/hooks', events: ['*'] } })
  expect(endpoint.status, endpoint.text).toBe(201)
  expect((await request(stack.app.url, `/api/webhook-endpoints/${endpoint.json.id}`, { method: 'PATCH', headers: auth, body: { status: 'disabled' } })).status).toBe(200)
  const jobs = await opsRequest(stack.app.url, '/api/ops/jobs')
  const jobId: string | undefined = jobs.json?.data?.[0]?.id
  return {
    id: [orderId, stack.tenant.tenantId, intentId, endpoint.json.id, ...(jobId ? [jobId] : [])],
    refundId: [refund.json.id],
    keyId: [spareKey.json.keyId],
    sku: [stock.json.sku],
  }
}

/** Checks a response against what its operation documents, with the document's own JSON schemas. */
function responseValidator(document: OpenApiDocument) {
  const ajv = new Ajv2020({ strict: false, validateSchema: false, allErrors: true })
  ajv.addFormat('date-time', value => !Number.isNaN(Date.parse(value)) && /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/i.test(value))
  ajv.addFormat('email', /^[^\s@]+@[^\s@]+$/)
  ajv.addFormat('uri', value => URL.canParse(value))
  ajv.addFormat('uuid', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i)
  ajv.addSchema(document, documentId)
  const compiled = new Map<JsonSchema, ValidateFunction>()
  // The document's own refs (#/components/...) point into the copy of it added above.
  const againstDocument = (schema: JsonSchema): ValidateFunction => {
    let validate = compiled.get(schema)
    if (!validate) {
      validate = ajv.compile(JSON.parse(JSON.stringify(schema).replace(/"\$ref":"#\//g, `"$ref":"${documentId}#/`)))
      compiled.set(schema, validate)
    }
    return validate
  }

  return {
    /** What is outside the document about this response, or undefined. */
    check(operation: Operation, status: number, contentType: string | null, text: string): string | undefined {
      const documented = operation.responses[String(status)] ?? operation.responses[`${String(status)[0]}XX`] ?? operation.responses.default
      if (!documented) return `status ${status} is not documented (documented: ${Object.keys(operation.responses).join(', ')})`
      const mediaType = contentType?.split(';')[0]?.trim().toLowerCase() ?? ''
      const documentedTypes = Object.keys(documented)
      if (!documentedTypes.length) return text === '' ? undefined : `status ${status} is documented without a body, but one came (${contentType})`
      const matched = documentedTypes.find(type => type === mediaType || type === '*/*' || (type.endsWith('/*') && mediaType.startsWith(type.slice(0, -1))))
      if (!matched) return `content type ${contentType} is not documented for ${status} (documented: ${documentedTypes.join(', ')})`
      const schema = documented[matched]
      if (!schema || !/[/+]json$/.test(mediaType)) return undefined
      let body: unknown
      try {
        body = JSON.parse(text)
      }
      catch {
        return `the ${contentType} body is not JSON`
      }
      const validate = againstDocument(schema)
      return validate(body) ? undefined : `the body does not match the documented schema: ${ajv.errorsText(validate.errors)}`
    },
  }
}

/** A finding as a replayable request: method, path, headers, body (long bodies cut, with their length). */
function describeFinding(finding: Finding, count: number): string {
  const { request: sent } = finding
  const body = sent.body === undefined ? '(no body)' : sent.body.length > 2000 ? `${sent.body.slice(0, 2000)}… (${sent.body.length} characters)` : sent.body
  return [
    `${finding.operation}: ${finding.problem} (${count} of the requests; the first, ${sent.variant}:)`,
    `  request: ${sent.method} ${sent.path}`,
    `  headers: ${JSON.stringify(sent.headers)}`,
    `  body: ${body}`,
    `  answered: ${finding.status} ${finding.contentType ?? '(no content type)'} ${finding.body.slice(0, 1000)}`,
  ].join('\n')
}
