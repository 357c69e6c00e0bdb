import { createHash, randomInt, randomUUID } from 'node:crypto'
import type http from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import {
  type Answer, canonicalJson, CONTROL_PREFIX, control, controlAnswer, controlParameters, drop, type FaultTarget, header, holdAnswer, jsonAnswer, type ProviderCall,
  type ProviderFault, readBody, type ScriptedFault, serve, StandInRefusal, takeFault, type WebhookDelivery, webhookSender, writeAnswer,
} from './common'

/**
 * A local stand-in for the part of Midtrans' Core API (v2) the app uses: charge (bank transfer
 * virtual accounts, GoPay), the status API, refund (and direct refund) and cancel, with the answers
 * Midtrans documents, its one-use order_id (406 on reuse), its refund_key and its notification
 * signature. A create or a refund can also be scripted to be denied by the bank, and refunds can be
 * held in flight (asked, not finished yet); a control surface under /_stand-in moves transactions as
 * the shopper, the dashboard and the card issuer would, and with a webhook URL each change is also
 * sent as a signed HTTP notification.
 */

export type MidtransFault = ProviderFault
  /**
   * A charge is made but the bank denies it: answered 200 with status_code 202, stored as deny. A
   * refund is denied by the bank: 200 with status_code 202, nothing refunded, its refund_key free again.
   */
  | { kind: 'deny' }

export type MidtransTransactionStatus = 'pending' | 'settlement' | 'capture' | 'deny' | 'cancel' | 'expire' | 'refund' | 'partial_refund' | 'chargeback' | 'partial_chargeback'

/** Charge makes bank_transfer and gopay; a test may set the others on a transaction to try the refund rules. */
export type MidtransPaymentType = 'bank_transfer' | 'gopay' | 'qris' | 'shopeepay' | 'credit_card' | 'dana' | 'ovo' | 'kredivo' | 'akulaku'

export interface MidtransRefund {
  refund_chargeback_id: number
  refund_chargeback_uuid: string
  refund_amount: string
  created_at: string
  reason: string
  refund_key: string
  /** online: through the refund API; offline: recorded in the dashboard. */
  refund_method: 'online' | 'offline'
  bank_confirmed_at: string
}

/**
 * A chargeback the card issuer made (Midtrans' Transaction Status reference, docs.midtrans.com:
 * chargeback and partial_chargeback are "applicable for payment card only", reached from
 * settlement; the status cycle lists partial_chargeback → chargeback). Midtrans documents no body
 * field for the amount, so the stand-in keeps it here and sends only the status.
 */
export interface MidtransChargeback {
  amount: number
  created_at: string
}

/** A refund Midtrans has taken under its refund_key but not finished: not in the status API yet, its amount held. */
export interface MidtransRefundInFlight {
  orderId: string
  refundKey: string
  amount: number
  endpoint: 'refund' | 'direct'
}

export interface MidtransTransaction {
  order_id: string
  transaction_id: string
  payment_type: MidtransPaymentType
  /** Whole rupiah; answers carry it as '150000.00'. */
  gross_amount: number
  transaction_status: MidtransTransactionStatus
  fraud_status: 'accept'
  transaction_time: string
  expiry_time: string
  settlement_time?: string
  bank?: string
  va_number?: string
  actions?: Array<{ name: string, method: string, url: string }>
  channel_response_code?: string
  channel_response_message?: string
  refunds: MidtransRefund[]
  chargebacks: MidtransChargeback[]
  /** The charge request as received. */
  request: Record<string, unknown>
}

export type MidtransAnswer = Record<string, unknown>

/** A refund the stand-in made, and where it was asked for. */
export interface MidtransRefundRecord {
  orderId: string
  refund: MidtransRefund
  /** refund: POST /v2/:id/refund; direct: POST /v2/:id/refund/online/direct; dashboard: `refund()` or the control surface. */
  endpoint: 'refund' | 'direct' | 'dashboard'
}

