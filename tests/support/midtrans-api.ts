import { createHash, randomInt, randomUUID } from 'node:crypto'
import http from 'node:http'
import type net from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { type ProviderCall, type ProviderFault, type ScriptedFault, header, listen, readBody, takeFault } from './stripe-api'

/**
 * A local stand-in for the part of Midtrans' Core API (v2) the app uses: charge (bank transfer
 * virtual accounts, GoPay) and the status API, with the answers Midtrans documents, its one-use
 * order_id (406 on reuse) and its notification signature. The call record, fault script and HTTP
 * plumbing are the Stripe stand-in's; a create can also be scripted to be denied by the bank.
 */

export type MidtransFault = ProviderFault
  /** The charge is made but the bank denies it: answered 200 with status_code 202, stored as deny. */
  | { kind: 'deny' }

export type MidtransTransactionStatus = 'pending' | 'settlement' | 'capture' | 'deny' | 'cancel' | 'expire' | 'refund' | 'partial_refund'

export interface MidtransRefund {
  refund_chargeback_id: number
  refund_amount: string
  created_at: string
  reason: string
  refund_key: string
}

export interface MidtransTransaction {
  order_id: string
  transaction_id: string
  payment_type: 'bank_transfer' | 'gopay'
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
  /** The charge request as received. */
  request: Record<string, unknown>
}

export type MidtransAnswer = Record<string, unknown>

