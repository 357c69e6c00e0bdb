import { describe, expect, it } from 'vitest'
import { problemOf } from '../../server/problems'
import { AwardPointsSchema, orderNotFound } from '../fixtures/extending/loyalty'

/**
 * docs/extending.md's idempotent route, the parts that run without a server: its body's schema and
 * its problem. Its work runs in tests/integration/extending-job-kind.test.ts; the handler
 * (tests/fixtures/extending/route.ts) is held to the app's types by `npm run typecheck`.
 */

describe('the example route (POST /api/orders/:id/loyalty-points)', () => {
  it('takes a whole, positive number of points up to 100000, and nothing else', () => {
    expect(AwardPointsSchema.safeParse({ points: 120 })).toMatchObject({ success: true, data: { points: 120 } })
    for (const body of [{}, { points: 0 }, { points: 1.5 }, { points: '120' }, { points: 100_001 }, { points: 120, bonus: true }]) {
      expect(AwardPointsSchema.safeParse(body).success, JSON.stringify(body)).toBe(false)
    }
  })

  it('answers an unknown order with the catalogue\'s not-found problem', () => {
    expect(problemOf(orderNotFound('ord_missing'))?.body).toMatchObject({ type: '/problems/not-found', status: 404, detail: expect.stringContaining('ord_missing') })
  })
})
