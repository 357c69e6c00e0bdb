import { desc, type SQL } from 'drizzle-orm'
import type { AnyPgColumn } from 'drizzle-orm/pg-core'
import { z } from 'zod'
import type { OpsList } from '../../shared/ops-api'

/**
 * What every ops listing shares: `?limit=1…500` (100 by default) next to its own filters, unknown
 * query parameters refused, newest rows first, and the `{object: 'list', data}` answer.
 */

export const LIST_LIMIT_MAX = 500

/** The listing's query schema: its filters, the limit, nothing else. */
export function listQuery<Filters extends z.ZodRawShape>(filters: Filters) {
  return z.object({ ...filters, limit: z.coerce.number().int().min(1).max(LIST_LIMIT_MAX).default(100) }).strict()
}

/** Newest first; rows created in one transaction share created_at, so the id breaks the tie. */
export const newestFirst = (table: { createdAt: AnyPgColumn, id: AnyPgColumn }): SQL[] => [desc(table.createdAt), desc(table.id)]

export const opsList = <T>(data: T[]): OpsList<T> => ({ object: 'list', data })