export interface MidtransApi {
  /** http://127.0.0.1:PORT, what the client's getCoreApiBaseUrl should return. */
  url: string
  port: number
  calls: ProviderCall[]
  /** Faults applied FIFO: each request takes the first one whose `match` fits it (create: POST /v2/charge; read: GET). */
  script: ScriptedFault<MidtransFault>[]
  /** By order_id. */
  transactions: Map<string, MidtransTransaction>
  /** The shopper paid: pending → settlement. */
  settle(orderId: string): MidtransTransaction
  /** pending → expire. */
  expire(orderId: string): MidtransTransaction
  /** pending → deny. */
  deny(orderId: string): MidtransTransaction
  /** pending → cancel. */
  cancel(orderId: string): MidtransTransaction
  /** Refunds `amount` (default: what is left) of a settled transaction: all of it → refund, less → partial_refund. */
  refund(orderId: string, amount?: number): MidtransTransaction
  /** What the status API answers for the order now. */
  status(orderId: string): MidtransAnswer
  /**
   * The HTTP notification Midtrans would POST for the current state, with signature_key computed over
   * the final order_id, status_code and gross_amount (after `overrides`, unless they set signature_key).
   */
  notification(orderId: string, overrides?: Record<string, unknown>): MidtransAnswer
  /** Forgets transactions, calls and the script. */
  reset(): void
  close(): Promise<void>
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

const UNAUTHORIZED_MESSAGE = 'Access denied due to unauthorized transaction, please check client or server key'
const NOT_FOUND_MESSAGE = 'The requested resource is not found'
const STATUS_MESSAGES: Partial<Record<number, string>> = {
  401: UNAUTHORIZED_MESSAGE,
  404: NOT_FOUND_MESSAGE,
  429: 'Too many requests, please slow down and retry later',
  500: 'Sorry. Our system is recovering from unexpected issues. Please retry.',
  502: 'Sorry. Our system is recovering from unexpected issues. Please retry.',
  503: 'Sorry, Midtrans is under maintenance. Please retry later.',
  504: 'Sorry, the request to the payment provider timed out. Please retry.',
}

interface Answer { status: number, headers: Record<string, string>, body: string }

export async function startMidtransApi({ serverKey }: { serverKey: string }): Promise<MidtransApi> {
  const calls: ProviderCall[] = []
  const script: ScriptedFault<MidtransFault>[] = []
  const transactions = new Map<string, MidtransTransaction>()

  const server = http.createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent && !req.socket.destroyed) writeAnswer(res, midtransJson(500, { status_code: '500', status_message: `Stand-in failure: ${String(error)}`, id: randomUUID() }))
    })
  })
  const sockets = new Set<net.Socket>()
  server.on('connection', (socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  })
  const port = await listen(server)
  const url = `http://127.0.0.1:${port}`

  async function handle(req: http.IncomingMessage, res: http.ServerResponse) {
    const raw = await readBody(req)
    const requestUrl = new URL(req.url ?? '/', 'http://stand-in')
    const method = req.method ?? 'GET'
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
    const isCharge = method === 'POST' && requestUrl.pathname === '/v2/charge'
    const statusOrder = method === 'GET' ? /^\/v2\/([^/]+)\/status$/.exec(requestUrl.pathname)?.[1] : undefined
    const fault = takeFault(script, isCharge ? 'create' : method === 'GET' ? 'read' : undefined)
    const send = (answer: Answer) => {
      if (fault?.kind === 'drop-after') {
        call.answered = 'dropped'
        req.socket.destroy()
        return
      }
      call.answered = answer.status
      writeAnswer(res, answer)
    }

    if (fault?.kind === 'drop-before') {
      call.answered = 'dropped'
      req.socket.destroy()
      return
    }
    if (fault?.kind === 'status') {
      const answer = fault.error
        ? midtransJson(fault.status, { status_code: String(fault.status), ...fault.error })
        : midtransError(fault.status, STATUS_MESSAGES[fault.status] ?? `Scripted HTTP ${fault.status}`)
      if (fault.retryAfter !== undefined) answer.headers['retry-after'] = fault.retryAfter
      return send(answer)
    }
    if (!authorized(header(req, 'authorization'), serverKey)) return send(midtransError(401, UNAUTHORIZED_MESSAGE))
    if (fault?.kind === 'delay') await sleep(fault.ms)
    if (isCharge) {
      if (parsed === undefined) return send(validationError(['Request body is not valid JSON']))
      return send(charge(isObject(parsed) ? parsed : {}, fault?.kind === 'deny'))
    }
    if (statusOrder !== undefined) {
      const transaction = find(decodeURIComponent(statusOrder))
      return send(transaction ? midtransJson(200, statusOf(transaction)) : midtransError(404, 'Transaction doesn\'t exist.'))
    }
    return send(midtransError(404, NOT_FOUND_MESSAGE))
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
      payment_type: paymentType as MidtransTransaction['payment_type'],
      gross_amount: gross,
      transaction_status: denied ? 'deny' : 'pending',
      fraud_status: 'accept',
      transaction_time: jakartaTime(created),
      expiry_time: jakartaTime(created + (paymentType === 'gopay' ? GOPAY_EXPIRY_MS : BANK_TRANSFER_EXPIRY_MS)),
      refunds: [],
      request: body,
      ...(bank && { bank, va_number: digits(vaDigits) }),
      ...(paymentType === 'gopay' && { actions: gopayActions(transactionId, gross) }),
      ...(denied && { channel_response_code: '05', channel_response_message: 'Do not honour' }),
    }
    transactions.set(transaction.order_id, transaction)
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

  /** The status API takes an order_id or a transaction_id. */
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

  const transactionOf = (orderId: string) => {
    const transaction = transactions.get(orderId)
    if (!transaction) throw new Error(`The Midtrans stand-in has no transaction for order_id ${orderId}`)
    return transaction
  }
  const fromPending = (to: MidtransTransactionStatus) => (orderId: string) => {
    const transaction = transactionOf(orderId)
    if (transaction.transaction_status !== 'pending') throw new Error(`Midtrans moves only a pending transaction to ${to}; ${orderId} is ${transaction.transaction_status}`)
    transaction.transaction_status = to
    if (to === 'settlement') transaction.settlement_time = jakartaTime(Date.now())
    return transaction
  }

  return {
    url,
    port,
    calls,
    script,
    transactions,
    settle: fromPending('settlement'),
    expire: fromPending('expire'),
    deny: fromPending('deny'),
    cancel: fromPending('cancel'),
    refund(orderId, amount) {
      const transaction = transactionOf(orderId)
      if (!['settlement', 'capture', 'partial_refund'].includes(transaction.transaction_status)) {
        throw new Error(`Midtrans refunds only a settled transaction; ${orderId} is ${transaction.transaction_status}`)
      }
      const left = transaction.gross_amount - refundedOf(transaction)
      const refunded = amount ?? left
      if (!Number.isInteger(refunded) || refunded < 1 || refunded > left) throw new Error(`Cannot refund ${refunded} of ${orderId}: ${left} is left to refund`)
      transaction.refunds.push({
        refund_chargeback_id: transaction.refunds.length + 1,
        refund_amount: grossText(refunded),
        created_at: jakartaTime(Date.now()),
        reason: '',
        refund_key: randomUUID(),
      })
      transaction.transaction_status = refunded === left ? 'refund' : 'partial_refund'
      return transaction
    },
    status: orderId => statusOf(transactionOf(orderId)),
    notification(orderId, overrides = {}) {
      const notification: MidtransAnswer = { ...statusOf(transactionOf(orderId)), status_message: 'midtrans payment notification', ...overrides }
      if (!('signature_key' in overrides)) {
        notification.signature_key = midtransSignatureKey(serverKey, String(notification.order_id), String(notification.status_code), String(notification.gross_amount))
      }
      return notification
    },
    reset() {
      calls.length = 0
      script.length = 0
      transactions.clear()
    },
    async close() {
      const closed = new Promise<void>(resolve => server.close(() => resolve()))
      for (const socket of sockets) socket.destroy()
      await closed
    },
  }
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
    ...(transaction.refunds.length > 0 && { refund_amount: grossText(refunded), refunds: transaction.refunds }),
    expiry_time: transaction.expiry_time,
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
  return { status, headers: { 'content-type': 'application/json' }, body: JSON.stringify(value) }
}

function writeAnswer(res: http.ServerResponse, answer: Answer) {
  res.writeHead(answer.status, { ...answer.headers, 'content-length': Buffer.byteLength(answer.body) })
  res.end(answer.body)
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
