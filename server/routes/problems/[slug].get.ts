import { problemCatalog, type ProblemSlug } from '../../problems'

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, c => `&#${c.charCodeAt(0)};`)

// The `type` URI of every problem response resolves to this short explanation.
export default defineEventHandler((event) => {
  const slug = getRouterParam(event, 'slug') as ProblemSlug
  const entry = Object.hasOwn(problemCatalog, slug) ? problemCatalog[slug] : undefined
  if (!entry) throw createError({ statusCode: 404, statusMessage: 'Unknown problem type' })
  setResponseHeader(event, 'Content-Type', 'text/html; charset=utf-8')
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(entry.title)}</title></head>`
    + `<body><main><h1>${escapeHtml(entry.title)}</h1><p>HTTP ${entry.status} · <code>/problems/${slug}</code></p>`
    + `<p>${escapeHtml(entry.explanation)}</p></main></body></html>`
})
