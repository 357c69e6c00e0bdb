import { eq, sql } from 'drizzle-orm'
import { newId } from '../../db/ids'
import { refunds } from '../../db/schema'
import { effectDone, markedEffect, type SideEffect } from '../effects'
import { defineJobKind, type JobContext } from '../../jobs/kind'
import type { JobEffect } from '../../jobs/store'
import { PermanentJobError, RetryableJobError } from '../../jobs/errors'
import type { JobType } from '../../jobs/types'
import { MailRefused } from '../../mail/errors'
import type { Mailer } from '../../mail/mailer'
import { orderIssueInvoiceJob, type OrderJobPayload, orderSendConfirmationJob, refundSendNoticeJob } from '../job-types'
import { loadOrders, type Order, requireOrder } from './load-orders'

/**
 * The effects of an order, each once per order however often its job runs. Without SMTP_URL
 * (`mailer` undefined) an email is the dev mailbox row its marker's statement writes. With it, an
 * email is sent first and its marker and row written with the job's completion after; see sendOnce.
 */

const formatAmount = (amount: number, currency: string) => `${currency} ${amount.toLocaleString('en-US')}`

interface OrderEmail { subject: string, body: string }

/** The email's row, written only with its marker: `messageId` is what it was sent under, null when it was not sent. */
const mailboxInsert = (order: Order, { subject, body }: OrderEmail, messageId: string | null): JobEffect => ({
  text: 'insert into mailbox (id, tenant_id, order_id, "to", subject, body, message_id) select $1::text, $2::text, order_id, $3::text, $4::text, $5::text, $6::text from marker',
  params: [newId('msg'), order.tenantId, order.customer.email, subject, body, messageId],
})

/** `confirmation_email.ord_…`, `invoice.ord_…`, `refund_notice.re_….ord_…`: the effect, in dot-atom text. */
const messageIdLeft = (orderId: string, effect: SideEffect) => `${effect.replace(':', '.')}.${orderId}`

/**
 * An email effect, sent once as far as this side can tell: a marker that exists means an attempt
 * sent it and committed, so nothing is sent again. Otherwise it is sent, then its marker, its row
 * and `alongside` are written with the completion. An attempt that lost the server's answer, or
 * failed to commit after it, sends again under the same Message-ID, so a receiver can recognise
 * the copy (docs/payments-and-refunds.md#customer-e-mails).
 */
async function sendOnce({ db, job, complete }: JobContext, mailer: Mailer, order: Order, effect: SideEffect, email: OrderEmail, ...alongside: JobEffect[]): Promise<void> {
  if (await effectDone(db, order.id, effect)) return complete()
  const messageId = mailer.messageId(messageIdLeft(order.id, effect))
  try {
    await mailer.sendMail({ to: order.customer.email, subject: email.subject, text: email.body, messageId })
  }
  catch (error) {
    if (error instanceof MailRefused) throw new PermanentJobError(error.message, { cause: error })
    throw new RetryableJobError(error instanceof Error ? error.message : String(error), { cause: error })
  }
  await complete(markedEffect(order.id, effect, job.id, ...alongside, mailboxInsert(order, email, messageId)))
}

/** An email about the order: once per order and effect, to the dev mailbox or through the mailer. */
async function emailOnce(context: JobContext, mailer: Mailer | undefined, order: Order, effect: SideEffect, email: OrderEmail): Promise<void> {
  if (mailer) return sendOnce(context, mailer, order, effect, email)
  await context.complete(markedEffect(order.id, effect, context.job.id, mailboxInsert(order, email, null)))
}

function orderEmailKind(type: JobType<OrderJobPayload>, effect: SideEffect, compose: (order: Order) => OrderEmail) {
  return (mailer: Mailer | undefined) => defineJobKind({
    ...type,
    load: loadOrders,
    async run(context, { orderId }, order) {
      const loaded = requireOrder(order, orderId)
      await emailOnce(context, mailer, loaded, effect, compose(loaded))
    },
  })
}

export const orderSendConfirmation = orderEmailKind(orderSendConfirmationJob, 'confirmation_email', order => ({
  subject: `Order ${order.id} confirmed`,
  body: `Thank you. We received ${formatAmount(order.amount, order.currency)} for order ${order.id} (cart ${order.cartId}).`,
}))

const invoiceInsert = (order: Order): JobEffect => ({
  text: 'insert into invoices (id, tenant_id, order_id, amount, currency) select $1::text, $2::text, order_id, $3::bigint, $4::text from marker',
  params: [newId('inv'), order.tenantId, order.amount, order.currency],
})

/** The invoice as an email: a line per item, then the total. */
export function invoiceEmail(order: Order): OrderEmail {
  const lines = order.items.map(item => `${item.quantity} x ${item.sku} at ${formatAmount(item.unitPrice, order.currency)}: ${formatAmount(item.quantity * item.unitPrice, order.currency)}`)
  return {
    subject: `Invoice for order ${order.id}`,
    body: [`Invoice for order ${order.id} (cart ${order.cartId}), paid.`, '', ...lines, '', `Total: ${formatAmount(order.amount, order.currency)}`].join('\n'),
  }
}

/** The invoice row, once per order; with a mailer, also sent to the customer by email (the row stays). */
export const orderIssueInvoice = (mailer: Mailer | undefined) => defineJobKind({
  ...orderIssueInvoiceJob,
  load: loadOrders,
  async run(context, { orderId }, order) {
    const loaded = requireOrder(order, orderId)
    if (mailer) return sendOnce(context, mailer, loaded, 'invoice', invoiceEmail(loaded), invoiceInsert(loaded))
    await context.complete(markedEffect(orderId, 'invoice', context.job.id, invoiceInsert(loaded)))
  },
})

/**
 * What the order's succeeded refunds add up to, counting this one and those settled before it (by
 * settled_at, then id): the refund that brings it to the order's amount is the one that made the
 * order refunded, however many parts came before. The same on every attempt: settled refunds stay.
 * The outer row is named in full: drizzle leaves a single table's columns unqualified in the
 * select list, where they would name `earlier`'s.
 */
const refundedThrough = sql<number>`(select coalesce(sum(earlier.amount), 0) from refunds earlier
  where earlier.order_id = refunds.order_id and earlier.status = 'succeeded'
  and (coalesce(earlier.settled_at, earlier.created_at), earlier.id) <= (coalesce(refunds.settled_at, refunds.created_at), refunds.id))::float8`.mapWith(Number)

/** One email per succeeded refund, naming its amount: marked `refund_notice:<refund id>`. */
export const refundSendNotice = (mailer: Mailer | undefined) => defineJobKind({
  ...refundSendNoticeJob,
  load: loadOrders,
  async run(context, { orderId, refundId }, loaded) {
    const order = requireOrder(loaded, orderId)
    const [refund] = await context.db.select({ amount: refunds.amount, source: refunds.source, refundedThrough }).from(refunds).where(eq(refunds.id, refundId))
    if (!refund) throw new PermanentJobError(`refund ${refundId} not found`)
    const last = refund.refundedThrough >= order.amount
    const subject = last ? `Order ${order.id} refunded` : `Part of order ${order.id} refunded`
    const what = !last ? 'part of' : refund.amount >= order.amount ? 'the full amount of' : 'the rest of'
    const why = refund.source === 'automatic' ? ` The order was canceled before your payment reached us, so we gave it back.` : ''
    const body = `We refunded ${what} order ${order.id}: ${formatAmount(refund.amount, order.currency)}.${why} It can take a few days to reach your account.`
    await emailOnce(context, mailer, order, `refund_notice:${refundId}`, { subject, body })
  },
})
