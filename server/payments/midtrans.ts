import midtrans from 'midtrans-client'
import type { AppConfig } from '../config'
import type { PaymentNextAction } from '../db/schema'
import { log } from '../observability/logger'
import { type CreatedPayment, type PaymentEventType, type PaymentProvider, PaymentRefused, type PaymentRequest, type PaymentState, type ProviderRefund, ProviderUnavailable, REFUSED_DETAILS_MESSAGE, retryAfterMs } from './types'

/**
 * Midtrans through its official client, Core API. The order id is Midtrans' order_id, which it
 * accepts once: a re-run after a crash or a lost response is refused with 406, and reads the
 * transaction the first run created back with the status API instead. Core API rather than Snap
 * because a charge can be read back (virtual account, e-wallet actions); a Snap token whose answer
 * was lost cannot.
 *
 * The status API is also the truth behind notifications: Midtrans signs only order_id, status_code
 * and gross_amount, so webhook.apply confirms a notification's state with readPayment first.
 */

export type MidtransConfig = Pick<AppConfig, 'MIDTRANS_SERVER_KEY' | 'MIDTRANS_API_BASE' | 'MIDTRANS_IS_PRODUCTION' | 'PAYMENT_PROVIDER_TIMEOUT_MS'>
type Answer = Record<string, unknown>

const MIDTRANS_CURRENCY = 'IDR'
/** transaction_status values that end a payment unpaid. */
const failedStatuses = new Set(['deny', 'cancel', 'expire', 'failure'])
/** The bank whose virtual account a bank transfer gets. */
const VA_BANK = 'bca'

/** The Core API client both the payment adapter and the ledger check's reader call, built from config. */
export function midtransCoreApi(config: MidtransConfig) {
  if (!config.MIDTRANS_SERVER_KEY) throw new Error('MIDTRANS_SERVER_KEY is unset although PAYMENT_PROVIDER=midtrans')
  const core = new midtrans.CoreApi({ isProduction: config.MIDTRANS_IS_PRODUCTION, serverKey: config.MIDTRANS_SERVER_KEY })
  // The client has no base-URL option: a stand-in (tests) or a proxy is set here.
  if (config.MIDTRANS_API_BASE) {
    const base = config.MIDTRANS_API_BASE.replace(/\/+$/, '')
    core.apiConfig.getCoreApiBaseUrl = () => base
  }
  core.httpClient.http_client.defaults.timeout = config.PAYMENT_PROVIDER_TIMEOUT_MS
  return core
}

export function createMidtransProvider(config: MidtransConfig): PaymentProvider {
  const core = midtransCoreApi(config)
  const linkAllowed = providerLinkFilter(config.MIDTRANS_API_BASE)

  const readStatus = async (orderId: string): Promise<Answer | undefined> => {
    try {
      return await core.transaction.status(orderId)
    }
    catch (error) {
      if (statusOf(error) === 404) return undefined
      throw classifyMidtransError(error)
    }
  }

  return {
    name: 'midtrans',
    async createPayment(request, signal) {
      signal.throwIfAborted()
      const charge = chargeOf(request)
      let answer: Answer
      try {
        answer = await core.charge(charge)
      }
      catch (error) {
        if (statusOf(error) !== 406) throw classifyMidtransError(error)
        // order_id already used: by an earlier run of this job, whose answer never reached its commit.
        const existing = await readStatus(request.orderId)
        if (!existing) throw new ProviderUnavailable(`Midtrans refused order_id ${request.orderId} as used, but its status API does not know it yet`)
        answer = existing
      }
      return createdOf(request.orderId, answer, linkAllowed)
    },
    async readPayment({ orderId }, signal) {
      signal.throwIfAborted()
      const answer = await readStatus(orderId)
      return answer && stateOf(orderId, answer)
    },
    async refundPayment(request, signal) {
      signal.throwIfAborted()
      const status = await readStatus(request.orderId)
      if (!status) throw new ProviderUnavailable(`Midtrans' status API does not know order_id ${request.orderId}`)
      // Midtrans keeps one refund per refund_key: a refund an earlier run made is read back, never asked twice.
      const made = refundsOf(status).find(refund => refund.refund_key === request.refundId)
      if (made) return refundOf(request.refundId, made)
      const parameter = { refund_key: request.refundId, amount: request.amount, reason: request.reason ?? 'refund' }
      let answer: Answer
      try {
        answer = directRefundTypes.has(String(status.payment_type))
          ? await core.transaction.refundDirect(request.orderId, parameter)
          : await core.transaction.refund(request.orderId, parameter)
      }
      catch (error) {
        if (!refundKeyTaken(error)) throw classifyMidtransError(error)
        // The refund_key is taken: by an earlier run whose answer was lost, or by one Midtrans is
        // still carrying out (it forwards a refund to the bank or e-wallet and lists it in the status
        // API once done). Read it back; not listed yet, it is neither made nor refused for us to
        // know: asked again later, as createPayment does for a used order_id, never failed (which
        // would free its amount for a second refund while Midtrans makes the first).
        const again = await readStatus(request.orderId)
        const made = again && refundsOf(again).find(refund => refund.refund_key === request.refundId)
        if (made) return refundOf(request.refundId, made)
        throw new ProviderUnavailable(`Midtrans refused refund_key ${request.refundId} as used, but its status API does not list the refund yet`, undefined, { cause: error })
      }
      // Answered with HTTP 200 and status_code 202: the bank denied the refund and nothing was refunded.
      if (String(answer.status_code) === '202') {
        throw new PaymentRefused({ code: '202', message: REFUSED_DETAILS_MESSAGE, providerMessage: String(answer.status_message ?? 'refund denied') })
      }
      return refundOf(request.refundId, answer)
    },
    async readRefund({ orderId, refundId }, signal) {
      signal.throwIfAborted()
      const status = await readStatus(orderId)
      const made = status && refundsOf(status).find(refund => refund.refund_key === refundId)
      return made ? refundOf(refundId, made) : undefined
    },
    async cancelPayment({ orderId }, signal) {
      signal.throwIfAborted()
      try {
        await core.transaction.cancel(orderId)
        return 'canceled'
      }
      catch (error) {
        const classified = classifyMidtransError(error)
        if (!(classified instanceof PaymentRefused)) throw classified
        // Not cancelable: settled first (the shopper paid), or already ended.
        const status = await readStatus(orderId)
        if (!status || failedStatuses.has(String(status.transaction_status))) return 'canceled'
        if (stateOf(orderId, status).type === 'payment.succeeded' || refundsOf(status).length) return 'succeeded'
        throw classified
      }
    },
  }
}

