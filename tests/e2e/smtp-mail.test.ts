import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest'
import { fastJobsEnv } from '../support/app'
import { request } from '../support/http'
import { opsRequest } from '../support/ops'
import { expectCreatedRefund, newIdempotencyKey, type OrdersStack, postOrder, startOrdersStack, validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { type ReceivedMail, startSmtpServer, type TestSmtpServer } from '../support/smtp-server'
import { describeWithServices } from '../support/services'

// Customer e-mails over SMTP (docs/payments-and-refunds.md#customer-e-mails): the built app with
// SMTP_URL at a real SMTP server the test starts on loopback (with a login), mockpay as the
// payment provider. A paid order sends one confirmation and one invoice, each refund one notice,
// under Message-IDs derived from the effect; a server that takes a message and drops the connection
// before answering gets it again under the same Message-ID, and the order's marker and mailbox row
// stay one; a 5xx refusal of the recipient dead-letters the job with the server's words.

const FROM_DOMAIN = 'shop.example'

describeWithServices('customer e-mails through SMTP (SMTP_URL)', ['postgres', 'redis'], () => {
  let smtp: TestSmtpServer
  let stack: OrdersStack

  beforeAll(async () => {
    smtp = await startSmtpServer()
    stack = await startOrdersStack('smtp-mail', {
      ...fastJobsEnv, MOCKPAY_DUPLICATES: '0', MOCKPAY_MAX_DELAY_MS: '0',
      SMTP_URL: smtp.url, SMTP_FROM: `Shop <no-reply@${FROM_DOMAIN}>`,
    })
  })

  afterAll(async () => {
    await stack?.close()
    await smtp?.stop()
  })

  beforeEach(() => {
    smtp.dropAnswers(0)
  })

  const auth = () => ({ authorization: `Bearer ${stack.tenant.secretKey}` })
  const readOrder = async (orderId: string) => (await request(stack.app.url, `/api/orders/${orderId}`, { headers: auth() })).json
  const mailTo = (email: string): ReceivedMail[] => smtp.received.filter(mail => mail.recipients.includes(email))
  const messageId = (left: string) => `<${left}@${FROM_DOMAIN}>`

  /** An order of a customer of its own, paid through mockpay. */
  async function paidOrder(): Promise<{ orderId: string, email: string }> {
    const email = `smtp-${randomUUID()}@example.com`
    const created = await postOrder(stack.app.url, { secretKey: stack.tenant.secretKey, key: newIdempotencyKey(), body: validOrderBody({ customer: { email } }) })
    expect(created.status, created.text).toBe(201)
    const orderId: string = created.json.id
    let intentId: string | null = null
    await pollUntil('the worker created the payment intent', async () => Boolean(intentId = (await readOrder(orderId)).paymentIntentId))
    const confirmed = await request(stack.app.url, `/api/mockpay/intents/${intentId}/confirm`, { method: 'POST', body: { outcome: 'succeed', chaos: { duplicates: 0, maxDelayMs: 0 } } })
    expect(confirmed.status, confirmed.text).toBe(200)
    await pollUntil('the order is paid', async () => (await readOrder(orderId)).status === 'paid')
    return { orderId, email }
  }

  const jobsOf = (orderId: string) => stack.sql<Array<{ kind: string, status: string, attempt: number, lastError: string | null }>>`
    select kind, status, attempt, last_error as "lastError" from jobs where payload->>'orderId' = ${orderId} and kind like 'order.%' order by kind`
  const mailboxOf = (orderId: string) => stack.sql<Array<{ to: string, subject: string, messageId: string | null }>>`
    select "to", subject, message_id as "messageId" from mailbox where order_id = ${orderId} order by subject`
  const markersOf = async (orderId: string) => (await stack.sql<Array<{ effect: string }>>`select effect from side_effects where order_id = ${orderId} order by effect`).map(row => row.effect)

  it('a paid order sends one confirmation and one invoice, each under the Message-ID of its effect, as the mailbox records them', async () => {
    const { orderId, email } = await paidOrder()
    await pollUntil('both effects are marked', async () => (await markersOf(orderId)).length === 2)
    const sent = mailTo(email)
    expect(sent.map(mail => [mail.headers['message-id'], mail.headers.subject]).sort()).toEqual([
      [messageId(`confirmation_email.${orderId}`), `Order ${orderId} confirmed`],
      [messageId(`invoice.${orderId}`), `Invoice for order ${orderId}`],
    ])
    for (const mail of sent) {
      expect(mail.headers.to).toBe(email)
      expect(mail.headers.from).toBe(`Shop <no-reply@${FROM_DOMAIN}>`)
      expect(mail.recipients).toEqual([email])
    }
    const invoice = sent.find(mail => mail.headers.subject?.startsWith('Invoice'))!
    expect(invoice.text).toBe([`Invoice for order ${orderId} (cart ${(await readOrder(orderId)).cartId}), paid.`, '', '2 x SKU-1 at IDR 75,000: IDR 150,000', '', 'Total: IDR 150,000'].join('\n'))

    expect(await mailboxOf(orderId)).toEqual([
      { to: email, subject: `Invoice for order ${orderId}`, messageId: messageId(`invoice.${orderId}`) },
      { to: email, subject: `Order ${orderId} confirmed`, messageId: messageId(`confirmation_email.${orderId}`) },
    ])
    expect(await stack.sql`select count(*)::int as n from invoices where order_id = ${orderId}`).toEqual([{ n: 1 }])
    expect(await markersOf(orderId)).toEqual(['confirmation_email', 'invoice'])
    expect((await jobsOf(orderId)).map(job => [job.kind, job.status, job.attempt])).toEqual([['order.issue_invoice', 'completed', 1], ['order.send_confirmation', 'completed', 1]])
  })

  it('refunds in parts send one notice each; the one that refunds the rest says "refunded", the others "Part of"', async () => {
    const { orderId, email } = await paidOrder()
    const refundIds: string[] = []
    for (const [index, amount] of [60_000, 60_000, 30_000].entries()) {
      const key = newIdempotencyKey()
      const created = await request(stack.app.url, `/api/orders/${orderId}/refunds`, { method: 'POST', headers: { ...auth(), 'idempotency-key': key }, body: { amount } })
      expectCreatedRefund(created, { orderId, amount, key })
      refundIds.push(created.json.id)
      await pollUntil(`notice ${index + 1} is sent`, async () => mailTo(email).some(mail => mail.headers['message-id'] === messageId(`refund_notice.${created.json.id}.${orderId}`)), { timeoutMs: 20_000 })
    }
    expect((await readOrder(orderId)).status).toBe('refunded')

    const notices = mailTo(email).filter(mail => mail.headers['message-id']!.startsWith('<refund_notice.'))
    expect(notices.map(mail => [mail.headers['message-id'], mail.headers.subject])).toEqual([
      [messageId(`refund_notice.${refundIds[0]}.${orderId}`), `Part of order ${orderId} refunded`],
      [messageId(`refund_notice.${refundIds[1]}.${orderId}`), `Part of order ${orderId} refunded`],
      [messageId(`refund_notice.${refundIds[2]}.${orderId}`), `Order ${orderId} refunded`],
    ])
    expect(notices.map(mail => mail.text)).toEqual([
      `We refunded part of order ${orderId}: IDR 60,000. It can take a few days to reach your account.`,
      `We refunded part of order ${orderId}: IDR 60,000. It can take a few days to reach your account.`,
      `We refunded the rest of order ${orderId}: IDR 30,000. It can take a few days to reach your account.`,
    ])
    expect(mailTo(email)).toHaveLength(5)
    expect(await markersOf(orderId)).toEqual(['confirmation_email', 'invoice', ...refundIds.map(id => `refund_notice:${id}`).sort()])
    expect((await mailboxOf(orderId)).filter(row => row.messageId?.startsWith('<refund_notice.'))).toHaveLength(3)
  })

  it('a server that takes the message and drops the connection before answering gets it again under the same Message-ID; the order\'s marker and mailbox row stay one, the audit empty', async () => {
    smtp.dropAnswers(1)
    const { orderId, email } = await paidOrder()
    await pollUntil('both effects are marked', async () => (await markersOf(orderId)).length === 2)

    const ids = mailTo(email).map(mail => mail.headers['message-id']!)
    expect(ids).toHaveLength(3)
    // The first message was taken twice, as it was, the other once: the first copy's answer was lost.
    const copies = (id: string) => mailTo(email).filter(mail => mail.headers['message-id'] === id)
    const other = ids.find(id => id !== ids[0])!
    expect([ids[0], other].sort()).toEqual([messageId(`confirmation_email.${orderId}`), messageId(`invoice.${orderId}`)])
    expect([copies(ids[0]!).length, copies(other).length]).toEqual([2, 1])
    // The same message but for its Date: the time of the attempt.
    const [first, second] = copies(ids[0]!).map(({ headers: { date: _, ...headers }, ...mail }) => ({ ...mail, headers }))
    expect(second).toEqual(first)

    expect(await markersOf(orderId)).toEqual(['confirmation_email', 'invoice'])
    expect((await mailboxOf(orderId)).map(row => row.messageId).sort()).toEqual([messageId(`confirmation_email.${orderId}`), messageId(`invoice.${orderId}`)])
    const jobs = await jobsOf(orderId)
    const dropped = jobs.find(job => ids[0]!.startsWith(job.kind === 'order.issue_invoice' ? '<invoice.' : '<confirmation_email.'))!
    expect(dropped).toMatchObject({ status: 'completed', attempt: 2 })
    expect(jobs.filter(job => job !== dropped).map(job => [job.status, job.attempt])).toEqual([['completed', 1]])
    const [history] = await stack.sql<[{ errors: Array<{ errorClass: string, message: string }> }]>`select errors from jobs where payload->>'orderId' = ${orderId} and kind = ${dropped.kind}`
    expect(history.errors.map(error => error.errorClass)).toEqual(['retryable'])
    expect(history.errors[0]!.message).toMatch(/ECONNECTION/)

    const audit = await opsRequest(stack.app.url, '/api/ops/audit/duplicates')
    expect(audit.status, audit.text).toBe(200)
    expect(audit.json.exactlyOnceViolations).toEqual([])
    expect(audit.json.healthy).toBe(true)
  })

  it('a recipient the server refuses for good (550) dead-letters the job at once with the server\'s words, and nothing is marked', async () => {
    const email = `refused-${randomUUID()}@example.com`
    smtp.refuse(email)
    const created = await postOrder(stack.app.url, { secretKey: stack.tenant.secretKey, key: newIdempotencyKey(), body: validOrderBody({ customer: { email } }) })
    expect(created.status, created.text).toBe(201)
    const orderId: string = created.json.id
    let intentId: string | null = null
    await pollUntil('the worker created the payment intent', async () => Boolean(intentId = (await readOrder(orderId)).paymentIntentId))
    expect((await request(stack.app.url, `/api/mockpay/intents/${intentId}/confirm`, { method: 'POST', body: { outcome: 'succeed', chaos: { duplicates: 0, maxDelayMs: 0 } } })).status).toBe(200)
    await pollUntil('both email jobs are dead letters', async () => (await jobsOf(orderId)).every(job => job.status === 'dead_letter') && (await jobsOf(orderId)).length === 2, { timeoutMs: 20_000 })

    for (const job of await jobsOf(orderId)) {
      expect(job.attempt).toBe(1)
      expect(job.lastError).toMatch(/PermanentJobError: the SMTP server refused the message: 550 5\.1\.1 <refused-.*@example\.com>: no such user here/)
    }
    expect(mailTo(email)).toEqual([])
    expect(await markersOf(orderId)).toEqual([])
    expect(await mailboxOf(orderId)).toEqual([])
  })
})
