import { describe, expect, it } from 'vitest'
import { mailDomainOf, parseConfig, settingProblem } from '../../server/config/index'
import { MailRefused, MailUnavailable, mailErrorOf } from '../../server/mail/errors'
import { createMailer } from '../../server/mail/mailer'

/** SMTP_URL and SMTP_FROM, the Message-IDs they make, and how a failed send is classed (docs/payments-and-refunds.md#customer-e-mails). */

describe('SMTP settings', () => {
  it('takes smtp:// and smtps:// URLs with a host, and refuses anything else', () => {
    for (const url of ['smtp://127.0.0.1:2525', 'smtps://checkout:secret@smtp.example.com:465', 'smtp://smtp.example.com?requireTLS=true']) expect(settingProblem('SMTP_URL', url), url).toBeUndefined()
    for (const url of ['smtp://', 'http://smtp.example.com', 'smtp.example.com:25', 'mailto:a@b.c']) expect(settingProblem('SMTP_URL', url), url).toMatch(/smtp:\/\/ or smtps:\/\/ URL with a host/)
  })

  it('takes an address or a name and an address as SMTP_FROM, and names the Message-IDs\' domain after it', () => {
    expect(parseConfig({}).SMTP_FROM).toBe('Checkout <no-reply@localhost>')
    expect(mailDomainOf('Checkout <no-reply@localhost>')).toBe('localhost')
    expect(mailDomainOf('"Shop, Inc." <orders@shop.example>')).toBe('shop.example')
    expect(mailDomainOf('orders@mail.shop.example')).toBe('mail.shop.example')
    for (const from of ['orders@', 'Shop <orders@shop example>', 'Shop orders@shop.example', 'orders@[127.0.0.1]']) expect(settingProblem('SMTP_FROM', from), from).toBeDefined()
  })

  it('makes no mailer without SMTP_URL (the dev mailbox), and Message-IDs on SMTP_FROM\'s domain with one', () => {
    expect(createMailer({ SMTP_URL: undefined, SMTP_FROM: 'Checkout <no-reply@localhost>' })).toBeUndefined()
    const mailer = createMailer({ SMTP_URL: 'smtp://127.0.0.1:9', SMTP_FROM: 'Shop <no-reply@shop.example>' })!
    expect(mailer.messageId('refund_notice.re_1.ord_1')).toBe('<refund_notice.re_1.ord_1@shop.example>')
  })
})

describe('a failed send', () => {
  const smtpError = (fields: Record<string, unknown>) => Object.assign(new Error('failed'), fields)

  it('is permanent for a 5xx refusal, in the server\'s words', () => {
    const refused = mailErrorOf(smtpError({ code: 'EENVELOPE', responseCode: 550, response: '550 5.1.1 <x@example.com>: no such user here' }))
    expect(refused).toBeInstanceOf(MailRefused)
    expect(refused.message).toBe('the SMTP server refused the message: 550 5.1.1 <x@example.com>: no such user here')
    expect(mailErrorOf(smtpError({ code: 'EMESSAGE', responseCode: 554, response: '554 message refused' }))).toBeInstanceOf(MailRefused)
  })

  it('is worth retrying for a lost connection, a timeout, a 4xx, and a failed login', () => {
    for (const fields of [
      { code: 'ECONNECTION', message: 'Connection closed unexpectedly' },
      { code: 'ETIMEDOUT', message: 'Greeting never received' },
      { code: 'ESOCKET', message: 'connect ECONNREFUSED 127.0.0.1:9' },
      { code: 'EENVELOPE', responseCode: 451, response: '451 4.3.0 try again later' },
      { code: 'EAUTH', responseCode: 535, response: '535 5.7.8 authentication failed' },
    ]) expect(mailErrorOf(smtpError(fields)), JSON.stringify(fields)).toBeInstanceOf(MailUnavailable)
    expect(mailErrorOf(smtpError({ code: 'ECONNECTION', message: 'Connection closed unexpectedly' })).message).toBe('the SMTP server did not take the message (ECONNECTION): Connection closed unexpectedly')
  })
})
