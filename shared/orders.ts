/**
 * An order as the API answers it, shared by the server (which builds it) and the checkout page
 * (which shows it). Amounts are integers in minor units of `currency`. The types are those of the
 * API's schemas (./api-schemas), which the OpenAPI description documents: one shape, both sides.
 */

import type { z } from 'zod'
import type { CreatedOrderSchema, OrderItemSchema, OrderPaymentSchema, OrderSchema, PaymentNextActionSchema, RefundSchema, ReservationSchema, StockSchema } from './api-schemas'

export type OrderItem = z.output<typeof OrderItemSchema>

/** The provider's next step for the shopper, stored on the order once its payment was created. */
export type PaymentNextAction = z.output<typeof PaymentNextActionSchema>

/** The order's payment at its provider: null until the payment.create_intent job ran. */
export type OrderPaymentView = z.output<typeof OrderPaymentSchema>

/**
 * POST /api/orders answers this (201); GET /api/orders/:id adds the payment (OrderView). Type
 * aliases, not interfaces: a stored response body must be assignable to Record<string, unknown>.
 */
export type CreatedOrderView = z.output<typeof CreatedOrderSchema>

/** A refund of (part of) an order's payment, in the order's currency and units. */
export type RefundView = z.output<typeof RefundSchema>

/** GET /api/orders/:id: with the payment, `amountRefunded` (Σ of the succeeded refunds) and the refunds, oldest first. */
export type OrderView = z.output<typeof OrderSchema>

/** A tracked SKU's counts (GET /api/inventory/:sku). */
export type StockView = z.output<typeof StockSchema>

/** Stock an order holds of one tracked SKU (GET /api/orders/:id `reservations`). */
export type ReservationView = z.output<typeof ReservationSchema>
