import { createHmac, timingSafeEqual } from 'node:crypto'

/** One HTTP delivery as received: the raw bytes and a header reader. */
export interface WebhookDelivery {
  body: Buffer
  header: (name: string) => string | undefined
  nowSeconds: number
}

export type Verification = { ok: true } | { ok: false, reason: string, claimedEventId?: string }

/** Deliveries older or newer than this are refused, both ways: a replayed capture, or a clock far ahead. */
export const TIMESTAMP_TOLERANCE_SECONDS = 300

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

/** The body as JSON, or undefined. */
export function parseJsonBody(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8'))
  }
  catch {
    return undefined
  }
}
