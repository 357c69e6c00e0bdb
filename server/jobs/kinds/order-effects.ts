import type { Database } from '../../db/client'
import { newId } from '../../db/ids'
import { invoices, mailbox } from '../../db/schema'
import { claimSideEffect, type SideEffect } from '../../orders/effects'
import { defineJobKind } from '../kind'
import { loadOrder, OrderJobPayload, orderResource } from './order-payload'

type Order = Awaited<ReturnType<typeof loadOrder>>

const formatAmount = (amount: number, currency: string) => `${currency} ${amount.toLocaleString('en-US')}`

/**
 * A job that performs one side effect of an order, once per order however often it runs: the
 * effect's writes share the transaction that inserts its (order, effect) marker.
 */
function orderEffectKind(kind: string, effect: SideEffect, perform: (tx: Database, order: Order) => Promise<void>) {
  return defineJobKind({
    kind,
    payload: OrderJobPayload,
    resource: orderResource,
    async run({ db, job, commit }, { orderId }) {
      const order = await loadOrder(db, orderId)
      await commit(async (tx) => {
        if (await claimSideEffect(tx, orderId, effect, job.id)) await perform(tx, order)
      })
    },
  })
}

/** An email about the order, into the dev mailbox: written once per order and effect. */
function orderEmailKind(kind: string, effect: SideEffect, compose: (order: Order) => { subject: string, body: string }) {
  return orderEffectKind(kind, effect, async (tx, order) => {
    await tx.insert(mailbox).values({ id: newId('msg'), tenantId: order.tenantId, orderId: order.id, to: order.customer.email, ...compose(order) })
  })
}

export const orderSendConfirmation = orderEmailKind('order.send_confirmation', 'confirmation_email', order => ({
  subject: `Order ${order.id} confirmed`,
  body: `Thank you. We received ${formatAmount(order.amount, order.currency)} for order ${order.id} (cart ${order.cartId}).`,
}))

export const orderIssueInvoice = orderEffectKind('order.issue_invoice', 'invoice', async (tx, order) => {
  await tx.insert(invoices).values({ id: newId('inv'), tenantId: order.tenantId, orderId: order.id, amount: order.amount, currency: order.currency })
})

// Only a refund of the order's whole amount makes it refunded (a partial one leaves it as it was),
// so the notice can name that amount.
export const orderSendRefundNotice = orderEmailKind('order.send_refund_notice', 'refund_notice', order => ({
  subject: `Order ${order.id} refunded`,
  body: `We refunded the full amount of order ${order.id}, ${formatAmount(order.amount, order.currency)}. It can take a few days to reach your account.`,
}))
