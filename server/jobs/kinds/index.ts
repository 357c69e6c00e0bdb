import type { PaymentProvider } from '../../payments/types'
import type { JobKind } from '../kind'
import { orderIssueInvoice, orderSendConfirmation } from './order-effects'
import { paymentCreateIntent } from './payment-create-intent'

/** Every job kind the worker runs. */
export function createJobKinds(deps: { payments: PaymentProvider }): JobKind[] {
  return [paymentCreateIntent(deps.payments), orderSendConfirmation, orderIssueInvoice]
}
