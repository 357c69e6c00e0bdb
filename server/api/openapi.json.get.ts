import { openApiDocument } from '../openapi/document'

/** The OpenAPI 3.1 description of every /api route (server/openapi), built once per process. */
export default defineEventHandler(() => openApiDocument())
