import pino from 'pino'
import { describeDatabaseError } from '@idempotent-checkout/db-kit'

/**
 * Structured JSON log lines on stdout, one object per line, for any log shipper:
 * `{"level":"info","time":"<ISO-8601>","pid":…,"hostname":…,…fields,"msg":"…"}`.
 *
 * pino: the standard JSON logger for Node (fast, kept up, redaction built in). It writes to fd 1
 * itself, never through a transport: no worker thread for Nitro to bundle. The lines of one turn of
 * the event loop are written together after it (lineBatches), not one system call per line. The
 * writes stay synchronous, so no write is ever half done when the process ends, and what is
 * buffered is written on every exit — Nitro's shutdown, process.exit, a crash (see flushLog).
 */

const logLevels = ['debug', 'info', 'warn', 'error', 'silent'] as const
export type LogLevel = typeof logLevels[number]
export type LogFields = Record<string, unknown>

const isLogLevel = (value: string | undefined): value is LogLevel => logLevels.includes(value as LogLevel)

/**
 * Defence in depth: no call site logs credentials, and these fields are censored should one ever
 * pass a header bag or a tenant row (top level and one level down).
 */
const SECRET_FIELDS = ['authorization', 'cookie', 'secretKey', 'secret', 'password', 'token', 'opsToken', 'serverKey']
const redactPaths = SECRET_FIELDS.flatMap(field => [field, `*.${field}`])

/**
 * Errors as name, message, code and stack: pino's default turns an Error that is not `err` into `{}`.
 * A database failure's message (and the stack's copy of it) becomes its SQLSTATE and constraint:
 * the driver's text quotes the query's values, customer emails and webhook bodies among them.
 */
export function serializeError(value: unknown): unknown {
  if (!(value instanceof Error)) return value
  const code = (value as { code?: unknown }).code
  const database = describeDatabaseError(value)
  const frames = value.stack?.split('\n').filter(line => /^\s+at /.test(line))
  return {
    name: value.name,
    message: database ?? value.message,
    ...(typeof code === 'string' || typeof code === 'number' ? { code } : {}),
    stack: database && frames ? [`${value.name}: ${database}`, ...frames].join('\n') : value.stack,
  }
}

/**
 * Text from clients made safe for a Postgres text column and a log line: one rule, percent-encoding
 * as in a URL, so percent-decoding gives the text back.
 * - A control character — C0 (U+0000–U+001F, NUL included), DEL (U+007F) or C1 (U+0080–U+009F) — is
 *   written as the %XX of its UTF-8 bytes, upper-case: NUL → %00, LF → %0A, DEL → %7F, U+0085 → %C2%85.
 * - A lone UTF-16 surrogate (no UTF-8 encodes one; Postgres' driver would store U+FFFD instead) is
 *   written as the %XX of the three bytes it would take: U+D800 → %ED%A0%80.
 * - Bytes that are not well-formed UTF-8 (overlong forms, stray continuation bytes, 0xFF) are written
 *   as %XX each, byte by byte: 0xC0 0xAF → %C0%AF (see escapeHeaderValue).
 * - `%` itself is written %25 where the text is not already percent-encoded (header values), so an
 *   escape never reads as something the client sent. A path already is: the router keeps %25 and %2F
 *   encoded, so there every `%` starts an escape and is kept.
 * Everything else — printable ASCII, letters of any script — is kept as it is, and nothing is ever
 * dropped. `maxLength` cuts between characters or escapes, never inside one.
 */
