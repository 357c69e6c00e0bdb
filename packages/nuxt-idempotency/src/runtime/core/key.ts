import { parseItem } from 'structured-headers'

/** README.md#the-key-contract: 1–255 visible ASCII characters (0x21–0x7E). */
const KEY_PATTERN = /^[\x21-\x7E]{1,255}$/

export type KeyCheck = { ok: true, key: string } | { ok: false, reason: 'missing' | 'invalid' }

/** A key as it is stored and compared (also a webhook's event id): no header syntax, only the rule. */
export function checkIdempotencyKey(value: string | undefined | null): KeyCheck {
  if (value === undefined || value === null || value === '') return { ok: false, reason: 'missing' }
  return KEY_PATTERN.test(value) ? { ok: true, key: value } : { ok: false, reason: 'invalid' }
}

/**
 * The `Idempotency-Key` request header. The IETF draft (draft-ietf-httpapi-idempotency-key-header)
 * writes the key as an RFC 8941 sf-string, `"8e03…"`; Stripe and most clients send it bare. A value
 * opening with a double quote is parsed as a structured Item — so `"k1"` and `k1` are the same key —
 * and anything else is the key itself. The unquoted string must then pass the same rule as a bare
 * key; an Item that is not a String (or two headers, joined by a comma) is invalid.
 */
export function parseIdempotencyKeyHeader(header: string | undefined | null): KeyCheck {
  if (!header?.startsWith('"')) return checkIdempotencyKey(header)
  let item: unknown
  try {
    // Parameters (`"k1";p=1`) are allowed by RFC 8941 and mean nothing here: ignored.
    [item] = parseItem(header)
  }
  catch {
    return { ok: false, reason: 'invalid' }
  }
  if (typeof item !== 'string') return { ok: false, reason: 'invalid' }
  const checked = checkIdempotencyKey(item)
  return checked.ok ? checked : { ok: false, reason: 'invalid' }
}