export interface MidtransApi {
  /** http://127.0.0.1:PORT, what the client's getCoreApiBaseUrl should return. */
  url: string
  port: number
  calls: ProviderCall[]
  /** Faults applied FIFO: each request takes the first one whose `match` fits it (create: POST /v2/charge; refund: either refund endpoint; cancel; read: GET); a sticky one stays. */
  script: ScriptedFault<MidtransFault>[]
  /** By order_id. */
  transactions: Map<string, MidtransTransaction>
  /**
   * A refund_key asked again: `replay` (the default) answers what its first request was answered,
   * and refunds nothing more; `duplicate` answers 406 "Duplicate refund ID", the other answer
   * Midtrans documents for it. Either way a key that refunded never refunds again. A key whose
   * refund is still in flight (`holdRefunds`) is answered 406 whatever this says: there is no
   * answer to repeat yet.
   */
  refundKeyReuse: 'replay' | 'duplicate'
  /**
   * The next `count` refund requests Midtrans takes (default: every one until `reset`) stay in
   * flight, as a refund does while Midtrans forwards it to the bank or e-wallet ("Refund
   * Transaction": the request is forwarded to the payment provider; "Direct Refund Transaction":
   * the standard process "may take one to two days", the status is updated once the provider
   * answers). Meanwhile the refund is not in the status API's `refunds` nor its `refund_amount`,
   * its amount is held against what is left, another request under its refund_key is answered 406,
   * and the request's answer is held: a caller that times out first never hears it.
   * `finishRefund` or `failRefund` ends it.
   */
  holdRefunds(count?: number): void
  /** Refunds held in flight, oldest first. */
  refundsInFlight(): MidtransRefundInFlight[]
  /**
   * The refund in flight under `refundKey` is made: it joins the transaction's `refunds` (refund or
   * partial_refund), its notification is sent, and its held request is answered 200 if its caller
   * still waits. The refund made.
   */
  finishRefund(refundKey: string): MidtransRefund
  /**
   * The refund in flight under `refundKey` is refused by the bank: nothing is refunded, its amount
   * and its refund_key are free again, no notification is sent ("Direct Refund Transaction": a
   * notification is sent only if the refund is successful), and its held request is answered as a
   * bank denial (200 with status_code 202).
   */
  failRefund(refundKey: string): void
  /** The shopper paid: pending → settlement. */
  settle(orderId: string): MidtransTransaction
  /** pending → expire. */
  expire(orderId: string): MidtransTransaction
  /** pending → deny. */
  deny(orderId: string): MidtransTransaction
  /** pending → cancel. */
  cancel(orderId: string): MidtransTransaction
  /**
   * A refund recorded in the dashboard (refund_method offline, any payment type): `amount` (default
   * what is left) of a settled transaction; all of it → refund, less → partial_refund.
   */
  refund(orderId: string, amount?: number): MidtransTransaction
  /**
   * The card issuer charges a settled card payment back (payment_type credit_card only): `amount`
   * (default all of it) → chargeback, less → partial_chargeback, whose rest may follow as chargeback.
   * The notification is sent; the transaction takes no refund any more (412).
   */
  chargeback(orderId: string, amount?: number): MidtransTransaction
  /** Every refund made, oldest first, with the endpoint it was asked at. */
  createdRefunds(): MidtransRefundRecord[]
  /** How many refund requests (either endpoint) carried each refund_key, replays, faults and refusals included. */
  refundKeyUses(): Map<string, number>
  /** Σ refunded of the transaction: never more than its gross_amount. */
  refundedTotal(orderId: string): number
  /** What the status API answers for the order now. */
  status(orderId: string): MidtransAnswer
  /**
   * The HTTP notification Midtrans would POST for the current state, with signature_key computed over
   * the final order_id, status_code and gross_amount (after `overrides`, unless they set signature_key).
   */
  notification(orderId: string, overrides?: Record<string, unknown>): MidtransAnswer
  /** Each notification sent to the webhook URL (none without one). */
  webhooks: WebhookDelivery[]
  /** Resolves once every notification sent so far is delivered or has run out of attempts. */
  webhooksIdle(): Promise<void>
  /** Forgets transactions, refund keys, refunds in flight (their held requests are never answered), calls, notifications and the script; refunds are no longer held. */
  reset(): void
  close(): Promise<void>
}

export interface MidtransApiOptions {
  /** The server key the API accepts (Basic, as the username) and signs notifications with. */
  serverKey: string
  /** 0 (the default): one the system picks. */
  port?: number
  /** Sends each transaction's notification here on every change (charge, settle, expire, deny, cancel, refund). */
  webhookUrl?: string
}

/** SHA-512 hex of order_id + status_code + gross_amount + server key: Midtrans' signature_key. */
export function midtransSignatureKey(serverKey: string, orderId: string, statusCode: string, grossAmount: string): string {
  return createHash('sha512').update(`${orderId}${statusCode}${grossAmount}${serverKey}`).digest('hex')
}

const MERCHANT_ID = 'G000000000'
/** Amounts from here on are refused: a permanent validation error a test can ask for. */
const REFUSED_GROSS_AMOUNT = 99_000_000_000
const MAX_ORDER_ID_LENGTH = 50
/** The digits of each bank's virtual account number. */
const VA_DIGITS: Partial<Record<string, number>> = { bca: 11, bni: 16, bri: 15, cimb: 16, permata: 18 }
const BANK_TRANSFER_EXPIRY_MS = 24 * 3600_000
const GOPAY_EXPIRY_MS = 15 * 60_000

/** The payment methods each refund endpoint takes (Midtrans' Refund and Direct Refund references); a bank transfer is refunded by neither. */
const REFUNDABLE: Record<'refund' | 'direct', ReadonlySet<MidtransPaymentType>> = {
  refund: new Set(['credit_card', 'gopay', 'shopeepay', 'dana', 'ovo', 'qris', 'kredivo', 'akulaku']),
  direct: new Set(['gopay', 'qris', 'shopeepay', 'credit_card', 'akulaku', 'kredivo']),
}
/** Refunded whole or not at all. */
const NO_PARTIAL_REFUND = new Set<MidtransPaymentType>(['shopeepay', 'ovo'])
/** Refunds are of settled money; before settlement Midtrans says to cancel instead. */
const REFUNDABLE_STATUSES = new Set<MidtransTransactionStatus>(['settlement', 'partial_refund'])
const CANCELABLE_STATUSES = new Set<MidtransTransactionStatus>(['pending', 'capture'])
const REFUND_KEY = /^[\w-]{1,64}$/
const MIDTRANS_USER_AGENT = 'Veritrans'

