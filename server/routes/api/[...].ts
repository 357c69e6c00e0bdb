import { apiOperations } from '../../openapi/operations'
import { noApiRouteDetail, problem } from '../../problems'

/** Each documented path as a pattern (a `{param}` takes one segment) with the methods it serves. */
const servedPaths = [...new Set(apiOperations.map(operation => operation.path))].map(path => ({
  pattern: new RegExp(`^${path.replace(/[.]/g, '\\.').replace(/\{\w+\}/g, '[^/]+')}$`),
  allow: apiOperations.filter(operation => operation.path === path).map(operation => operation.method.toUpperCase()).join(', '),
}))

/**
 * Every /api request that no route file serves: 405 with `Allow` on a path served with other
 * methods (as the OpenAPI document lists them), else 404. Without this route such a request fell
 * through to Nuxt's page renderer, which set up a whole Vue app to find that no page matched: about
 * ten times the CPU of a served request.
 */
export default defineEventHandler((event) => {
  const path = event.path.split('?')[0]!
  const served = servedPaths.find(({ pattern }) => pattern.test(path))
  if (served) {
    throw problem('method-not-allowed', `${event.method} is not allowed on ${path}; it takes ${served.allow}.`, { headers: { Allow: served.allow } })
  }
  throw problem('not-found', noApiRouteDetail(event))
})