export function escapeText(text: string, options: { percent?: boolean, maxLength?: number } = {}): string {
  const { percent = false, maxLength = Number.POSITIVE_INFINITY } = options
  if (!(percent ? NEEDS_ESCAPE_OR_PERCENT : NEEDS_ESCAPE).test(text)) return cut(text, maxLength)
  let escaped = ''
  for (let index = 0; index < text.length; index++) {
    const unit = text.charCodeAt(index)
    let piece: string
    if (unit >= 0xD800 && unit <= 0xDBFF && index + 1 < text.length && isLowSurrogate(text.charCodeAt(index + 1))) {
      piece = text.slice(index, index + 2)
      index++
    }
    else if (isControl(unit) || (unit >= 0xD800 && unit <= 0xDFFF) || (percent && unit === 0x25)) {
      piece = percentEncode(wtf8Bytes(unit))
    }
    else {
      piece = text[index]!
    }
    if (escaped.length + piece.length > maxLength) break
    escaped += piece
  }
  return escaped
}

/**
 * A header value as the client sent it, escaped by the rule of escapeText (`%` included). Node reads
 * header bytes as latin1, one character per byte, so the bytes are read again as UTF-8: well-formed
 * sequences become their characters (then escaped like any text), every other byte becomes %XX.
 */
export function escapeHeaderValue(value: string, maxLength = Number.POSITIVE_INFINITY): string {
  // Visible ASCII but `%` (what valid request ids and keys are): nothing to do.
  if (/^[\x20-\x24\x26-\x7E]*$/.test(value)) return cut(value, maxLength)
  const bytes = Buffer.from(value, 'latin1')
  let escaped = ''
  for (let index = 0; index < bytes.length;) {
    const length = wellFormedSequenceLength(bytes, index)
    const piece = length
      ? escapeText(bytes.toString('utf8', index, index + length), { percent: true })
      : percentEncode([bytes[index]!])
    if (escaped.length + piece.length > maxLength) break
    escaped += piece
    index += length || 1
  }
  return escaped
}

// Matching control characters is their purpose.
/* eslint-disable no-control-regex */
const NEEDS_ESCAPE = /[\u0000-\u001F\u007F-\u009F\uD800-\uDFFF]/
const NEEDS_ESCAPE_OR_PERCENT = /[\u0000-\u001F\u007F-\u009F\uD800-\uDFFF%]/
/* eslint-enable no-control-regex */

const isControl = (unit: number) => unit <= 0x1F || (unit >= 0x7F && unit <= 0x9F)
const isLowSurrogate = (unit: number) => unit >= 0xDC00 && unit <= 0xDFFF

/** The UTF-8 bytes of a code point below U+10000 (a lone surrogate gets the bytes it would have). */
function wtf8Bytes(unit: number): number[] {
  if (unit < 0x80) return [unit]
  if (unit < 0x800) return [0xC0 | (unit >> 6), 0x80 | (unit & 0x3F)]
  return [0xE0 | (unit >> 12), 0x80 | ((unit >> 6) & 0x3F), 0x80 | (unit & 0x3F)]
}

const percentEncode = (bytes: number[]) => bytes.map(byte => `%${byte.toString(16).toUpperCase().padStart(2, '0')}`).join('')

/** Cuts at `maxLength` code units, backing off one so a surrogate pair is never split. */
function cut(text: string, maxLength: number): string {
  if (text.length <= maxLength) return text
  const end = isLowSurrogate(text.charCodeAt(maxLength)) ? maxLength - 1 : maxLength
  return text.slice(0, end)
}

/**
 * The length of the well-formed UTF-8 sequence at `index` (Unicode Table 3-7: shortest form, no
 * surrogates, at most U+10FFFF), or 0 when the byte there does not start one.
 */
function wellFormedSequenceLength(bytes: Buffer, index: number): number {
  const first = bytes[index]!
  if (first < 0x80) return 1
  const inRange = (offset: number, low = 0x80, high = 0xBF) => {
    const byte = bytes[index + offset]
    return byte !== undefined && byte >= low && byte <= high
  }
  if (first >= 0xC2 && first <= 0xDF) return inRange(1) ? 2 : 0
  if (first >= 0xE0 && first <= 0xEF) {
    const [low, high] = first === 0xE0 ? [0xA0, 0xBF] : first === 0xED ? [0x80, 0x9F] : [0x80, 0xBF]
    return inRange(1, low, high) && inRange(2) ? 3 : 0
  }
  if (first >= 0xF0 && first <= 0xF4) {
    const [low, high] = first === 0xF0 ? [0x90, 0xBF] : first === 0xF4 ? [0x80, 0x8F] : [0x80, 0xBF]
    return inRange(1, low, high) && inRange(2) && inRange(3) ? 4 : 0
  }
  return 0
}

