import { noApiRouteDetail, problem } from '../../problems'

/**
 * Every /api path that no route file serves, whatever its method, is a 404 problem from here.
 * Without it such a request fell through to Nuxt's page renderer, which set up a whole Vue app to
 * find that no page matched: about ten times the CPU of a served request.
 */
export default defineEventHandler((event) => {
  throw problem('not-found', noApiRouteDetail(event))
})