/**
 * E-wallets and QRIS are refunded at once through `/refund/online/direct`; other methods through
 * `/refund`. A bank transfer (virtual account) cannot be refunded through the API: Midtrans refuses,
 * and the refund fails with its words.
 */
const directRefundTypes = new Set(['gopay', 'qris', 'shopeepay'])

/** Midtrans' answer for a refund_key it already holds: 406 ("Duplicate refund ID"), or a refusal that says the key is used. */
function refundKeyTaken(error: unknown): boolean {
  if (statusOf(error) === 406) return true
  const words = error instanceof midtrans.MidtransError ? String(error.ApiResponse?.status_message ?? '') : ''
  return /refund[ _]?(key|id)\b/i.test(words) && /\b(already|duplicate|used)\b/i.test(words)
}

type MidtransRefund = { refund_key?: string, refund_chargeback_id?: string | number, refund_amount?: string | number, status_code?: string }

const refundsOf = (answer: Answer): MidtransRefund[] => Array.isArray(answer.refunds) ? answer.refunds as MidtransRefund[] : []

/** An accepted refund request (status_code 200) is done at Midtrans: it reports refund or partial_refund. */
function refundOf(refundId: string, answer: Answer | MidtransRefund): ProviderRefund {
  const id = answer.refund_chargeback_id !== undefined ? String(answer.refund_chargeback_id) : refundId
  return { id, status: 'succeeded', answer: answer as Answer }
}

function chargeOf(request: PaymentRequest): Record<string, unknown> {
  if (request.currency !== MIDTRANS_CURRENCY) {
    throw new PaymentRefused({ code: 'currency_unsupported', message: REFUSED_DETAILS_MESSAGE, providerMessage: `Midtrans charges in ${MIDTRANS_CURRENCY} only; the order is in ${request.currency}` })
  }
  const method = request.paymentMethod === 'bank_transfer'
    ? { payment_type: 'bank_transfer', bank_transfer: { bank: VA_BANK } }
    : request.paymentMethod === 'ewallet'
      ? { payment_type: 'gopay' }
      : undefined
  if (!method) {
    throw new PaymentRefused({
      code: 'payment_method_unsupported',
      message: 'Card payments are not available for this shop yet. Nothing was charged; please place the order again with bank transfer or e-wallet.',
      providerMessage: `payment method "${request.paymentMethod}" needs the card tokenised in the browser (Midtrans 3DS), which this checkout does not do`,
    })
  }
  return {
    ...method,
    // Midtrans amounts are whole rupiah, the orders' minor unit for IDR.
    transaction_details: { order_id: request.orderId, gross_amount: request.amount },
    customer_details: { email: request.customerEmail },
  }
}

function createdOf(orderId: string, answer: Answer, linkAllowed: LinkFilter): CreatedPayment {
  const status = String(answer.transaction_status ?? '')
  if (failedStatuses.has(status)) {
    const words = String(answer.channel_response_message ?? answer.status_message ?? status)
    throw new PaymentRefused({ code: status, message: 'The payment was declined. Nothing was charged; please place the order again with another payment method.', providerMessage: words })
  }
  return { id: orderId, nextAction: nextActionOf(orderId, answer, linkAllowed) }
}

