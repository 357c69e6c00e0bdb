import http, { type IncomingMessage } from 'node:http'
import { testSecrets } from './app'

/** What a test needs from a response: never thrown on a non-2xx status. */
export interface TestResponse {
  status: number
  /** The reason phrase of the status line. */
  statusText: string
  headers: Headers
  text: string
  /** The parsed body when it is JSON (including application/problem+json), else undefined. */
  json: any
}

export interface RequestOptions {
  method?: string
  headers?: Record<string, string>
  /** Strings and bytes are sent as they are (e.g. to sign a webhook's exact bytes); anything else as JSON. */
  body?: unknown
  timeoutMs?: number
}

/** The status line and headers of a response read with node:http (for requests fetch cannot send). */
export function statusAndHeaders(incoming: IncomingMessage): Pick<TestResponse, 'status' | 'statusText' | 'headers'> {
  const headers = new Headers()
  for (const [name, value] of Object.entries(incoming.headers)) if (value !== undefined) headers.set(name, String(value))
  return { status: incoming.statusCode ?? 0, statusText: incoming.statusMessage ?? '', headers }
}

/** Throws only when no response arrived (refused, reset, timed out) or a JSON body does not parse. */
export async function request(baseUrl: string, path: string, options: RequestOptions = {}): Promise<TestResponse> {
  const { method = 'GET', headers = {}, body, timeoutMs = 15_000 } = options
  const sentHeaders = new Headers(headers)
  let sentBody: string | Uint8Array | undefined
  if (typeof body === 'string' || body instanceof Uint8Array) {
    sentBody = body
  }
  else if (body !== undefined) {
    sentBody = JSON.stringify(body)
    if (!sentHeaders.has('content-type')) sentHeaders.set('content-type', 'application/json')
  }

  const url = new URL(path, baseUrl)
  let response: Response
  try {
    response = await fetch(url, { method, headers: sentHeaders, body: sentBody as BodyInit | undefined, signal: AbortSignal.timeout(timeoutMs) })
  }
  catch (error) {
    // fetch reports every network failure as "fetch failed"; the reason (ECONNREFUSED, …) is its cause.
    const reason = error instanceof Error && error.cause instanceof Error ? error.cause.message : String(error)
    throw new Error(`${method} ${url} got no response: ${reason}`, { cause: error })
  }
  const text = await response.text()
  const isJson = /[/+]json\b/.test(response.headers.get('content-type') ?? '')
  let json: unknown
  if (isJson && text !== '') {
    try {
      json = JSON.parse(text)
    }
    catch {
      throw new Error(`${method} ${url} answered ${response.status} with a JSON content-type but a body that does not parse:\n${text}`)
    }
  }
  return { status: response.status, statusText: response.statusText, headers: response.headers, text, json }
}

/**
 * Like request, but the path goes out byte for byte over node:http: fetch resolves `.` and `..`
 * segments, `%2E%2E` included, before sending, so it cannot ask what a raw client or proxy may.
 */
export function requestAsSent(baseUrl: string, path: string, options: RequestOptions = {}): Promise<TestResponse> {
  const { method = 'GET', headers = {}, body, timeoutMs = 15_000 } = options
  const { hostname, port } = new URL(baseUrl)
  const sentBody = body === undefined || typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body)
  const sentHeaders = { ...(sentBody !== undefined && typeof body !== 'string' && !(body instanceof Uint8Array) && { 'content-type': 'application/json' }), ...headers, connection: 'close' }
  return new Promise((resolve, reject) => {
    const outgoing = http.request({ host: hostname, port, method, path, headers: sentHeaders, timeout: timeoutMs }, (incoming) => {
      const chunks: Buffer[] = []
      incoming.on('data', (chunk: Buffer) => chunks.push(chunk))
      incoming.on('error', reject)
      incoming.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8')
        const isJson = /[/+]json\b/.test(incoming.headers['content-type'] ?? '')
        try {
          resolve({ ...statusAndHeaders(incoming), text, json: isJson && text !== '' ? JSON.parse(text) : undefined })
        }
        catch {
          reject(new Error(`${method} ${path} answered ${incoming.statusCode} with a JSON content-type but a body that does not parse:\n${text}`))
        }
      })
    })
    outgoing.on('timeout', () => outgoing.destroy(new Error(`${method} ${path} got no response within ${timeoutMs} ms`)))
    outgoing.on('error', reject)
    outgoing.end(sentBody)
  })
}

/** A tenant created through the ops API, with the one-time secret key its requests authenticate with. */
export async function createTenant(baseUrl: string, name: string): Promise<{ tenantId: string, secretKey: string }> {
  const response = await request(baseUrl, '/api/ops/tenants', {
    method: 'POST',
    headers: { authorization: `Bearer ${testSecrets.opsToken}` },
    body: { name },
  })
  const tenantId: unknown = response.json?.tenant?.id
  const secretKey: unknown = response.json?.secretKey
  if (response.status !== 201 || typeof tenantId !== 'string' || typeof secretKey !== 'string' || !secretKey.startsWith('sk_')) {
    throw new Error(`POST /api/ops/tenants answered ${response.status}, expected 201 with tenant.id and an sk_ secretKey:\n${response.text}`)
  }
  return { tenantId, secretKey }
}
