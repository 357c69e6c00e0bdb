import { eq } from 'drizzle-orm'
import { newId } from '../../db/ids'
import { refunds } from '../../db/schema'
import { markedEffect, type SideEffect } from '../effects'
import { defineJobKind } from '../../jobs/kind'
import type { JobEffect } from '../../jobs/store'
import { PermanentJobError } from '../../jobs/errors'
import type { JobType } from '../../jobs/types'
import { orderIssueInvoiceJob, type OrderJobPayload, orderSendConfirmationJob, refundSendNoticeJob } from '../job-types'
import { loadOrders, type Order, requireOrder } from './load-orders'

const formatAmount = (amount: number, currency: string) => `${currency} ${amount.toLocaleString('en-US')}`

/**
 * A job that performs one side effect of an order, once per order however often it runs: the
 * effect's write, its (order, effect) marker and the job's completion are one statement.
 */
function orderEffectKind(type: JobType<OrderJobPayload>, effect: SideEffect, write: (order: Order) => JobEffect) {
  return defineJobKind({
    ...type,
    load: loadOrders,
    async run({ job, complete }, { orderId }, order) {
      await complete(markedEffect(orderId, effect, job.id, write(requireOrder(order, orderId))))
    },
  })
}

/** An email to the order's customer, into the dev mailbox, written only with its marker. */
const mailboxInsert = (order: Order, { subject, body }: { subject: string, body: string }): JobEffect => ({
  text: 'insert into mailbox (id, tenant_id, order_id, "to", subject, body) select $1::text, $2::text, order_id, $3::text, $4::text, $5::text from marker',
  params: [newId('msg'), order.tenantId, order.customer.email, subject, body],
})

/** An email about the order: written once per order and effect. */
function orderEmailKind(type: JobType<OrderJobPayload>, effect: SideEffect, compose: (order: Order) => { subject: string, body: string }) {
  return orderEffectKind(type, effect, order => mailboxInsert(order, compose(order)))
}

export const orderSendConfirmation = orderEmailKind(orderSendConfirmationJob, 'confirmation_email', order => ({
  subject: `Order ${order.id} confirmed`,
  body: `Thank you. We received ${formatAmount(order.amount, order.currency)} for order ${order.id} (cart ${order.cartId}).`,
}))

export const orderIssueInvoice = orderEffectKind(orderIssueInvoiceJob, 'invoice', order => ({
  text: 'insert into invoices (id, tenant_id, order_id, amount, currency) select $1::text, $2::text, order_id, $3::bigint, $4::text from marker',
  params: [newId('inv'), order.tenantId, order.amount, order.currency],
}))

/** One email per succeeded refund, naming its amount: marked `refund_notice:<refund id>`. */
export const refundSendNotice = defineJobKind({
  ...refundSendNoticeJob,
  load: loadOrders,
  async run({ db, job, complete }, { orderId, refundId }, loaded) {
    const order = requireOrder(loaded, orderId)
    const [refund] = await db.select({ amount: refunds.amount, source: refunds.source }).from(refunds).where(eq(refunds.id, refundId))
    if (!refund) throw new PermanentJobError(`refund ${refundId} not found`)
    const whole = refund.amount >= order.amount
    const subject = whole ? `Order ${order.id} refunded` : `Part of order ${order.id} refunded`
    const why = refund.source === 'automatic' ? ` The order was canceled before your payment reached us, so we gave it back.` : ''
    const body = `We refunded ${whole ? 'the full amount of' : 'part of'} order ${order.id}: ${formatAmount(refund.amount, order.currency)}.${why} It can take a few days to reach your account.`
    await complete(markedEffect(orderId, `refund_notice:${refundId}`, job.id, mailboxInsert(order, { subject, body })))
  },
})