/** Midtrans' own hosts (sandbox and production API, simulator, Snap), and the legacy Veritrans ones. */
const MIDTRANS_HOST = /(^|\.)(midtrans\.com|veritrans\.co\.id)$/
/** The e-wallet apps a `deeplink-redirect` action opens (GoPay, ShopeePay): app links, not web pages. */
const WALLET_APP_SCHEMES = new Set(['gojek:', 'gopay:', 'shopeeid:'])
/** Whether a charge answer's action link (by its url and the action's name) may reach the shopper. */
type LinkFilter = (url: string, actionName?: string) => boolean

/**
 * Which links of a charge's answer the checkout page may offer the shopper (it renders them as
 * href): https on Midtrans' hosts, a wallet app's deeplink, or the configured API base's own origin
 * (a stand-in or proxy; the configuration allows plain http there only on loopback). Anything else
 * (javascript:, another host) is not Midtrans' to send.
 */
export function providerLinkFilter(apiBase: string | undefined): LinkFilter {
  const baseOrigin = apiBase ? new URL(apiBase).origin : undefined
  return (url, actionName) => {
    let link: URL
    try {
      link = new URL(url)
    }
    catch {
      return false
    }
    if (link.protocol === 'https:' && MIDTRANS_HOST.test(link.hostname)) return true
    if (actionName === 'deeplink-redirect' && WALLET_APP_SCHEMES.has(link.protocol)) return true
    return link.origin === baseOrigin
  }
}

function nextActionOf(orderId: string, answer: Answer, linkAllowed: LinkFilter): PaymentNextAction {
  const expiresAt = typeof answer.expiry_time === 'string' ? answer.expiry_time : undefined
  const va = Array.isArray(answer.va_numbers) ? answer.va_numbers[0] as { bank?: string, va_number?: string } | undefined : undefined
  if (va?.va_number) return { type: 'midtrans_bank_transfer', bank: va.bank ?? VA_BANK, vaNumber: va.va_number, expiresAt }
  if (typeof answer.permata_va_number === 'string') return { type: 'midtrans_bank_transfer', bank: 'permata', vaNumber: answer.permata_va_number, expiresAt }
  const actions = Array.isArray(answer.actions) ? answer.actions as Array<{ name: string, method: string, url: string }> : []
  const allowed = actions.filter(({ name, url }) => {
    if (typeof url === 'string' && linkAllowed(url, name)) return true
    log.warn('midtrans action link dropped: not https on a Midtrans host', { orderId, action: String(name), url: String(url).slice(0, 200) })
    return false
  })
  return { type: 'midtrans_actions', actions: allowed.map(({ name, method, url }) => ({ name, method, url })), expiresAt }
}

/** Midtrans' transaction_status (with fraud_status for a card capture) as a normalised event. */
function stateOf(orderId: string, answer: Answer): PaymentState {
  const status = String(answer.transaction_status ?? '')
  const gross = Math.round(Number(answer.gross_amount))
  const refunded = Math.round(Number(answer.refund_amount ?? answer.gross_amount))
  const type: PaymentEventType = status === 'settlement' || (status === 'capture' && answer.fraud_status === 'accept')
    ? 'payment.succeeded'
    : failedStatuses.has(status)
      ? 'payment.failed'
      : status === 'refund' || status === 'partial_refund'
        ? 'payment.refunded'
        : 'payment.updated'
  const refundedAmount = answer.refund_amount === undefined ? undefined : Math.round(Number(answer.refund_amount))
  return {
    paymentId: orderId, providerStatus: status, type, amount: type === 'payment.refunded' ? refunded : gross, currency: MIDTRANS_CURRENCY, refundedAmount,
    ...(type === 'payment.refunded' && { capturedAmount: gross }),
    answer,
  }
}

function statusOf(error: unknown): number | undefined {
  if (!(error instanceof midtrans.MidtransError) || error.httpStatusCode === null) return undefined
  return Number(error.httpStatusCode)
}

/** Connection failures, 401/403 (a key being fixed), 409, 429 and 5xx are retried; other refusals are final. */
export function classifyMidtransError(error: unknown): Error {
  if (!(error instanceof midtrans.MidtransError)) return error instanceof Error ? error : new Error(String(error))
  const status = statusOf(error)
  const raw = error.rawHttpClientData
  const wait = retryAfterMs(raw?.response?.headers?.['retry-after'] ?? raw?.headers?.['retry-after'])
  const words = String(error.ApiResponse?.status_message ?? error.message)
  if (status === undefined || Number.isNaN(status) || [401, 403, 409, 429].includes(status) || status >= 500) {
    return new ProviderUnavailable(`Midtrans${status ? ` ${status}` : ' unreachable'}: ${words}`, wait, { cause: error })
  }
  const details = Array.isArray(error.ApiResponse?.validation_messages) ? `${words} ${(error.ApiResponse.validation_messages as string[]).join('; ')}` : words
  return new PaymentRefused({ code: String(status), message: REFUSED_DETAILS_MESSAGE, providerMessage: details })
}
