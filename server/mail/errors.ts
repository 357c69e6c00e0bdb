/** How a send failed, in the server's own words where it gave any. */

/** Worth another try: no connection, a timeout, a 4xx, or a connection lost before the server answered. */
export class MailUnavailable extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'MailUnavailable'
  }
}

/** A 5xx: the server refused the message for good (an unknown recipient, a message it will never take). */
export class MailRefused extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'MailRefused'
  }
}

interface SmtpFailure { code?: string, responseCode?: number, response?: string, message?: string }

/**
 * A failed send as one of the two. A 5xx refusal is permanent, except a failed login (535): that is
 * the deployment's credentials, fixed by an operator, after which the same message should go.
 */
export function mailErrorOf(error: unknown): MailUnavailable | MailRefused {
  const failure = (typeof error === 'object' && error !== null ? error : {}) as SmtpFailure
  const words = failure.response ?? failure.message ?? String(error)
  const refused = failure.responseCode !== undefined && failure.responseCode >= 500 && failure.responseCode < 600 && failure.code !== 'EAUTH'
  return refused
    ? new MailRefused(`the SMTP server refused the message: ${words}`, { cause: error })
    : new MailUnavailable(`the SMTP server did not take the message${failure.code ? ` (${failure.code})` : ''}: ${words}`, { cause: error })
}
