import { invoices, mailbox } from '../../db/schema'
import { newId } from '../../db/ids'
import { claimSideEffect } from '../../orders/effects'
import { defineJobKind } from '../kind'
import { loadOrder, OrderJobPayload, orderResource } from './order-payload'

const formatAmount = (amount: number, currency: string) => `${currency} ${amount.toLocaleString('en-US')}`

/** The order confirmation email, into the dev mailbox: once per order, however often the job runs. */
export const orderSendConfirmation = defineJobKind({
  kind: 'order.send_confirmation',
  payload: OrderJobPayload,
  resource: orderResource,
  async run({ db, job, commit }, { orderId }) {
    const order = await loadOrder(db, orderId)
    await commit(async (tx) => {
      if (!await claimSideEffect(tx, orderId, 'confirmation_email', job.id)) return
      await tx.insert(mailbox).values({
        id: newId('msg'),
        tenantId: order.tenantId,
        orderId,
        to: order.customer.email,
        subject: `Order ${orderId} confirmed`,
        body: `Thank you. We received ${formatAmount(order.amount, order.currency)} for order ${orderId} (cart ${order.cartId}).`,
      })
    })
  },
})

/** The invoice: once per order, guarded by the same kind of marker. */
export const orderIssueInvoice = defineJobKind({
  kind: 'order.issue_invoice',
  payload: OrderJobPayload,
  resource: orderResource,
  async run({ db, job, commit }, { orderId }) {
    const order = await loadOrder(db, orderId)
    await commit(async (tx) => {
      if (!await claimSideEffect(tx, orderId, 'invoice', job.id)) return
      await tx.insert(invoices).values({ id: newId('inv'), tenantId: order.tenantId, orderId, amount: order.amount, currency: order.currency })
    })
  },
})
