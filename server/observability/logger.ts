/** Structured JSON log lines on stdout, one object per line, for any log shipper. */

const levels = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 } as const
export type LogLevel = keyof typeof levels
export type LogFields = Record<string, unknown>

let threshold: number = levels[(process.env.LOG_LEVEL as LogLevel) in levels ? process.env.LOG_LEVEL as LogLevel : 'info']

export function setLogLevel(level: LogLevel): void {
  threshold = levels[level]
}

function write(level: Exclude<LogLevel, 'silent'>, msg: string, fields: LogFields): void {
  if (levels[level] < threshold) return
  const line = JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields }, (_, v) =>
    v instanceof Error ? { name: v.name, message: v.message } : v)
  process.stdout.write(`${line}\n`)
}

export const log = {
  debug: (msg: string, fields: LogFields = {}) => write('debug', msg, fields),
  info: (msg: string, fields: LogFields = {}) => write('info', msg, fields),
  warn: (msg: string, fields: LogFields = {}) => write('warn', msg, fields),
  error: (msg: string, fields: LogFields = {}) => write('error', msg, fields),
}
