import { createHmac, timingSafeEqual } from 'node:crypto'
import { TIMESTAMP_TOLERANCE_SECONDS } from '../types'

export const hmacSha256 = (key: Buffer | string, ...parts: Array<Buffer | string>) => {
  const hmac = createHmac('sha256', key)
  for (const part of parts) hmac.update(part)
  return hmac.digest()
}

/** Constant-time equality of two byte strings (length is not secret). */
export function sameBytes(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b)
}

/** A Unix-seconds timestamp within ±tolerance of now, or why not. */
export function checkTimestamp(raw: string | undefined, nowSeconds: number): { ok: true, seconds: number } | { ok: false, reason: string } {
  if (!raw || !/^\d{1,12}$/.test(raw)) return { ok: false, reason: 'timestamp missing or not Unix seconds' }
  const seconds = Number(raw)
  const skew = nowSeconds - seconds
  if (skew > TIMESTAMP_TOLERANCE_SECONDS) return { ok: false, reason: `timestamp ${skew} s old (tolerance ${TIMESTAMP_TOLERANCE_SECONDS} s)` }
  if (-skew > TIMESTAMP_TOLERANCE_SECONDS) return { ok: false, reason: `timestamp ${-skew} s in the future (tolerance ${TIMESTAMP_TOLERANCE_SECONDS} s)` }
  return { ok: true, seconds }
}

/** A zod failure as one line for a payload-invalid detail. */
export const explainIssues = (error: { issues: Array<{ path: PropertyKey[], message: string }> }) =>
  error.issues.map(issue => `${issue.path.join('.') || '(body)'}: ${issue.message}`).join('; ')
