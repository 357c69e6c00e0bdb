import { createHash } from 'node:crypto'

/**
 * JSON with object keys sorted at every depth and no whitespace, so two payloads that mean the
 * same thing always serialise the same way. Array order is meaningful and kept.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null'
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`
}

export interface FingerprintInput {
  method: string
  route: string
  scope: string
  /** The validated payload: unknown fields were stripped by the schema, so they cannot change it. */
  payload: unknown
}

/** SHA-256 (hex) of method, route, scope and the canonical payload, separated unambiguously. */
export function fingerprint({ method, route, scope, payload }: FingerprintInput): string {
  return createHash('sha256')
    .update(canonicalJson([method.toUpperCase(), route, scope, payload]))
    .digest('hex')
}

/**
 * The fields of `body` named by dot paths (`customer.id`), as the fingerprint sees them: each path
 * with its value (absent: null), so that a changed listed field changes it and nothing else does.
 */
export function pickFields(body: unknown, paths: readonly string[]): Record<string, unknown> {
  const picked: Record<string, unknown> = {}
  for (const path of paths) {
    let value: unknown = body
    for (const part of path.split('.')) {
      value = typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[part] : undefined
    }
    picked[path] = value ?? null
  }
  return picked
}