const UNAUTHORIZED_MESSAGE = 'Access denied due to unauthorized transaction, please check client or server key'
const NOT_FOUND_MESSAGE = 'The requested resource is not found'
const UNKNOWN_TRANSACTION = 'Transaction doesn\'t exist.'
const CANNOT_MODIFY = 'Merchant cannot modify the status of the transaction'
const INVALID_REFUND_AMOUNT = 'Refund request is rejected due to invalid amount'
const DUPLICATE_REFUND_KEY = 'Duplicate refund ID'
const STATUS_MESSAGES: Partial<Record<number, string>> = {
  401: UNAUTHORIZED_MESSAGE,
  404: NOT_FOUND_MESSAGE,
  429: 'Too many requests, please slow down and retry later',
  500: 'Sorry. Our system is recovering from unexpected issues. Please retry.',
  502: 'Sorry. Our system is recovering from unexpected issues. Please retry.',
  503: 'Sorry, Midtrans is under maintenance. Please retry later.',
  504: 'Sorry, the request to the payment provider timed out. Please retry.',
}

type Route = { kind: 'charge' } | { kind: 'status', id: string } | { kind: 'cancel', id: string } | { kind: 'refund', id: string, endpoint: 'refund' | 'direct' }

export async function startMidtransApi({ serverKey, port = 0, webhookUrl }: MidtransApiOptions): Promise<MidtransApi> {
  const calls: ProviderCall[] = []
  const script: ScriptedFault<MidtransFault>[] = []
  const transactions = new Map<string, MidtransTransaction>()
  const refundLog: Array<{ orderId: string, refund: MidtransRefund, endpoint: MidtransRefundRecord['endpoint'] }> = []
  /** By refund_key: the request that refunded under it, and its answer. */
  const refundKeys = new Map<string, { fingerprint: string, answer: Answer }>()
  /** By refund_key: refunds taken but not finished, each with the way to answer its held request. */
  const inFlight = new Map<string, MidtransRefundInFlight & { reason: string, fingerprint: string, answer: (answer: Answer) => void }>()
  let refundsToHold = 0
  let nextRefundChargebackId = 1
  let sender = webhookUrl === undefined ? undefined : webhookSender(webhookUrl)
  let url = ''

  async function handle(req: http.IncomingMessage, res: http.ServerResponse) {
    const raw = await readBody(req)
    const requestUrl = new URL(req.url ?? '/', 'http://stand-in')
    const method = req.method ?? 'GET'
    if (requestUrl.pathname === CONTROL_PREFIX || requestUrl.pathname.startsWith(`${CONTROL_PREFIX}/`)) {
      return writeAnswer(res, controlRoute(method, requestUrl.pathname, controlParameters(requestUrl, raw)))
    }
    const parsed = parseJson(raw)
    const call: ProviderCall = {
      method,
      path: requestUrl.pathname,
      query: Object.fromEntries(requestUrl.searchParams),
      body: isObject(parsed) ? parsed : {},
      authorization: header(req, 'authorization'),
      headers: req.headers,
      at: Date.now(),
    }
    calls.push(call)
    const route = routeOf(method, requestUrl.pathname)
    const fault = takeFault(script, faultTargetOf(method, route))
    const send = async (answer: Answer) => {
      if (fault?.kind === 'drop-after') return drop(req, call)
      if (fault?.kind === 'hold-answer' && !await holdAnswer(req, call, fault.ms)) return
      // An answer held while its refund was in flight: the caller may have given up meanwhile.
      if (req.socket.destroyed) {
        call.answered = 'dropped'
        return
      }
      call.answered = answer.status
      writeAnswer(res, answer)
    }

    if (fault?.kind === 'drop-before') return drop(req, call)
    if (fault?.kind === 'status') {
      const answer = fault.error
        ? midtransJson(fault.status, { status_code: String(fault.status), ...fault.error })
        : midtransError(fault.status, STATUS_MESSAGES[fault.status] ?? `Scripted HTTP ${fault.status}`)
      if (fault.retryAfter !== undefined) answer.headers['retry-after'] = fault.retryAfter
      Object.assign(answer.headers, fault.headers)
      return send(answer)
    }
    if (!authorized(header(req, 'authorization'), serverKey)) return send(midtransError(401, UNAUTHORIZED_MESSAGE))
    if (fault?.kind === 'delay') await sleep(fault.ms)
    if (!route) return send(midtransError(404, NOT_FOUND_MESSAGE))
    if (parsed === undefined) return send(validationError(['Request body is not valid JSON']))
    if (route.kind === 'charge') return send(charge(call.body, fault?.kind === 'deny'))
    const transaction = find(route.id)
    if (!transaction) return send(midtransError(404, UNKNOWN_TRANSACTION))
    if (route.kind === 'status') return send(midtransJson(200, statusOf(transaction)))
    if (route.kind === 'cancel') return send(cancelRequest(transaction))
    return send(await refundRequest(transaction, call.body, route.endpoint, fault?.kind === 'deny'))
  }

  function charge(body: Record<string, unknown>, denied: boolean): Answer {
    const details = isObject(body.transaction_details) ? body.transaction_details : undefined
    const problems: string[] = []
    const paymentType = body.payment_type
    if (paymentType === undefined) problems.push('payment_type is required')
    else if (paymentType !== 'bank_transfer' && paymentType !== 'gopay') problems.push(`payment_type ${String(paymentType)} is not supported`)
    if (!details) problems.push('transaction_details is required')
    const orderId = details?.order_id
    if (details && (orderId === undefined || orderId === '')) problems.push('transaction_details.order_id is required')
    else if (details && typeof orderId !== 'string') problems.push('transaction_details.order_id must be a string')
    else if (typeof orderId === 'string' && orderId.length > MAX_ORDER_ID_LENGTH) problems.push(`transaction_details.order_id must be at most ${MAX_ORDER_ID_LENGTH} characters`)
    else if (typeof orderId === 'string' && !/^[\w.~-]+$/.test(orderId)) problems.push('transaction_details.order_id may contain only letters, digits, -, _, ~ and .')
    const grossText = details?.gross_amount
    const gross = typeof grossText === 'number' ? grossText : typeof grossText === 'string' && grossText.trim() !== '' ? Number(grossText) : Number.NaN
    if (details && (grossText === undefined || grossText === null || grossText === '')) problems.push('transaction_details.gross_amount is required')
    else if (details && !Number.isInteger(gross)) problems.push('transaction_details.gross_amount must be an integer (IDR has no decimals)')
    else if (details && gross < 1) problems.push('transaction_details.gross_amount must be greater than or equal to 1')
    else if (details && gross >= REFUSED_GROSS_AMOUNT) problems.push(`transaction_details.gross_amount must be less than ${REFUSED_GROSS_AMOUNT}`)
    let bank: string | undefined
    let vaDigits = 0
    if (paymentType === 'bank_transfer') {
      const transfer = isObject(body.bank_transfer) ? body.bank_transfer : undefined
      bank = typeof transfer?.bank === 'string' ? transfer.bank : undefined
      if (!bank) problems.push('bank_transfer.bank is required')
      else if (!VA_DIGITS[bank]) problems.push(`bank_transfer.bank must be one of ${Object.keys(VA_DIGITS).join(', ')}`)
      else vaDigits = VA_DIGITS[bank] ?? 0
    }
    const customer = isObject(body.customer_details) ? body.customer_details : undefined
    if (customer?.email !== undefined && !(typeof customer.email === 'string' && /^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(customer.email))) {
      problems.push('customer_details.email format is invalid')
    }
    if (Array.isArray(body.item_details) && Number.isInteger(gross)) {
      const sum = body.item_details.reduce((total: number, item: unknown) => total + (isObject(item) ? Number(item.price) * Number(item.quantity ?? 1) : 0), 0)
      if (sum !== gross) problems.push('transaction_details.gross_amount is not equal to the sum of item_details')
    }
    if (problems.length > 0) return validationError(problems)
    // A used order_id stays used, whatever became of its transaction.
    if (transactions.has(orderId as string)) {
      return midtransError(406, 'The request could not be completed due to a conflict with the current state of the target resource, order_id has already been utilized')
    }

    const created = Date.now()
    const transactionId = randomUUID()
    const transaction: MidtransTransaction = {
      order_id: orderId as string,
      transaction_id: transactionId,
      payment_type: paymentType as MidtransPaymentType,
      gross_amount: gross,
      transaction_status: denied ? 'deny' : 'pending',
      fraud_status: 'accept',
      transaction_time: jakartaTime(created),
      expiry_time: jakartaTime(created + (paymentType === 'gopay' ? GOPAY_EXPIRY_MS : BANK_TRANSFER_EXPIRY_MS)),
      refunds: [],
      chargebacks: [],
      request: body,
      ...(bank && { bank, va_number: digits(vaDigits) }),
      ...(paymentType === 'gopay' && { actions: gopayActions(transactionId, gross) }),
      ...(denied && { channel_response_code: '05', channel_response_message: 'Do not honour' }),
    }
    transactions.set(transaction.order_id, transaction)
    notify(transaction)
    const issuer = (bank ?? transaction.payment_type).toUpperCase()
    const method = transaction.payment_type === 'gopay' ? 'GoPay' : 'Bank Transfer'
    return midtransJson(200, {
      status_code: statusCodeOf(transaction.transaction_status),
      status_message: denied ? `Deny by Bank [${issuer}] with code [05] and message [Do not honour]` : `Success, ${method} transaction is created`,
      ...transactionFields(transaction),
    })
  }

  function gopayActions(transactionId: string, gross: number) {
    return [
      { name: 'generate-qr-code', method: 'GET', url: `${url}/v2/gopay/${transactionId}/qr-code` },
      { name: 'deeplink-redirect', method: 'GET', url: `gojek://gopay/merchanttransfer?tref=${transactionId}&amount=${gross}&activity=GP:RR&callback_url=` },
      { name: 'get-status', method: 'GET', url: `${url}/v2/${transactionId}/status` },
      { name: 'cancel', method: 'POST', url: `${url}/v2/${transactionId}/cancel` },
    ]
  }

  /** The status, refund and cancel APIs take an order_id or a transaction_id. */
  const find = (id: string) => transactions.get(id) ?? [...transactions.values()].find(transaction => transaction.transaction_id === id)

  function statusOf(transaction: MidtransTransaction): MidtransAnswer {
    const statusCode = statusCodeOf(transaction.transaction_status)
    return {
      status_code: statusCode,
      status_message: 'Success, transaction is found',
      ...transactionFields(transaction),
      signature_key: midtransSignatureKey(serverKey, transaction.order_id, statusCode, grossText(transaction.gross_amount)),
    }
  }

  function cancelRequest(transaction: MidtransTransaction): Answer {
    if (!CANCELABLE_STATUSES.has(transaction.transaction_status)) return midtransError(412, CANNOT_MODIFY)
    transaction.transaction_status = 'cancel'
    notify(transaction)
    return midtransJson(200, { status_code: '200', status_message: 'Success, transaction is canceled', ...transactionFields(transaction) })
  }

  function refundRequest(transaction: MidtransTransaction, body: Record<string, unknown>, endpoint: 'refund' | 'direct', denied: boolean): Answer | Promise<Answer> {
    const key = body.refund_key
    if (key !== undefined && !(typeof key === 'string' && REFUND_KEY.test(key))) {
      return validationError(['refund_key may contain only letters, digits, - and _ (at most 64)'])
    }
    // A refund_key in flight has no answer to repeat yet ("Refund Transaction": the same refund_key
    // cannot be reused): 406, as for a used one.
    if (typeof key === 'string' && inFlight.has(key)) return midtransError(406, DUPLICATE_REFUND_KEY)
    // A different refund under a used key is never made; the same one is answered as it was.
    const fingerprint = canonicalJson({ order_id: transaction.order_id, amount: body.amount ?? null })
    const earlier = typeof key === 'string' ? refundKeys.get(key) : undefined
    if (earlier) return api.refundKeyReuse === 'replay' && earlier.fingerprint === fingerprint ? earlier.answer : midtransError(406, DUPLICATE_REFUND_KEY)
    if (!REFUNDABLE[endpoint].has(transaction.payment_type) || !REFUNDABLE_STATUSES.has(transaction.transaction_status)) return midtransError(412, CANNOT_MODIFY)
    const remaining = transaction.gross_amount - refundedOf(transaction) - inFlightOf(transaction)
    const amount = body.amount === undefined ? remaining : typeof body.amount === 'number' || typeof body.amount === 'string' ? Number(body.amount) : Number.NaN
    if (!Number.isInteger(amount) || amount < 1 || amount > remaining || (NO_PARTIAL_REFUND.has(transaction.payment_type) && amount !== transaction.gross_amount)) {
      return midtransError(414, INVALID_REFUND_AMOUNT)
    }
    const refundKey = typeof key === 'string' ? key : randomUUID()
    const reason = typeof body.reason === 'string' ? body.reason : ''
    if (denied) return deniedRefundAnswer(transaction, refundKey)
    if (refundsToHold > 0) {
      refundsToHold--
      return new Promise<Answer>((answer) => {
        inFlight.set(refundKey, { orderId: transaction.order_id, refundKey, amount, endpoint, reason, fingerprint, answer })
      })
    }
    return makeRefund(transaction, { refundKey, amount, endpoint, reason, fingerprint })
  }

  /** Records a refund Midtrans made through its API, and the answer its refund_key repeats. */
  function makeRefund(transaction: MidtransTransaction, made: { refundKey: string, amount: number, endpoint: 'refund' | 'direct', reason: string, fingerprint: string }): Answer {
    const refund = addRefund(transaction, made.amount, { refundKey: made.refundKey, reason: made.reason, method: 'online' })
    refundLog.push({ orderId: transaction.order_id, refund, endpoint: made.endpoint })
    const answer = midtransJson(200, {
      status_code: '200',
      status_message: made.endpoint === 'direct' ? 'Success, refund request is approved by the bank' : 'Success, refund request is approved',
      ...refundAnswerFields(transaction),
      refund_chargeback_id: refund.refund_chargeback_id,
      refund_amount: refund.refund_amount,
      refund_key: made.refundKey,
    })
    refundKeys.set(made.refundKey, { fingerprint: made.fingerprint, answer })
    return answer
  }

  /** The bank refused the refund: nothing refunded, and its refund_key stays free. */
  function deniedRefundAnswer(transaction: MidtransTransaction, refundKey: string): Answer {
    return midtransJson(200, {
      status_code: '202',
      status_message: 'Refund denied by the bank',
      ...refundAnswerFields(transaction),
      refund_chargeback_id: nextRefundChargebackId++,
      refund_amount: grossText(0),
      refund_key: refundKey,
    })
  }

  const inFlightOf = (transaction: MidtransTransaction) =>
    [...inFlight.values()].reduce((total, flight) => total + (flight.orderId === transaction.order_id ? flight.amount : 0), 0)

  function takeInFlight(refundKey: string) {
    const flight = inFlight.get(refundKey)
    if (!flight) throw new StandInRefusal(`The Midtrans stand-in has no refund in flight under refund_key ${refundKey}`, 404)
    inFlight.delete(refundKey)
    return flight
  }

  function finishRefund(refundKey: string): MidtransRefund {
    const flight = takeInFlight(refundKey)
    const transaction = transactionOf(flight.orderId)
    flight.answer(makeRefund(transaction, flight))
    return transaction.refunds.at(-1)!
  }

  function failRefund(refundKey: string): void {
    const flight = takeInFlight(refundKey)
    flight.answer(deniedRefundAnswer(transactionOf(flight.orderId), refundKey))
  }

  function addRefund(transaction: MidtransTransaction, amount: number, { refundKey, reason, method }: { refundKey: string, reason: string, method: MidtransRefund['refund_method'] }): MidtransRefund {
    const now = jakartaTime(Date.now())
    const refund: MidtransRefund = {
      refund_chargeback_id: nextRefundChargebackId++,
      refund_chargeback_uuid: randomUUID(),
      refund_amount: grossText(amount),
      created_at: now,
      reason,
      refund_key: refundKey,
      refund_method: method,
      bank_confirmed_at: now,
    }
    transaction.refunds.push(refund)
    transaction.transaction_status = refundedOf(transaction) === transaction.gross_amount ? 'refund' : 'partial_refund'
    notify(transaction)
    return refund
  }

  function notificationOf(transaction: MidtransTransaction, overrides: Record<string, unknown> = {}): MidtransAnswer {
    const notification: MidtransAnswer = { ...statusOf(transaction), status_message: 'midtrans payment notification', ...overrides }
    if (!('signature_key' in overrides)) {
      notification.signature_key = midtransSignatureKey(serverKey, String(notification.order_id), String(notification.status_code), String(notification.gross_amount))
    }
    return notification
  }

  function notify(transaction: MidtransTransaction) {
    sender?.send(JSON.stringify(notificationOf(transaction)), () => ({ 'content-type': 'application/json', 'user-agent': MIDTRANS_USER_AGENT }))
  }

  const transactionOf = (orderId: string) => {
    const transaction = transactions.get(orderId)
    if (!transaction) throw new StandInRefusal(`The Midtrans stand-in has no transaction for order_id ${orderId}`, 404)
    return transaction
  }
  const fromPending = (to: MidtransTransactionStatus) => (orderId: string) => {
    const transaction = transactionOf(orderId)
    if (transaction.transaction_status !== 'pending') throw new StandInRefusal(`Midtrans moves only a pending transaction to ${to}; ${orderId} is ${transaction.transaction_status}`)
    transaction.transaction_status = to
    if (to === 'settlement') transaction.settlement_time = jakartaTime(Date.now())
    notify(transaction)
    return transaction
  }
  const moves = { settle: fromPending('settlement'), expire: fromPending('expire'), deny: fromPending('deny'), cancel: fromPending('cancel') }

  function dashboardRefund(orderId: string, amount?: number): MidtransTransaction {
    const transaction = transactionOf(orderId)
    if (!['settlement', 'capture', 'partial_refund'].includes(transaction.transaction_status)) {
      throw new StandInRefusal(`Midtrans refunds only a settled transaction; ${orderId} is ${transaction.transaction_status}`)
    }
    // What Midtrans is still refunding through the API is not left to refund.
    const left = transaction.gross_amount - refundedOf(transaction) - inFlightOf(transaction)
    const refunded = amount ?? left
    if (!Number.isInteger(refunded) || refunded < 1 || refunded > left) throw new StandInRefusal(`Cannot refund ${refunded} of ${orderId}: ${left} is left to refund`)
    const refund = addRefund(transaction, refunded, { refundKey: randomUUID(), reason: '', method: 'offline' })
    refundLog.push({ orderId, refund, endpoint: 'dashboard' })
    return transaction
  }

  function chargeback(orderId: string, amount?: number): MidtransTransaction {
    const transaction = transactionOf(orderId)
    if (transaction.payment_type !== 'credit_card') throw new StandInRefusal(`Midtrans charges back card payments only; ${orderId} is ${transaction.payment_type}`)
    const from = transaction.transaction_status
    if (from !== 'settlement' && from !== 'partial_chargeback') throw new StandInRefusal(`Midtrans charges back only a settled transaction; ${orderId} is ${from}`)
    // Settled money only: a refund still in flight would settle it as refunded after all.
    if (inFlightOf(transaction) > 0) throw new StandInRefusal(`A refund of ${orderId} is still in flight: finish or fail it first`)
    const left = transaction.gross_amount - transaction.chargebacks.reduce((total, taken) => total + taken.amount, 0)
    const taken = amount ?? left
    if (!Number.isInteger(taken) || taken < 1 || taken > left) throw new StandInRefusal(`Cannot charge back ${taken} of ${orderId}: ${left} is left`)
    if (from === 'partial_chargeback' && taken !== left) throw new StandInRefusal(`A partial_chargeback moves only to chargeback: charge back all ${left} that is left of ${orderId}`)
    transaction.chargebacks.push({ amount: taken, created_at: jakartaTime(Date.now()) })
    transaction.transaction_status = taken === left ? 'chargeback' : 'partial_chargeback'
    notify(transaction)
    return transaction
  }

  const countParameter = (value: string | undefined) => {
    if (value === undefined) return Number.POSITIVE_INFINITY
    const count = Number(value)
    if (!Number.isInteger(count) || count < 0) throw new StandInRefusal(`count must be a whole number, not ${value}`)
    return count
  }

  function controlRoute(method: string, path: string, parameters: Record<string, string>): Answer {
    const [, kind, id, action, extra] = path.slice(CONTROL_PREFIX.length).split('/').map(decodeURIComponent)
    const amount = parameters.amount === undefined ? undefined : Number(parameters.amount)
    if (method === 'GET' && kind === undefined) return controlAnswer(200, { transactions: [...transactions.values()].map(statusOf), refundsInFlight: api.refundsInFlight() })
    if (method === 'POST' && kind === 'transactions' && id && extra === undefined) {
      if (action === 'settle' || action === 'expire' || action === 'deny' || action === 'cancel') return control(() => statusOf(moves[action](id)))
      if (action === 'refund') return control(() => statusOf(dashboardRefund(id, amount)))
      if (action === 'chargeback') return control(() => statusOf(chargeback(id, amount)))
    }
    if (method === 'POST' && kind === 'refunds' && id === 'hold' && action === undefined) {
      return control(() => {
        api.holdRefunds(countParameter(parameters.count))
        return { held: refundsToHold }
      })
    }
    if (method === 'POST' && kind === 'refunds' && id && extra === undefined) {
      if (action === 'finish') return control(() => finishRefund(id))
      if (action === 'fail') {
        return control(() => {
          failRefund(id)
          return { refund_key: id, failed: true }
        })
      }
    }
    return controlAnswer(404, { error: `No stand-in control ${method} ${path}`, controls: MIDTRANS_CONTROLS })
  }

  const served = await serve(handle, error => midtransJson(500, { status_code: '500', status_message: `Stand-in failure: ${String(error)}`, id: randomUUID() }), port)
  url = `http://127.0.0.1:${served.port}`
  const api: MidtransApi = {
    url,
    port: served.port,
    calls,
    script,
    transactions,
    refundKeyReuse: 'replay',
    holdRefunds(count = Number.POSITIVE_INFINITY) {
      refundsToHold = count
    },
    refundsInFlight: () => [...inFlight.values()].map(({ orderId, refundKey, amount, endpoint }) => ({ orderId, refundKey, amount, endpoint })),
    finishRefund,
    failRefund,
    ...moves,
    refund: dashboardRefund,
    chargeback,
    createdRefunds: () => refundLog.map(entry => ({ ...entry })),
    refundKeyUses() {
      const uses = new Map<string, number>()
      for (const call of calls) {
        const key = call.body.refund_key
        if (routeOf(call.method, call.path)?.kind !== 'refund' || typeof key !== 'string') continue
        uses.set(key, (uses.get(key) ?? 0) + 1)
      }
      return uses
    },
    refundedTotal: orderId => refundedOf(transactionOf(orderId)),
    status: orderId => statusOf(transactionOf(orderId)),
    notification: (orderId, overrides) => notificationOf(transactionOf(orderId), overrides),
    get webhooks() {
      return sender?.deliveries ?? []
    },
    webhooksIdle: async () => sender?.idle(),
    reset() {
      calls.length = 0
      script.length = 0
      transactions.clear()
      refundLog.length = 0
      refundKeys.clear()
      // Their held requests are never answered: the connections close with the callers' timeouts.
      inFlight.clear()
      refundsToHold = 0
      sender?.close()
      sender = webhookUrl === undefined ? undefined : webhookSender(webhookUrl)
    },
    async close() {
      sender?.close()
      await served.close()
    },
  }
  return api
}

