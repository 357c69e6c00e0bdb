import { describe, expect, it } from 'vitest'
import type { ClaimedJob } from '../../../server/jobs/store'
import type { Execution } from '../../../server/jobs/worker/executor'
import { createHeartbeat } from '../../../server/jobs/worker/heartbeat'
import type { PreparedJob } from '../../../server/jobs/worker/prepare'
import { claimedJob, type Deferred, deferred, preparedJob, runningJob } from './fakes'

const prepared = (id: string, fence: number): PreparedJob => preparedJob(id, { job: claimedJob({ id, fence }) })
const running = (id: string, fence: number, paused = false): Execution => ({ ...runningJob(prepared(id, fence)), paused })

function heartbeat(active: Execution[], buffer: PreparedJob[]) {
  const sent: string[][] = []
  const answers: Array<Deferred<Set<number>>> = []
  const fencedOut: string[] = []
  const superseded: string[] = []
  const beat = createHeartbeat({
    store: {
      heartbeatAll: (claims: readonly ClaimedJob[]) => {
        sent.push(claims.map(job => job.id))
        const answer = deferred<Set<number>>()
        answers.push(answer)
        return answer.promise
      },
    },
    active: new Map(active.map(execution => [execution.prepared.job.id, execution])),
    buffer,
    fencedOut: execution => fencedOut.push(execution.prepared.job.id),
    superseded: entry => superseded.push(entry.job.id),
  })
  return { beat, sent, answers, fencedOut, superseded }
}

describe('createHeartbeat', () => {
  it('sends the buffered and the running claims in one call, skipping paused jobs, one heartbeat at a time', async () => {
    const buffer = [prepared('job_b1', 11)]
    const { beat, sent, answers } = heartbeat([running('job_r1', 1), running('job_paused', 2, true)], buffer)
    beat()
    beat()
    expect(sent).toEqual([['job_b1', 'job_r1']])
    answers[0]!.resolve(new Set([11, 1]))
    await new Promise(resolve => setImmediate(resolve))
    beat()
    expect(sent).toEqual([['job_b1', 'job_r1'], ['job_b1', 'job_r1']])
  })

  it('stops the running jobs and drops the still-buffered jobs whose claims were superseded', async () => {
    const buffer = [prepared('job_b1', 11), prepared('job_b2', 12), prepared('job_b3', 13)]
    const { beat, answers, fencedOut, superseded } = heartbeat([running('job_r1', 1), running('job_r2', 2)], buffer)
    beat()
    // Started while the heartbeat was out: no longer in the buffer, not dropped from it.
    buffer.splice(1, 1)
    answers[0]!.resolve(new Set([1, 13]))
    await new Promise(resolve => setImmediate(resolve))
    expect(fencedOut).toEqual(['job_r2'])
    expect(superseded).toEqual(['job_b1'])
  })

  it('sends nothing without claims, and tries again on the next tick after a failed heartbeat', async () => {
    const { beat: idle, sent: idleSent } = heartbeat([], [])
    idle()
    expect(idleSent).toEqual([])
    const { beat, sent, answers, fencedOut } = heartbeat([running('job_r1', 1)], [])
    beat()
    answers[0]!.reject(new Error('database away'))
    await new Promise(resolve => setImmediate(resolve))
    expect(fencedOut).toEqual([])
    beat()
    expect(sent).toEqual([['job_r1'], ['job_r1']])
  })
})
