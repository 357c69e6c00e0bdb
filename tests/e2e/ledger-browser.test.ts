import { randomUUID } from 'node:crypto'
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Browser } from 'playwright-core'
import { afterAll, describe, expect, it } from 'vitest'
import { fastJobsEnv, stopAll, testSecrets } from '../support/app'
import { openOpsConsole, withChromium } from '../support/browser'
import type { MidtransApi } from '../support/midtrans-api'
import { opsRequest } from '../support/ops'
import { validOrderBody } from '../support/orders'
import { pollUntil } from '../support/poll'
import { placeOrder, postCancel, type ProviderStack, settledJob, withMidtransStack } from '../support/providers'
import { describeWithServices } from '../support/services'

// The console's ledger panel in real Chromium against the built server and the Midtrans stand-in:
// a discrepancy the ledger check found (a canceled bank transfer paid late, whose automatic refund
// Midtrans cannot make) shows both ledgers side by side, and resolving it from the panel writes the
// resolution and its operator action, which the order's evidence then shows.

/** Git-ignored: screenshots of the console's key states, for people (docs/screenshots holds the ones the docs show). */
const screenshotDir = fileURLToPath(new URL('../../test-results/ops/', import.meta.url))

describeWithServices('the ledger panel in Chromium', ['postgres', 'redis'], () => {
  let api: MidtransApi
  let stack: ProviderStack
  let browser: Browser
  withMidtransStack('ledger_browser', { ...fastJobsEnv, LEDGER_CHECK_SETTLE_SECONDS: '0' }, (started, startedStack) => {
    api = started
    stack = startedStack
  })
  withChromium((launched) => {
    browser = launched
  })
  afterAll(stopAll)

  describe('a discrepancy found by the check', () => {
    it('shows our ledger beside Midtrans\', and the Resolve form resolves it (operator action written, shown in the order\'s evidence)', async () => {
      const orderId = await placeOrder(stack, validOrderBody({ paymentMethod: 'bank_transfer' }))
      expect(await settledJob(stack.sql, orderId, 'payment.create_intent')).toMatchObject({ status: 'completed' })
      api.settle(orderId)
      expect((await postCancel(stack, orderId, `ledger-${randomUUID()}`)).status).toBe(200)
      await pollUntil('the automatic refund failed', async () =>
        (await stack.sql`select 1 from refunds where order_id = ${orderId} and source = 'automatic' and status = 'failed'`).length === 1, { timeoutMs: 20_000 })
      const [automatic] = await stack.sql<Array<{ id: string }>>`select id from refunds where order_id = ${orderId}`
      await pollUntil('the ledger check ran', async () => {
        const run = await opsRequest(stack.app.url, '/api/ops/tasks/payments:ledger-check', { method: 'POST', timeoutMs: 60_000 })
        expect(run.status, run.text).toBe(200)
        return !run.json.result.skipped
      })
      const [row] = await stack.sql<Array<{ id: string }>>`select id from ledger_discrepancies where order_id = ${orderId} and status = 'open'`
      expect(row).toBeDefined()

      const { context, page, pageErrors } = await openOpsConsole(browser, stack.app.url, testSecrets.opsToken)
      try {
        const panel = page.getByTestId('ledger-panel')
        const item = panel.locator(`[data-discrepancy-id="${row!.id}"]`)
        await item.waitFor()
        expect(await item.getByTestId('discrepancy-kind').textContent()).toBe('canceled refund failed')
        expect(await item.getByTestId('discrepancy-status').textContent()).toBe('open')
        expect((await item.getByTestId('discrepancy-summary').textContent())!.trim())
          .toBe(`The order was canceled and then paid; its automatic refund ${automatic!.id} failed, and the provider still holds IDR 150,000.`)
        // Both ledgers, line by line: ours | Midtrans'.
        const cells = async (testId: string) => (await item.getByTestId(testId).first().locator('th, td').allInnerTexts()).map(text => text.replace(/\s+/g, ' ').trim())
        expect((await item.locator('thead th').allTextContents()).map(text => text.trim())).toEqual(['Line', 'Ours', 'midtrans'])
        expect((await cells('ledger-line-status'))[2]).toBe('settlement')
        expect(await cells('ledger-line-captured')).toEqual(['Captured', '150,000 IDR', '150,000 IDR'])
        expect(await cells('ledger-line-refunded')).toEqual(['Refunded', '0 IDR', '0 IDR'])
        expect(await cells('ledger-line-refund')).toEqual(['Refund', `150,000 IDR failed automatic ${automatic!.id}`, 'none'])
        await mkdir(screenshotDir, { recursive: true })
        await panel.screenshot({ path: join(screenshotDir, 'ops-ledger-discrepancy.png'), animations: 'disabled' })

        // An empty note is refused on the page and nothing is sent.
        await item.getByTestId('resolve').click()
        await item.getByTestId('resolve-operator').fill('dana')
        await item.getByTestId('resolve-submit').click()
        expect(await item.getByTestId('resolve-error').textContent()).toContain('Enter what was done about it')
        expect(await stack.sql`select status from ledger_discrepancies where id = ${row!.id}`).toEqual([{ status: 'open' }])

        await item.getByTestId('resolve-note').fill('Paid the shopper back by bank transfer by hand.')
        await item.getByTestId('resolve-submit').click()
        await pollUntil('the panel shows it resolved', async () => await item.getAttribute('data-status') === 'resolved')
        expect(await panel.getByTestId('ledger-announcement').textContent()).toContain(`Discrepancy ${row!.id} resolved by dana.`)
        expect((await item.getByTestId('discrepancy-resolution').textContent())!.replace(/\s+/g, ' ')).toContain('Resolved by dana at')
        expect(await stack.sql`select status, resolution, resolved_by as "resolvedBy" from ledger_discrepancies where id = ${row!.id}`)
          .toEqual([{ status: 'resolved', resolution: 'Paid the shopper back by bank transfer by hand.', resolvedBy: 'dana' }])
        const actions = await stack.sql`select action, subject_id as "subjectId", request_id as "requestId", detail from operator_actions where subject_id = ${row!.id}`
        expect(actions).toEqual([{
          action: 'ledger_discrepancy.resolved', subjectId: row!.id, requestId: expect.stringMatching(/^req_/),
          detail: { orderId, kind: 'canceled_refund_failed', note: 'Paid the shopper back by bank transfer by hand.', operator: 'dana' },
        }])
        await panel.screenshot({ path: join(screenshotDir, 'ops-ledger-resolved.png'), animations: 'disabled' })

        // The order's evidence tells it: found, resolved, and the operator's action.
        const evidence = await opsRequest(stack.app.url, `/api/ops/evidence?orderId=${orderId}`)
        expect(evidence.status, evidence.text).toBe(200)
        const told = (evidence.json.timeline as Array<{ kind: string, summary: string }>).filter(entry => entry.kind === 'ledger_discrepancy' || entry.kind === 'operator_action')
        expect(told.map(entry => entry.summary)).toEqual([
          expect.stringContaining(`The ledger check found order ${orderId}'s ledger and midtrans's differing (canceled_refund_failed, ${row!.id})`),
          `Ledger discrepancy ${row!.id} (canceled_refund_failed) resolved by dana: "Paid the shopper back by bank transfer by hand."`,
          expect.stringContaining(`Operator action ledger_discrepancy.resolved on ${row!.id}`),
        ])
        expect(pageErrors).toEqual([])
      }
      finally {
        await context.close()
      }
    })
  })
})