/** The shopper's and dashboard's side, beside the API: what `npm run stand-in -- midtrans` lists. */
export const MIDTRANS_CONTROLS = [
  'GET  /_stand-in                                      every transaction, as the status API shows it, and the refunds in flight',
  'POST /_stand-in/transactions/:order_id/settle        the shopper pays',
  'POST /_stand-in/transactions/:order_id/expire        the payment window closes unpaid',
  'POST /_stand-in/transactions/:order_id/deny          the bank denies it',
  'POST /_stand-in/transactions/:order_id/cancel        canceled in the dashboard',
  'POST /_stand-in/transactions/:order_id/refund        a refund recorded in the dashboard (amount=…; default all that is left)',
  'POST /_stand-in/transactions/:order_id/chargeback    the card issuer charges a settled card payment back (amount=…; default all of it)',
  'POST /_stand-in/refunds/hold                         API refunds stay in flight, unlisted, answers held… (count=…; default every one)',
  'POST /_stand-in/refunds/:refund_key/finish           …until one is made (notified, its held answer sent)',
  'POST /_stand-in/refunds/:refund_key/fail             …or refused by the bank (nothing refunded, its refund_key free)',
]

function routeOf(method: string, path: string): Route | undefined {
  if (method === 'POST' && path === '/v2/charge') return { kind: 'charge' }
  const [, encoded, action] = /^\/v2\/([^/]+)\/(status|cancel|refund|refund\/online\/direct)$/.exec(path) ?? []
  if (encoded === undefined) return undefined
  const id = decodeURIComponent(encoded)
  if (action === 'status') return method === 'GET' ? { kind: 'status', id } : undefined
  if (method !== 'POST') return undefined
  if (action === 'cancel') return { kind: 'cancel', id }
  return { kind: 'refund', id, endpoint: action === 'refund' ? 'refund' : 'direct' }
}

