/**
 * The API reference: Redoc renders GET /api/openapi.json in the browser. Its bundle is served by
 * the build itself (publicAssets in nuxt.config.ts), so the page needs no CDN.
 */
const page = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Idempotent Checkout API reference</title>
<style>body { margin: 0; }</style>
</head>
<body>
<redoc spec-url="/api/openapi.json"></redoc>
<script src="/_redoc/redoc.standalone.js"></script>
</body>
</html>
`

/**
 * The page loads nothing from elsewhere: Redoc's own script, its inline styles, the document from
 * this origin and its search worker from a blob (its footer's logo from a CDN is refused, and hidden).
 */
const contentSecurityPolicy = [
  'default-src \'none\'',
  'script-src \'self\'',
  'style-src \'self\' \'unsafe-inline\'',
  'img-src \'self\' data:',
  'font-src \'self\' data:',
  'connect-src \'self\'',
  'worker-src blob:',
  'base-uri \'none\'',
  'form-action \'none\'',
  'frame-ancestors \'none\'',
].join('; ')

export default defineEventHandler((event) => {
  setResponseHeaders(event, { 'Content-Type': 'text/html; charset=utf-8', 'Content-Security-Policy': contentSecurityPolicy })
  return page
})
