import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { type ManagedProcess, projectRoot, spawnManaged } from './processes'
import { freePort } from './services'

/**
 * Stoplight Prism as a validating proxy in front of a built server: every exchange sent to `url` is
 * checked against the API's OpenAPI document by a tool this project did not write, then forwarded.
 * With `--errors` Prism answers a request outside the document itself (422, 401, 404) instead of
 * forwarding it, and replaces a response outside the document with a 500 problem naming the
 * violation. It forwards JSON bodies re-serialized (the text, whitespace and all, is not kept).
 *
 * Whatever sends the request (http.ts, orders.ts, webhooks.ts all use the global fetch), a response
 * that Prism made itself makes that fetch reject with Prism's words: see watchProxies.
 */

export type OpenApiDocument = Record<string, any>

export interface PrismProxy extends ManagedProcess {
  /** http://127.0.0.1:PORT: send requests here to have them checked. */
  url: string
}

const prismCli = join(projectRoot, 'node_modules/@stoplight/prism-cli/dist/index.js')
const listeningTimeoutMs = 30_000
/** The `type` of every problem Prism answers with itself, and what each kind of them means here. */
const prismProblemBase = 'https://stoplight.io/prism/errors#'
const responseViolations = `${prismProblemBase}VIOLATIONS`
/** Prism's problem when it could not reach the server (node-fetch's error name). */
const upstreamUnreachable = 'FetchError'

/** The document the server serves, as the build being tested describes itself. */
export async function fetchOpenApiDocument(serverUrl: string): Promise<OpenApiDocument> {
  const response = await fetch(new URL('/api/openapi.json', serverUrl))
  if (response.status !== 200) throw new Error(`GET /api/openapi.json answered ${response.status}:\n${await response.text()}`)
  return await response.json() as OpenApiDocument
}

/** Prism proxying to `upstream` with the document `upstream` serves, started once it listens. */
export async function startPrism(options: { upstream: string, label?: string }): Promise<PrismProxy> {
  const label = options.label ?? 'prism'
  const document = await fetchOpenApiDocument(options.upstream)
  const documentDir = await mkdtemp(join(tmpdir(), 'prism-'))
  const documentFile = join(documentDir, 'openapi.json')
  await writeFile(documentFile, JSON.stringify(document))

  const port = await freePort()
  const args = [prismCli, 'proxy', documentFile, options.upstream, '--port', String(port), '-h', '127.0.0.1', '--errors']
  const child = spawnManaged({ label, args, env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' } })
  void child.exited.then(() => rm(documentDir, { recursive: true, force: true }))
  const proxy: PrismProxy = { ...child, url: `http://127.0.0.1:${port}` }

  const deadline = Date.now() + listeningTimeoutMs
  while (!child.output().includes(`Prism is listening on ${proxy.url}`)) {
    if (child.hasExited()) throw new Error(`${label} exited with code ${await child.exited} before it listened. Output:\n${child.output()}`)
    if (Date.now() > deadline) {
      await child.stop()
      throw new Error(`${label} did not listen within ${listeningTimeoutMs / 1000} s. Output:\n${child.output()}`)
    }
    await sleep(50)
  }
  watchProxies.add(proxy.url)
  void child.exited.then(() => watchProxies.delete(proxy.url))
  return proxy
}

/** What Prism's own answer means (a request it refused, a response it replaced), or undefined for the server's answer. */
async function prismAnswer(response: Response): Promise<string | undefined> {
  if (!(response.headers.get('content-type') ?? '').startsWith('application/problem+json')) return undefined
  const text = await response.clone().text()
  let type: unknown
  try {
    type = (JSON.parse(text) as { type?: unknown }).type
  }
  catch {
    // Not JSON: not one of Prism's problems either.
    return undefined
  }
  if (type === responseViolations) return `the server's response is outside the OpenAPI document. Prism: ${response.status} ${text}`
  if (type === upstreamUnreachable) return `Prism could not reach the server. Prism: ${response.status} ${text}`
  if (typeof type === 'string' && type.startsWith(prismProblemBase)) {
    return `Prism answered itself: the request is outside the OpenAPI document (send a deliberately invalid request to the server directly). Prism: ${response.status} ${text}`
  }
  return undefined
}

/** Thrown by the watched fetch; vitest prints its message, which carries Prism's answer verbatim. */
class PrismRejection extends Error {
  override name = 'PrismRejection'
}

/**
 * Origins of the running proxies: a response from one of them that Prism made itself rejects the
 * fetch. Checking in fetch, not in each suite's assertions, covers every request of a
 * suite whichever helper sent it, and fails it with Prism's report instead of a bare status mismatch.
 */
const watchProxies = new Set<string>()
const unwatchedFetch = globalThis.fetch
globalThis.fetch = async function fetchCheckedByPrism(input: string | URL | Request, init?: RequestInit): Promise<Response> {
  const response = await unwatchedFetch(input, init)
  const url = new URL(input instanceof Request ? input.url : input)
  if (!watchProxies.has(url.origin)) return response
  const answer = await prismAnswer(response)
  if (!answer) return response
  const method = init?.method ?? (input instanceof Request ? input.method : 'GET')
  throw new PrismRejection(`${method} ${url.pathname}${url.search}: ${answer}`)
}