function faultTargetOf(method: string, route: Route | undefined): FaultTarget | undefined {
  if (method === 'GET') return 'read'
  return route?.kind === 'charge' ? 'create' : route?.kind === 'refund' || route?.kind === 'cancel' ? route.kind : undefined
}

/** The fields a charge answer, the status API and a notification share. */
function transactionFields(transaction: MidtransTransaction): MidtransAnswer {
  const refunded = refundedOf(transaction)
  return {
    transaction_id: transaction.transaction_id,
    order_id: transaction.order_id,
    merchant_id: MERCHANT_ID,
    gross_amount: grossText(transaction.gross_amount),
    currency: 'IDR',
    payment_type: transaction.payment_type,
    transaction_time: transaction.transaction_time,
    transaction_status: transaction.transaction_status,
    fraud_status: transaction.fraud_status,
    ...(transaction.va_number && (transaction.bank === 'permata'
      ? { permata_va_number: transaction.va_number }
      : { va_numbers: [{ bank: transaction.bank, va_number: transaction.va_number }] })),
    ...(transaction.actions && { actions: transaction.actions }),
    ...(transaction.settlement_time && { settlement_time: transaction.settlement_time }),
    ...(transaction.channel_response_code && { channel_response_code: transaction.channel_response_code, channel_response_message: transaction.channel_response_message }),
    // The refunds so far and their total, in refund and partial_refund notifications and the status
    // API alike (Refund Transaction, "Refund Transaction Response and Notification" samples).
    ...(transaction.refunds.length > 0 && { refund_amount: grossText(refunded), refunds: transaction.refunds }),
    expiry_time: transaction.expiry_time,
  }
}

