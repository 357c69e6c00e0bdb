/** Requests to a fixture server: the answer whatever its status, each bounded in time. */

export interface Answer {
  status: number
  headers: Headers
  /** The JSON body, or `{ text }` when it is not a JSON object. */
  body: Record<string, unknown>
}

export interface SendOptions {
  method?: string
  /** Sent as the Idempotency-Key header, exactly as given. */
  key?: string
  /** Sent as JSON. */
  body?: unknown
  headers?: Record<string, string>
}

const REQUEST_TIMEOUT_MS = 30_000

export async function send(url: string, options: SendOptions = {}): Promise<Answer> {
  const headers: Record<string, string> = { accept: 'application/json', ...options.headers }
  if (options.key !== undefined) headers['idempotency-key'] = options.key
  let payload: string | undefined
  if (options.body !== undefined) {
    headers['content-type'] ??= 'application/json'
    payload = typeof options.body === 'string' ? options.body : JSON.stringify(options.body)
  }
  const response = await fetch(url, { method: options.method ?? 'POST', headers, body: payload, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) })
  const text = await response.text()
  let body: Record<string, unknown> = { text }
  try {
    const parsed: unknown = JSON.parse(text)
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) body = parsed as Record<string, unknown>
  }
  catch {
    // Not JSON: the text it is.
  }
  return { status: response.status, headers: response.headers, body }
}

/** What the fixture counted: executions (and handler starts) by `route key`. */
export interface Counts {
  executions: Record<string, number>
  started: Record<string, number>
}

export async function counts(baseUrl: string): Promise<Counts> {
  const answer = await send(new URL('/api/executions', baseUrl).toString(), { method: 'GET' })
  if (answer.status !== 200) throw new Error(`GET /api/executions answered ${answer.status}: ${JSON.stringify(answer.body)}`)
  return answer.body as unknown as Counts
}

/** Executions of `route` under `key`, or of every key of `route` when none is given. */
export function executionsOf(found: Counts, route: string, key?: string): number {
  if (key !== undefined) return found.executions[`${route} ${key}`] ?? 0
  return Object.entries(found.executions).filter(([entry]) => entry.startsWith(`${route} `)).reduce((sum, [, n]) => sum + n, 0)
}

/** Executions of `route` under `key` summed over several servers (each counts its own). */
export async function executionsOnAll(baseUrls: string[], route: string, key: string): Promise<number> {
  const found = await Promise.all(baseUrls.map(baseUrl => counts(baseUrl)))
  return found.reduce((sum, one) => sum + executionsOf(one, route, key), 0)
}

/** Re-checks `condition` every 20 ms until it holds; throws naming `what` after `timeoutMs`. */
export async function pollUntil(what: string, condition: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting until ${what}`)
    await new Promise(resolve => setTimeout(resolve, 20))
  }
}
