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

export default defineEventHandler((event) => {
  setResponseHeader(event, 'Content-Type', 'text/html; charset=utf-8')
  return page
})
