import { afterEach, describe, expect, it, vi } from 'vitest'
import { nextTick } from 'vue'
import type { OpsJob } from '#shared/ops-api'
import JobsPanel from '~/components/ops/JobsPanel.vue'
import { type ActionCall, deadLetter, mountPanel, opsToken, serveListAction } from './ops-context'

const job = deadLetter()
const dismissedAt = '2026-12-01T09:20:00.250Z'

/** The jobs panel listing `job`, its dismiss route answered as `answer` says. */
const serve = (answer: (call: ActionCall) => { status: number, body: unknown }) =>
  serveListAction('/api/ops/jobs', [job], `/api/ops/jobs/${job.id}/dismiss`, answer)
const mountJobs = () => mountPanel(JobsPanel, '[data-testid="job-row"]')

describe('JobsPanel: dismissing a dead letter with a reason', () => {
  let server: ReturnType<typeof serve> | undefined
  afterEach(() => server?.unregister())

  it('a dead letter offers Dismiss beside Redrive; Dismiss opens the reason form and Cancel closes it', async () => {
    server = serve(() => ({ status: 500, body: {} }))
    const wrapper = await mountJobs()

    const row = wrapper.get(`[data-job-id="${job.id}"]`)
    expect(row.findAll('.actions button').map(button => button.text())).toEqual(['Redrive', 'Dismiss'])
    expect(row.get('[data-testid="dismiss"]').attributes('aria-expanded')).toBe('false')
    await row.get('[data-testid="dismiss"]').trigger('click')
    expect(row.get('[data-testid="dismiss"]').attributes('aria-expanded')).toBe('true')
    const form = row.get('[data-testid="dismiss-form"]')
    expect(form.get('label').text()).toBe('Reason for dismissing (kept in the audit)')
    expect(form.get('input').attributes('maxlength')).toBe('500')
    expect(form.get('input').attributes('required')).toBe('')
    await row.get('[data-testid="dismiss-cancel"]').trigger('click')
    expect(row.find('[data-testid="dismiss-form"]').exists()).toBe(false)
    expect(server.calls).toEqual([])
  })

  it('a missing or blank reason is refused in the form, and nothing is sent', async () => {
    server = serve(() => ({ status: 500, body: {} }))
    const wrapper = await mountJobs()
    await wrapper.get('[data-testid="dismiss"]').trigger('click')

    await wrapper.get('[data-testid="dismiss-form"]').trigger('submit')
    expect(wrapper.get('[data-testid="dismiss-error"]').text()).toBe('Enter why this job is dismissed instead of redriven (1–500 characters); it is kept in the audit.')
    expect(wrapper.get('[data-testid="dismiss-error"]').attributes('role')).toBe('alert')
    expect(wrapper.get('[data-testid="dismiss-reason"]').attributes('aria-invalid')).toBe('true')

    await wrapper.get('[data-testid="dismiss-reason"]').setValue('    ')
    await wrapper.get('[data-testid="dismiss-form"]').trigger('submit')
    expect(wrapper.get('[data-testid="dismiss-error"]').text()).toBe('Enter why this job is dismissed instead of redriven (1–500 characters); it is kept in the audit.')
    expect(server.calls).toEqual([])
  })

  it('sends the trimmed reason with the operator token; the row then shows dismissed, the reason, who and when', async () => {
    const reason = 'Order never existed at the provider; refunded by hand.'
    server = serve(({ body }) => ({
      status: 200,
      body: { ...job, status: 'dismissed', dismissedReason: (body as { reason: string }).reason, dismissedAt } satisfies OpsJob,
    }))
    const wrapper = await mountJobs()
    await wrapper.get('[data-testid="dismiss"]').trigger('click')
    await wrapper.get('[data-testid="dismiss-reason"]').setValue(`  ${reason}  `)
    await wrapper.get('[data-testid="dismiss-form"]').trigger('submit')

    await vi.waitFor(() => expect(wrapper.get('[data-testid="job-row"]').attributes('data-status')).toBe('dismissed'))
    expect(server.calls).toEqual([{ authorization: `Bearer ${opsToken}`, body: { reason } }])
    const row = wrapper.get('[data-testid="job-row"]')
    expect(row.get('[data-testid="job-status"]').text()).toBe('dismissed')
    expect(row.get('[data-testid="job-dismissal"]').text()).toBe(`Dismissed by an operator (ops token) at 2026-12-01 09:20:00.250Z: ${reason}`)
    expect(row.get('[data-testid="job-dismissal"] time').attributes('datetime')).toBe(dismissedAt)
    expect(row.find('[data-testid="dismiss-form"]').exists()).toBe(false)
    expect(row.find('[data-testid="redrive"]').exists()).toBe(false)
    expect(row.find('[data-testid="dismiss"]').exists()).toBe(false)
    expect(wrapper.get('[data-testid="jobs-announcement"]').text()).toBe(`Job ${job.id} dismissed: it will not run again.`)
  })

  it('a refusal from the server (409: no longer a dead letter) is shown in the form with its detail', async () => {
    server = serve(() => ({
      status: 409,
      body: { type: 'https://example.test/problems/job-not-dismissable', title: 'Job not dismissable', status: 409, detail: 'Job job_01JDEAD is completed, not dead_letter: only a dead letter can be dismissed. Reload the jobs list.' },
    }))
    const wrapper = await mountJobs()
    await wrapper.get('[data-testid="dismiss"]').trigger('click')
    await wrapper.get('[data-testid="dismiss-reason"]').setValue('no longer needed')
    await wrapper.get('[data-testid="dismiss-form"]').trigger('submit')

    await vi.waitFor(() => expect(wrapper.find('[data-testid="dismiss-error"]').exists()).toBe(true))
    await nextTick()
    expect(wrapper.get('[data-testid="dismiss-error"]').text()).toBe('Not dismissed: Job job_01JDEAD is completed, not dead_letter: only a dead letter can be dismissed. Reload the jobs list. (HTTP 409)')
    expect(server.calls).toHaveLength(1)
    expect(wrapper.get('[data-testid="job-row"]').attributes('data-status')).toBe('dead_letter')
  })
})
