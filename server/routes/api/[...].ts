import { apiOperations } from '../../openapi/operations'
import { noApiRouteDetail, problem, rawRequestPath, requestMethod } from '../../problems'

/**
 * Each documented path as a pattern (a `{param}` takes one segment) with the methods it serves; a
 * path served with GET is served with HEAD too (see the request-context middleware).
 */
const servedPaths = [...new Set(apiOperations.map(operation => operation.path))].map((path) => {
  const methods = apiOperations.filter(operation => operation.path === path).map(operation => operation.method.toUpperCase())
  return {
    pattern: new RegExp(`^${path.replace(/[.]/g, '\\.').replace(/\{\w+\}/g, '[^/]+')}$`),
    methods: methods.includes('GET') ? [...methods, 'HEAD'] : methods,
  }
})

/**
 * Every /api request that no route file serves: 405 with `Allow` on a path served with other
 * methods (as the OpenAPI document lists them), else 404. The path is matched as sent: the router
 * decodes it first, so a parameter holding an encoded `?` (`/api/orders/a%3Fb`) reaches no route and
 * is answered 404 here, not 405. Without this route such requests fell through to Nuxt's page
 * renderer, which set up a whole Vue app to find that no page matched: about ten times the CPU of a
 * served request.
 */
export default defineEventHandler((event) => {
  const path = rawRequestPath(event)
  const method = requestMethod(event)
  const served = servedPaths.find(({ pattern }) => pattern.test(path))
  if (served && !served.methods.includes(method)) {
    const allow = served.methods.join(', ')
    throw problem('method-not-allowed', `${method} is not allowed on ${path}; it takes ${allow}.`, { headers: { Allow: allow } })
  }
  throw problem('not-found', noApiRouteDetail(event))
})
