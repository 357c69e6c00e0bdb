/** SPEC §3: 1–255 visible ASCII characters (0x21–0x7E). */
const KEY_PATTERN = /^[\x21-\x7E]{1,255}$/

export type KeyCheck = { ok: true, key: string } | { ok: false, reason: 'missing' | 'invalid' }

export function checkIdempotencyKey(header: string | undefined | null): KeyCheck {
  if (header === undefined || header === null || header === '') return { ok: false, reason: 'missing' }
  return KEY_PATTERN.test(header) ? { ok: true, key: header } : { ok: false, reason: 'invalid' }
}
