import { newId } from '../../db/ids'
import { markedEffect, type SideEffect } from '../../orders/effects'
import { defineJobKind } from '../kind'
import type { JobEffect } from '../store'
import { type JobType, orderIssueInvoiceJob, type OrderJobPayload, orderSendConfirmationJob, orderSendRefundNoticeJob } from '../types'
import { loadOrders, type Order, requireOrder } from './order-payload'

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

/** An email about the order, into the dev mailbox: written once per order and effect. */
function orderEmailKind(type: JobType<OrderJobPayload>, effect: SideEffect, compose: (order: Order) => { subject: string, body: string }) {
  return orderEffectKind(type, effect, (order) => {
    const { subject, body } = compose(order)
    return {
      text: 'insert into mailbox (id, tenant_id, order_id, "to", subject, body) select $1::text, $2::text, order_id, $3::text, $4::text, $5::text from marker',
      params: [newId('msg'), order.tenantId, order.customer.email, subject, body],
    }
  })
}

export const orderSendConfirmation = orderEmailKind(orderSendConfirmationJob, 'confirmation_email', order => ({
  subject: `Order ${order.id} confirmed`,
  body: `Thank you. We received ${formatAmount(order.amount, order.currency)} for order ${order.id} (cart ${order.cartId}).`,
}))

export const orderIssueInvoice = orderEffectKind(orderIssueInvoiceJob, 'invoice', order => ({
  text: 'insert into invoices (id, tenant_id, order_id, amount, currency) select $1::text, $2::text, order_id, $3::bigint, $4::text from marker',
  params: [newId('inv'), order.tenantId, order.amount, order.currency],
}))

// Only a refund of the order's whole amount makes it refunded (a partial one leaves it as it was),
// so the notice can name that amount.
export const orderSendRefundNotice = orderEmailKind(orderSendRefundNoticeJob, 'refund_notice', order => ({
  subject: `Order ${order.id} refunded`,
  body: `We refunded the full amount of order ${order.id}, ${formatAmount(order.amount, order.currency)}. It can take a few days to reach your account.`,
}))
