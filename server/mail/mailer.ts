import nodemailer from 'nodemailer'
import { type AppConfig, mailDomainOf } from '../config'
import { mailErrorOf } from './errors'

/** One email, with the Message-ID its sender derived from what it is about (never one made per attempt). */
export interface OutgoingMail {
  to: string
  subject: string
  text: string
  messageId: string
}

/** Sends through SMTP_URL (docs/payments-and-refunds.md#customer-e-mails). */
export interface Mailer {
  /** `<idLeft@domain of SMTP_FROM>`: `idLeft` is dot-atom text (RFC 5322 §3.6.4), e.g. `invoice.ord_…`. */
  messageId(idLeft: string): string
  /** Resolves once the server accepted the message (its answer to the end of DATA); throws MailUnavailable or MailRefused. */
  sendMail(mail: OutgoingMail): Promise<void>
}

/**
 * A failed connection or a silent server ends the attempt (a retryable failure) well within a job's
 * heartbeat timeout, instead of nodemailer's minutes.
 */
const CONNECTION_TIMEOUT_MS = 10_000
const GREETING_TIMEOUT_MS = 10_000
const SOCKET_TIMEOUT_MS = 30_000

/**
 * The process's mailer from SMTP_URL and SMTP_FROM, or undefined when SMTP_URL is unset (the dev
 * mailbox). One transport, one connection per message: nothing is held between the sends of a worker.
 */
export function createMailer(config: Pick<AppConfig, 'SMTP_URL' | 'SMTP_FROM'>): Mailer | undefined {
  if (!config.SMTP_URL) return undefined
  const domain = mailDomainOf(config.SMTP_FROM)
  const transport = nodemailer.createTransport({
    url: config.SMTP_URL,
    connectionTimeout: CONNECTION_TIMEOUT_MS,
    greetingTimeout: GREETING_TIMEOUT_MS,
    socketTimeout: SOCKET_TIMEOUT_MS,
  }, { from: config.SMTP_FROM })
  return {
    messageId: idLeft => `<${idLeft}@${domain}>`,
    async sendMail(mail) {
      try {
        await transport.sendMail({ to: mail.to, subject: mail.subject, text: mail.text, messageId: mail.messageId })
      }
      catch (error) {
        throw mailErrorOf(error)
      }
    },
  }
}
