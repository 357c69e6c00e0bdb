import pino from 'pino'
import { describeDatabaseError } from '../db/errors'

/**
 * Structured JSON log lines on stdout, one object per line, for any log shipper:
 * `{"level":"info","time":"<ISO-8601>","pid":…,"hostname":…,…fields,"msg":"…"}`.
 *
 * pino: the standard JSON logger for Node (fast, kept up, redaction built in). It writes through
 * a synchronous destination on fd 1 and never through a transport: no worker thread for Nitro to
 * bundle, and no line lost when a process exits right after logging (the standalone worker's
 * shutdown, a crash).
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

export const logger = pino({
  level: isLogLevel(process.env.LOG_LEVEL) ? process.env.LOG_LEVEL : 'info',
  timestamp: pino.stdTimeFunctions.isoTime,
  // Level names, not pino's numbers: what LOG_LEVEL says and what people grep for.
  formatters: { level: label => ({ level: label }) },
  serializers: { error: serializeError, err: serializeError, cause: serializeError },
  redact: { paths: redactPaths, censor: '[redacted]' },
}, pino.destination({ dest: 1, sync: true }))

export function setLogLevel(level: LogLevel): void {
  logger.level = level
}

export const log = {
  debug: (msg: string, fields: LogFields = {}) => logger.debug(fields, msg),
  info: (msg: string, fields: LogFields = {}) => logger.info(fields, msg),
  warn: (msg: string, fields: LogFields = {}) => logger.warn(fields, msg),
  error: (msg: string, fields: LogFields = {}) => logger.error(fields, msg),
}
