import { randomUUID } from 'node:crypto'
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Browser } from 'playwright-core'
import { afterAll, describe, expect, it } from 'vitest'
import { fastJobsEnv, stopAll, testSecrets } from '../support/app'
import { openOpsConsole, withChromium } from '../support/browser'
import { opsRequest } from '../support/ops'
import { pollUntil } from '../support/poll'
import { paidStripeOrder, postRefund, type ProviderStack, settledRefundJob, withStripeStack } from '../support/providers'
import { describeWithServices } from '../support/services'
import type { StripeApi } from '../support/stripe-api'

// Differences planted at the Stripe stand-in behind the app's back (no webhook is configured, so
// the app hears of neither): a refund made only in Stripe's dashboard, and a refund of ours that
// Stripe fails after it succeeded. The ledger check heals both, and the console's ledger panel in
// real Chromium shows each as healed, with our ledger as it was beside Stripe's.

const screenshotDir = fileURLToPath(new URL('../../test-results/ops/', import.meta.url))

describeWithServices('the ledger panel in Chromium: what the check healed', ['postgres', 'redis'], () => {
  let api: StripeApi
  let stack: ProviderStack
  let browser: Browser
  withStripeStack('ledger_healed_browser', { ...fastJobsEnv, LEDGER_CHECK_SETTLE_SECONDS: '0' }, (started, startedStack) => {
    api = started
    stack = startedStack
  })
  withChromium((launched) => {
    browser = launched
  })
  afterAll(stopAll)

  describe('a refund made only at Stripe, and one failed only at Stripe', () => {
    it('are healed by the check and shown as healed, both ledgers side by side', async () => {
      const dashboard = await paidStripeOrder(api, stack)
      const madeAtStripe = api.dashboardRefund(dashboard.intentId, 30_000 * 100)

      const failing = await paidStripeOrder(api, stack)
      const created = await postRefund(stack, failing.orderId, `refund-${randomUUID()}`, { amount: 40_000 })
      expect(created.status, created.text).toBe(201)
      const refundId = created.json.id as string
      expect(await settledRefundJob(stack.sql, refundId)).toMatchObject({ status: 'completed' })
      const [ours] = [...api.refunds.values()].filter(refund => refund.metadata.refund_id === refundId)
      expect(ours).toMatchObject({ status: 'succeeded' })
      api.settleRefund(ours!.id, 'failed')

      await pollUntil('the ledger check healed both', async () => {
        const run = await opsRequest(stack.app.url, '/api/ops/tasks/payments:ledger-check', { method: 'POST', timeoutMs: 60_000 })
        expect(run.status, run.text).toBe(200)
        return (await stack.sql`select 1 from ledger_discrepancies where status = 'healed'`).length === 2
      })
      expect(await stack.sql`select status, source, provider_refund_id as "providerRefundId" from refunds where order_id = ${dashboard.orderId}`)
        .toEqual([{ status: 'succeeded', source: 'provider', providerRefundId: madeAtStripe.id }])
      expect(await stack.sql`select status from refunds where id = ${refundId}`).toEqual([{ status: 'failed' }])
      expect(await stack.sql`select count(*)::int as open from ledger_discrepancies where status = 'open'`).toEqual([{ open: 0 }])

      const { context, page, pageErrors } = await openOpsConsole(browser, stack.app.url, testSecrets.opsToken)
      try {
        const panel = page.getByTestId('ledger-panel')
        await panel.getByTestId('ledger-status').selectOption('healed')
        const items = panel.getByTestId('discrepancy')
        await pollUntil('the panel lists the two healed', async () => await items.count() === 2)
        const cells = async (item: ReturnType<typeof items.nth>, testId: string) =>
          (await item.getByTestId(testId).first().locator('th, td').allInnerTexts()).map(text => text.replace(/\s+/g, ' ').trim())

        const recorded = panel.locator(`[data-testid="discrepancy"]:has-text("${madeAtStripe.id}")`)
        expect(await recorded.getByTestId('discrepancy-kind').textContent()).toBe('refund succeeded at provider')
        expect(await recorded.getByTestId('discrepancy-status').textContent()).toBe('healed')
        expect((await recorded.getByTestId('discrepancy-summary').textContent())!.trim()).toBe(`The provider made refund ${madeAtStripe.id} (IDR 30,000), not recorded here.`)
        expect(await cells(recorded, 'ledger-line-refunded')).toEqual(['Refunded', '0 IDR', '30,000 IDR'])
        expect((await recorded.getByTestId('discrepancy-resolution').textContent())!.replace(/\s+/g, ' ')).toContain('Healed by the check at')

        const failed = panel.locator(`[data-testid="discrepancy"]:has-text("${refundId}")`)
        expect(await failed.getByTestId('discrepancy-kind').textContent()).toBe('refund not at provider')
        expect((await failed.getByTestId('discrepancy-summary').textContent())!.trim()).toBe(`${refundId} (${ours!.id}) succeeded here; the provider failed it.`)
        expect(await cells(failed, 'ledger-line-refunded')).toEqual(['Refunded', '40,000 IDR', '0 IDR'])
        expect((await failed.getByTestId('discrepancy-resolution').textContent())!.replace(/\s+/g, ' '))
          .toContain('Failed here, the amount free again; notices withheld: 0 of 1 (a notice already sent cannot be).')
        // Nothing to resolve: the check did it.
        expect(await panel.getByTestId('resolve').count()).toBe(0)
        await mkdir(screenshotDir, { recursive: true })
        await panel.screenshot({ path: join(screenshotDir, 'ops-ledger-healed.png'), animations: 'disabled' })
        expect(pageErrors).toEqual([])
      }
      finally {
        await context.close()
      }
    })
  })
})
