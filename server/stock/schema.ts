import { z } from 'zod'
import { adjustmentReasons } from '../../shared/statuses'

/**
 * A SKU as orders and stock name it: 1–64 of the characters a URL path segment holds as they are
 * (RFC 3986 unreserved, sub-delims, `:` and `@`), so `/api/inventory/{sku}` needs no encoding and
 * no router can decode a SKU into another path (`/`, `?`, `#` and `%` are not among them).
 */
export const SKU_PATTERN = /^[\w.~:@!$&'()*+,;=-]{1,64}$/
export const SkuSchema = z.string().regex(SKU_PATTERN, 'must be 1–64 letters, digits or any of - . _ ~ : @ ! $ & \' ( ) * + , ; =')

const MAX_UNITS = 1_000_000_000

/** GET /api/inventory (docs/inventory.md#read-stock): a page of SKUs after `startingAfter`. */
export const StockListQuery = z.object({
  limit: z.coerce.number().int('must be an integer').min(1, 'must be 1 or more').max(1000, 'must be at most 1000').default(100),
  startingAfter: SkuSchema.optional(),
}).strict()

/** PUT /api/inventory/:sku (docs/inventory.md#set-a-count). */
export const SetStockSchema = z.object({
  onHand: z.number().int('must be an integer').min(0, 'must be 0 or more').max(MAX_UNITS, `must be at most ${MAX_UNITS}`),
}).strict()
export type SetStockInput = z.output<typeof SetStockSchema>

/** POST /api/inventory/:sku/adjustments (docs/inventory.md#adjust-a-count-exactly-once). */
export const AdjustStockSchema = z.object({
  delta: z.number().int('must be an integer').min(-MAX_UNITS, `must be at least −${MAX_UNITS}`).max(MAX_UNITS, `must be at most ${MAX_UNITS}`)
    .refine(delta => delta !== 0, 'must not be 0: send the units received (positive) or lost (negative)'),
  reason: z.enum(adjustmentReasons),
}).strict()
export type AdjustStockInput = z.output<typeof AdjustStockSchema>

/** A refund's restock of part of the order (docs/inventory.md#restock-on-refund). */
export const RestockItemSchema = z.object({
  sku: SkuSchema,
  quantity: z.number().int('must be an integer').min(1, 'must be 1 or more').max(10_000, 'must be at most 10000'),
}).strict()
