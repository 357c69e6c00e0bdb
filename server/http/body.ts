import { getHeader, getQuery, type H3Event } from 'h3'
import type { z } from 'zod'
import { problem } from '../problems'

export const MAX_BODY_BYTES = 64 * 1024

/** JSON between systems is UTF-8 (RFC 8259 §8.1): invalid bytes reject the body instead of becoming U+FFFD. */
export const strictUtf8 = new TextDecoder('utf-8', { fatal: true })

/** Reads the raw body, refusing more than MAX_BODY_BYTES without buffering the rest (413). */
export async function readLimitedRawBody(event: H3Event): Promise<Buffer> {
  const declared = Number(getHeader(event, 'content-length') ?? Number.NaN)
  if (declared > MAX_BODY_BYTES) throw tooLarge()
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of event.node.req) {
    size += (chunk as Buffer).length
    if (size > MAX_BODY_BYTES) throw tooLarge()
    chunks.push(chunk as Buffer)
  }
  return Buffer.concat(chunks)
}

/**
 * Parses a JSON body and validates it: 415 for a non-JSON content type, 413 past 64 KiB, 400
 * `malformed-json`, 400 `validation-failed` with `errors: [{path, message}]`. The schema strips
 * unknown fields, so they neither reach the handler nor change the idempotency fingerprint.
 */
export async function readValidatedJson<S extends z.ZodType>(event: H3Event, schema: S): Promise<z.output<S>> {
  const contentType = (getHeader(event, 'content-type') ?? '').split(';')[0]!.trim().toLowerCase()
  if (!/^application\/([\w.+-]+\+)?json$/.test(contentType)) {
    throw problem('unsupported-media-type', `Expected Content-Type: application/json, got "${contentType || 'none'}". Send the body as JSON.`)
  }
  const raw = await readLimitedRawBody(event)
  let parsed: unknown
  try {
    parsed = JSON.parse(strictUtf8.decode(raw))
  }
  catch (error) {
    throw problem('malformed-json', `The body is not valid UTF-8 JSON (${(error as Error).message}). Fix it and send it again with the same Idempotency-Key.`)
  }
  return validated(schema, parsed, 'body', 'Nothing was stored: fix them and send the request again with the same Idempotency-Key.')
}

/** Like readValidatedJson, but a request without a body validates `{}`. */
export async function readOptionalValidatedJson<S extends z.ZodType>(event: H3Event, schema: S): Promise<z.output<S>> {
  const hasBody = Number(getHeader(event, 'content-length') ?? 0) > 0 || getHeader(event, 'transfer-encoding') !== undefined
  return hasBody ? readValidatedJson(event, schema) : validated(schema, {}, 'body', 'Fix them and send the request again.')
}

/** Validates the query string: 400 `validation-failed` with `errors: [{path, message}]`. */
export function readValidatedQuery<S extends z.ZodType>(event: H3Event, schema: S): z.output<S> {
  return validated(schema, getQuery(event), 'query', 'Fix them and send the request again.')
}

function validated<S extends z.ZodType>(schema: S, input: unknown, where: 'body' | 'query', advice: string): z.output<S> {
  const result = schema.safeParse(input)
  if (!result.success) {
    const errors = result.error.issues.map(issue => ({ path: issue.path.join('.') || `(${where})`, message: issue.message }))
    throw problem('validation-failed', `The ${where} has ${errors.length} invalid field${errors.length === 1 ? '' : 's'}; see errors. ${advice}`, { extensions: { errors } })
  }
  return result.data
}

function tooLarge() {
  return problem('payload-too-large', `Request bodies are limited to ${MAX_BODY_BYTES / 1024} KiB. Send a smaller body.`)
}