/**
 * Every string a log line carries goes through escapeText (top-level fields and two levels of plain
 * objects and arrays below), so a value that came from a client can neither break the JSON line nor
 * smuggle a terminal control or a lone surrogate into it. Errors are left to their serializer; a line
 * with nothing to escape is logged as it came, without a copy.
 */
export function escapeLogFields<T>(value: T, depth = 0): T {
  if (typeof value === 'string') return (NEEDS_ESCAPE.test(value) ? escapeText(value) : value) as T
  if (depth > 2 || value === null || typeof value !== 'object') return value
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined
    value.forEach((item, index) => {
      const escaped = escapeLogFields(item, depth + 1)
      if (escaped !== item) (copy ??= [...value])[index] = escaped
    })
    return (copy ?? value) as T
  }
  const prototype = Object.getPrototypeOf(value)
  if (prototype !== Object.prototype && prototype !== null) return value
  let copy: Record<string, unknown> | undefined
  for (const [key, item] of Object.entries(value)) {
    const escaped = escapeLogFields(item, depth + 1)
    if (escaped !== item) (copy ??= { ...value } as Record<string, unknown>)[key] = escaped
  }
  return (copy ?? value) as T
}

/** Buffered bytes that trigger a write at once (below SonicBoom's 16 KiB maxWrite, as it requires). */
export const LOG_BUFFER_BYTES = 8 * 1024

const destination = pino.destination({ dest: 1, sync: true, minLength: LOG_BUFFER_BYTES })
let flushQueued = false

/**
 * Lines logged during one turn of the event loop (under load, the many requests one poll of the
 * sockets finishes) are written together just after it, in one write. Not later: a line is out as
 * soon as what it reports is visible elsewhere (a response, a committed row), as with a write per line.
 */
const lineBatches = {
  write(line: string) {
    destination.write(line)
    if (flushQueued) return
    flushQueued = true
    setImmediate(() => {
      flushQueued = false
      // A plain synchronous write: flushSync would also fsync, costly when stdout is a file.
      destination.flush()
    })
  },
}

/**
 * Writes the buffered lines now, synchronously. Every exit calls it ('exit' runs on process.exit, an
 * uncaught exception and an emptied event loop alike); pino registers that itself only for an
 * asynchronous destination.
 */
export function flushLog(): void {
  destination.flushSync()
}
process.on('exit', () => {
  try {
    flushLog()
  }
  catch {
    // stdout's reader is gone (EPIPE): nothing can be written any more, and the exit goes on.
  }
})

export const logger = pino({
  level: isLogLevel(process.env.LOG_LEVEL) ? process.env.LOG_LEVEL : 'info',
  timestamp: pino.stdTimeFunctions.isoTime,
  // Level names, not pino's numbers: what LOG_LEVEL says and what people grep for.
  formatters: { level: label => ({ level: label }), log: fields => escapeLogFields(fields) },
  serializers: { error: serializeError, err: serializeError, cause: serializeError },
  redact: { paths: redactPaths, censor: '[redacted]' },
}, lineBatches)

export function setLogLevel(level: LogLevel): void {
  logger.level = level
}

export const log = {
  debug: (msg: string, fields: LogFields = {}) => logger.debug(fields, msg),
  info: (msg: string, fields: LogFields = {}) => logger.info(fields, msg),
  warn: (msg: string, fields: LogFields = {}) => logger.warn(fields, msg),
  error: (msg: string, fields: LogFields = {}) => logger.error(fields, msg),
}
