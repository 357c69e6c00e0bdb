import type { PaymentProvider } from '../payments/types'
import type { JobKind } from '../jobs/kind'
import type { Mailer } from '../mail/mailer'
import { mockpayDeliver } from '../payments/mockpay/deliver'
import { orderIssueInvoice, orderSendConfirmation, refundSendNotice } from '../orders/jobs/order-effects'
import { paymentCancel } from '../payments/jobs/cancel'
import { paymentCreateIntent } from '../payments/jobs/create-intent'
import { paymentRefund } from '../refunds/jobs/payment-refund'
import { webhookApply } from '../webhooks/jobs/apply'
import { webhookDeliver, type WebhookDeliverySettings } from '../webhook-endpoints/jobs/deliver'

export interface JobKindDependencies {
  /** Where payment.create_intent asks for payments, and what confirms a Midtrans notification. */
  payments: PaymentProvider
  /** Where and with which secret the simulated provider signs and sends its webhooks; absent while mockpay is off. */
  mockpay?: { url: string, secret: string }
  /** How the shop's webhook endpoints are sent their events; absent, the worker does not deliver them. */
  webhookDelivery?: WebhookDeliverySettings
  /** Where the customer emails go (SMTP_URL); absent, they stay in the dev mailbox. */
  mailer?: Mailer
}

/** Every job kind the worker runs. */
export function createJobKinds(deps: JobKindDependencies): JobKind[] {
  return [
    paymentCreateIntent(deps.payments),
    orderSendConfirmation(deps.mailer),
    orderIssueInvoice(deps.mailer),
    refundSendNotice(deps.mailer),
    paymentRefund(deps.payments),
    paymentCancel(deps.payments),
    webhookApply(deps.payments),
    ...(deps.mockpay ? [mockpayDeliver(deps.mockpay)] : []),
    ...(deps.webhookDelivery ? [webhookDeliver(deps.webhookDelivery)] : []),
  ]
}
