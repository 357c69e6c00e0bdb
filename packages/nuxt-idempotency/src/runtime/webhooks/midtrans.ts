import { createHash } from 'node:crypto'
import { parseJsonBody, sameBytes, type Verification, type WebhookDelivery } from './signing'

/**
 * Midtrans HTTP notifications: the signature is in the body, `signature_key` =
 * SHA-512(order_id + status_code + gross_amount + server key), hex. Nothing else is signed, so
 * nothing else may decide anything on its own.
 */

export interface MidtransSignedFields {
  order_id: string
  status_code: string
  gross_amount: string
  signature_key: string
}

export function midtransSignature(serverKey: string, orderId: string, statusCode: string, grossAmount: string): string {
  return createHash('sha512').update(`${orderId}${statusCode}${grossAmount}${serverKey}`).digest('hex')
}

/** The signed fields of a notification body when each has its documented form. */
export function midtransSignedFields(json: unknown): MidtransSignedFields | undefined {
  const body = json as Partial<Record<keyof MidtransSignedFields, unknown>> | null
  if (typeof body !== 'object' || body === null) return undefined
  const { order_id, status_code, gross_amount, signature_key } = body
  if (typeof order_id !== 'string' || order_id.length < 1 || order_id.length > 64) return undefined
  if (typeof status_code !== 'string' || !/^\d{3}$/.test(status_code)) return undefined
  if (typeof gross_amount !== 'string' || !/^\d{1,15}(\.\d{1,2})?$/.test(gross_amount)) return undefined
  if (typeof signature_key !== 'string' || !/^[0-9a-fA-F]{128}$/.test(signature_key)) return undefined
  return { order_id, status_code, gross_amount, signature_key }
}

export function verifyMidtransSignature(delivery: WebhookDelivery, serverKey: string): Verification {
  const signed = midtransSignedFields(parseJsonBody(delivery.body))
  if (!signed) return { ok: false, reason: 'body lacks order_id, status_code, gross_amount or signature_key' }
  const expected = Buffer.from(midtransSignature(serverKey, signed.order_id, signed.status_code, signed.gross_amount), 'hex')
  return sameBytes(Buffer.from(signed.signature_key, 'hex'), expected) ? { ok: true } : { ok: false, reason: 'signature_key does not match' }
}
