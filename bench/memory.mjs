// Peak resident memory of a process while it runs. On Linux the kernel keeps the high-water mark
// (VmHWM in /proc/<pid>/status), so no spike between two samples is missed; elsewhere `ps` is
// sampled. Either is read every 200 ms, so the last reading survives the process's exit.
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'

const SAMPLE_INTERVAL_MS = 200
const hasProcfs = existsSync('/proc/self/status')

function residentKiB(pid) {
  try {
    if (hasProcfs) return Number(/^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0)
    return Number(execFileSync('ps', ['-o', 'rss=', '-p', String(pid)], { encoding: 'utf8' }).trim()) || 0
  }
  catch {
    return 0 // the process has exited: its peak is already recorded
  }
}

/** Starts sampling `pid`; `stop()` returns the peak in MiB. */
export function samplePeakRss(pid) {
  let peakKiB = residentKiB(pid)
  const sample = () => { peakKiB = Math.max(peakKiB, residentKiB(pid)) }
  const timer = setInterval(sample, SAMPLE_INTERVAL_MS)
  timer.unref()
  return {
    stop() {
      clearInterval(timer)
      sample()
      return Math.round(peakKiB / 1024)
    },
  }
}
