import type { oas31 } from 'zod-openapi'

/**
 * The headers the API reads and writes, as components: request headers as parameters, response
 * headers as header objects, referenced by every operation that has them.
 */

const ref = (kind: 'headers' | 'parameters', name: string) => ({ $ref: `#/components/${kind}/${name}` })

/** Visible ASCII bare, or one RFC 8941 sf-string (`"abc"` is the key `abc`), as nuxt-idempotency's core/key.ts reads it. */
const IDEMPOTENCY_KEY_PATTERN = String.raw`^(?:[\x21-\x7E]{1,255}|"(?:[\x21\x23-\x5B\x5D-\x7E]|\\[\x22\x5C]){1,255}"(?:;[\x21-\x7E]*)?)$`

export const parameterComponents: Record<string, oas31.ParameterObject> = {
  IdempotencyKey: {
    name: 'Idempotency-Key',
    in: 'header',
    required: true,
    description: 'One key per intended operation (a UUID v4 is a good choice), reused on every retry of it: 1–255 visible ASCII characters (0x21–0x7E). '
      + 'It may also be sent as an RFC 8941 string, as the IETF draft writes it: `"abc"` is the key `abc`. '
      + 'Missing: 400 `idempotency-key-missing`; malformed: 400 `idempotency-key-invalid`. The same key with another body or route: 422 `idempotency-key-reused`. '
      + 'A key is remembered for 24 hours from its first request by default (the server\'s `IDEMPOTENCY_TTL_SECONDS`, 86400 seconds); after that it is a new key.',
    schema: { type: 'string', pattern: IDEMPOTENCY_KEY_PATTERN },
    examples: { bare: { summary: 'A UUID v4', value: '5f0c8a52-3f0e-4c7e-9a59-0c1c6f1f6b1e' }, sfString: { summary: 'RFC 8941 string: the same key', value: '"5f0c8a52-3f0e-4c7e-9a59-0c1c6f1f6b1e"' } },
  },
  Prefer: {
    name: 'Prefer',
    in: 'header',
    required: false,
    description: '`wait=N` (N ≤ 10 seconds): while a request with the same key and body is still running, wait up to N seconds for its answer and replay it, instead of an immediate 409 `request-in-progress`. Larger N counts as 10; `Preference-Applied` says what was applied.',
    schema: { type: 'string' },
    example: 'wait=10',
  },
  RequestId: {
    name: 'X-Request-Id',
    in: 'header',
    required: false,
    description: 'Your correlation id, echoed in `X-Request-Id` when it is 1–128 visible ASCII characters (anything else is ignored and the server\'s id is echoed instead).',
    schema: { type: 'string' },
    example: 'checkout-7f3a',
  },
  WebhookId: {
    name: 'webhook-id',
    in: 'header',
    required: false,
    description: 'Standard Webhooks: the event id, the dedupe key (1–255 visible ASCII), signed with the timestamp and the body. Without it the delivery is 401 `webhook-signature-invalid`.',
    schema: { type: 'string' },
    example: 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W',
  },
  WebhookTimestamp: {
    name: 'webhook-timestamp',
    in: 'header',
    required: false,
    description: 'Standard Webhooks: Unix seconds. Missing, more than 300 s old or in the future: 401 `webhook-signature-invalid`.',
    schema: { type: 'string', pattern: String.raw`^\d{1,12}$` },
    example: '1764580443',
  },
}

export const headerComponents: Record<string, oas31.HeaderObject> = {
  'X-Request-Id': { description: 'Your X-Request-Id when it was valid, else the server\'s id (`req_<uuid>`).', schema: { type: 'string' } },
  'X-Server-Request-Id': { description: 'The server\'s own id for the request (`req_<uuid>`): quote it to an operator.', schema: { type: 'string', pattern: '^req_' } },
  'Idempotent-Replayed': { description: '`true` on the stored answer of an earlier request with the same key (absent on the first execution).', schema: { type: 'string', enum: ['true'] } },
  'Retry-After': { description: 'Seconds to wait before retrying (with the same key).', schema: { type: 'string', pattern: String.raw`^\d+$` }, example: '1' },
  'Location': { description: 'The created resource.', schema: { type: 'string' } },
  'Preference-Applied': { description: 'The `Prefer: wait=N` the server applied (N capped at 10).', schema: { type: 'string', pattern: String.raw`^wait=\d+$` }, example: 'wait=10' },
  'Cache-Control': { description: '`no-store`: never kept by a cache (the answer holds a secret, or is a reading that must be fresh).', schema: { type: 'string', enum: ['no-store'] } },
  'Set-Cookie': { description: 'The checkout session: a sealed, `HttpOnly`, `SameSite=Strict` cookie `ic_checkout` bound to the demo tenant (`Secure` outside `nuxt dev`).', schema: { type: 'string' } },
}

export interface ResponseHeaderOptions {
  retryAfter?: boolean
  location?: boolean
  /** An answer of an idempotent route: it may be a replay. */
  replayed?: boolean
  preferenceApplied?: boolean
  cacheControl?: boolean
  setCookie?: boolean
}

/** The headers of one response: the request ids always, the rest as asked. */
export function responseHeaders(options: ResponseHeaderOptions = {}): oas31.HeadersObject {
  const names = ['X-Request-Id', 'X-Server-Request-Id']
  if (options.retryAfter) names.push('Retry-After')
  if (options.location) names.push('Location')
  if (options.replayed) names.push('Idempotent-Replayed')
  if (options.preferenceApplied) names.push('Preference-Applied')
  if (options.cacheControl) names.push('Cache-Control')
  if (options.setCookie) names.push('Set-Cookie')
  return Object.fromEntries(names.map(name => [name, ref('headers', name)]))
}

export const parameterRef = (name: keyof typeof parameterComponents) => ref('parameters', name)
