import { getRouterParam, type H3Event } from 'h3'
import { transaction } from '@idempotent-checkout/db-kit'
import { requireIdempotencyKey } from 'nuxt-idempotency/server'
import { useConfig } from '../config'
import { useDatabaseHandle } from '../db'
import { readValidatedJson, readValidatedQuery } from '../http/body'
import { runCheckoutIdempotent } from '../http/idempotent'
import { problem } from '../problems'
import type { StockView } from '../../shared/orders'
import { tenantScope } from '../../shared/resources'
import { AdjustStockSchema, SetStockSchema, SkuSchema, StockListQuery } from './schema'
import { adjustStock, findStock, listStock, serializeStock, setStock, unknownSkuProblem } from './service'

/**
 * The inventory routes (docs/inventory.md): the SKU from the path, the body, the service. A SKU
 * is a path segment as it is (SKU_PATTERN): the router's value is the SKU as sent.
 */

function skuOf(event: H3Event): string {
  const sku = SkuSchema.safeParse(getRouterParam(event, 'sku'))
  if (!sku.success) throw problem('not-found', `No stock exists for SKU "${getRouterParam(event, 'sku')}": a SKU is 1–64 letters, digits or - . _ ~ : @ ! $ & ' ( ) * + , ; =. List the tracked ones with GET /api/inventory.`)
  return sku.data
}

/** GET /api/inventory/:sku */
export async function readStock(event: H3Event, tenantId: string): Promise<StockView> {
  const sku = skuOf(event)
  const row = await findStock(useDatabaseHandle().db, tenantId, sku)
  if (!row) throw unknownSkuProblem(sku)
  return serializeStock(row)
}

/** GET /api/inventory */
export async function readStockList(event: H3Event, tenantId: string) {
  const page = readValidatedQuery(event, StockListQuery)
  return { object: 'list' as const, ...await listStock(useDatabaseHandle().db, tenantId, page) }
}

/** PUT /api/inventory/:sku: 200 with the counts, whether the SKU was tracked before or not. */
export async function putStock(event: H3Event, tenantId: string): Promise<StockView> {
  const sku = skuOf(event)
  const { onHand } = await readValidatedJson(event, SetStockSchema)
  return serializeStock(await transaction(useDatabaseHandle().db, tx => setStock(tx, { tenantId, sku, onHand }, { requestId: event.context.requestId })))
}

/** POST /api/inventory/:sku/adjustments: one adjustment per Idempotency-Key. */
export async function postAdjustment(event: H3Event, tenantId: string) {
  const sku = skuOf(event)
  const key = requireIdempotencyKey(event)
  const input = await readValidatedJson(event, AdjustStockSchema)
  const reply = await runCheckoutIdempotent(event, {
    mode: 'atomic',
    scope: tenantScope(tenantId),
    route: 'POST /api/inventory/:sku/adjustments',
    key,
    // The SKU is part of the request: the same key for another SKU's adjustment is another request.
    payload: { sku, ...input },
    ttlSeconds: useConfig().IDEMPOTENCY_TTL_SECONDS,
    execute: async (tx) => {
      const stock = await adjustStock(tx, { tenantId, sku, ...input }, { requestId: event.context.requestId })
      return { status: 201, body: serializeStock(stock), resourceType: 'stock', resourceId: sku }
    },
  })
  return reply.body
}
