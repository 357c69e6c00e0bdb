import { z } from 'zod'
import { orderResource } from '../../shared/resources'
import { defineJobType } from '../jobs/types'

export const webhookApplyJob = defineJobType({
  kind: 'webhook.apply',
  payload: z.object({ webhookEventId: z.string().min(1), orderId: z.string().min(1) }).strict(),
  resource: payload => orderResource(payload.orderId),
})
