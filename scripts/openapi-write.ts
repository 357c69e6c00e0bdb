import { mkdirSync, writeFileSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { buildOpenApiDocument } from '../server/openapi/document'

/**
 * `npm run openapi:write [-- <file>]`: writes the API's OpenAPI document (what GET /api/openapi.json
 * serves) without a build or a server, for linters, Prism and fuzzers.
 */
const target = resolve(process.argv[2] ?? 'node_modules/.cache/openapi.json')
mkdirSync(dirname(target), { recursive: true })
writeFileSync(target, `${JSON.stringify(buildOpenApiDocument(), null, 2)}\n`)
console.info(`OpenAPI document written to ${target}`)
