import { createError, type H3Error } from 'h3'
import { type ProblemSlug, problemCatalog } from './catalog'

export { problemCatalog, type ProblemSlug }

export interface ProblemBody {
  type: string
  title: string
  status: number
  detail: string
  [extension: string]: unknown
}

export interface ProblemOptions {
  /** Extension members (e.g. `errors`, `orderId`). */
  extensions?: Record<string, unknown>
  /** Response headers that belong to the problem (e.g. `Retry-After`). */
  headers?: Record<string, string>
  cause?: unknown
}

/** Extensions never replace the standard members: `status` must stay the HTTP status. */
export function problemBody(slug: ProblemSlug, detail: string, extensions: Record<string, unknown> = {}): ProblemBody {
  const { status, title } = problemCatalog[slug]
  const { type: _type, title: _title, status: _status, detail: _detail, ...members } = extensions
  return { type: `/problems/${slug}`, title, status, detail, ...members }
}

/** An h3 error carrying a problem body; the error handler renders it as application/problem+json. */
export function problem(slug: ProblemSlug, detail: string, options: ProblemOptions = {}): H3Error {
  const body = problemBody(slug, detail, options.extensions)
  return createError({ statusCode: body.status, statusMessage: body.title, data: { problem: body, headers: options.headers }, cause: options.cause })
}

export function problemOf(error: unknown): { body: ProblemBody, headers?: Record<string, string> } | undefined {
  const data = (error as { data?: { problem?: ProblemBody, headers?: Record<string, string> } } | undefined)?.data
  return data?.problem ? { body: data.problem, headers: data.headers } : undefined
}