/** What a refund answer carries of its transaction (Midtrans' refund samples): the rest is the refund's own. */
function refundAnswerFields(transaction: MidtransTransaction): MidtransAnswer {
  return {
    transaction_id: transaction.transaction_id,
    order_id: transaction.order_id,
    gross_amount: grossText(transaction.gross_amount),
    payment_type: transaction.payment_type,
    transaction_time: transaction.transaction_time,
    transaction_status: transaction.transaction_status,
  }
}

/** Midtrans' status_code for a transaction_status: 200 done, 201 pending, 202 denied or lapsed. */
function statusCodeOf(status: MidtransTransactionStatus): '200' | '201' | '202' {
  if (status === 'pending') return '201'
  if (status === 'deny' || status === 'cancel' || status === 'expire') return '202'
  return '200'
}

const refundedOf = (transaction: MidtransTransaction) => transaction.refunds.reduce((total, refund) => total + Number(refund.refund_amount), 0)

/** Midtrans writes amounts with two decimals: 150000 → '150000.00'. */
const grossText = (amount: number) => amount.toFixed(2)

/** 'YYYY-MM-DD HH:mm:ss' in Asia/Jakarta (UTC+7, no daylight saving), as Midtrans writes times. */
function jakartaTime(ms: number): string {
  return new Date(ms + 7 * 3600_000).toISOString().replace('T', ' ').slice(0, 19)
}

function digits(count: number): string {
  return Array.from({ length: count }, () => randomInt(10)).join('')
}

function authorized(authorization: string | undefined, serverKey: string): boolean {
  const [scheme = '', credentials = ''] = (authorization ?? '').trim().split(/\s+/, 2)
  if (!/^basic$/i.test(scheme)) return false
  const decoded = Buffer.from(credentials, 'base64').toString('utf8')
  return decoded.slice(0, decoded.indexOf(':') < 0 ? undefined : decoded.indexOf(':')) === serverKey
}

function validationError(messages: string[]): Answer {
  return midtransJson(400, { status_code: '400', status_message: 'One or more parameters in the payload is invalid.', validation_messages: messages, id: randomUUID() })
}

/** Midtrans repeats the HTTP status as a string status_code in the body. */
function midtransError(status: number, message: string): Answer {
  return midtransJson(status, { status_code: String(status), status_message: message, id: randomUUID() })
}

function midtransJson(status: number, value: unknown): Answer {
  return jsonAnswer(status, JSON.stringify(value))
}

function parseJson(raw: string): unknown {
  if (raw.trim() === '') return {}
  try {
    return JSON.parse(raw)
  }
  catch {
    return undefined
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
