import { useDatabaseHandle } from '../../../db'
import { findIntent, requireMockpay } from '../../../payments/mockpay/service'

export default defineEventHandler(async (event) => {
  requireMockpay()
  return findIntent(useDatabaseHandle().db, getRouterParam(event, 'id')!)
})
