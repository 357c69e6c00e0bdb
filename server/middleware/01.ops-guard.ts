import { requireOps } from '../utils/auth'

/**
 * Operator routes need the ops token, every one of them: the guard runs before routing, so an
 * unknown /api/ops path answers 401 without the token (404 only with it) and a new ops route
 * cannot forget the check. The path is matched decoded and with any run of slashes, so no
 * spelling the router still serves (`/%61pi/ops/jobs`) slips past.
 */
const OPS_PATH = /^\/+api\/+ops(?:\/|$)/

export default defineEventHandler((event) => {
  if (OPS_PATH.test(opsPathOf(event.path))) requireOps(event)
})

function opsPathOf(path: string): string {
  const pathname = path.split('?')[0]!
  try {
    return decodeURIComponent(pathname)
  }
  catch {
    return pathname
  }
}
