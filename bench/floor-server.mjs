// The floor the product is measured against: a bare node:http server that parses the JSON body and
// does one INSERT per request on postgres.js — no framework, no idempotency, no validation. Nothing
// that writes an order can be cheaper than this on the same machine. Its GET /api/health answers a
// constant, as the app's does: what any answer costs on this machine, with nothing behind it.
import { createServer } from 'node:http'
import postgres from 'postgres'

const sql = postgres(process.env.DATABASE_URL, { max: 10, onnotice: () => {} })
await sql`create table if not exists bench_floor (id bigserial primary key, key text, body jsonb not null, created_at timestamptz not null default now())`

const server = createServer(async (req, res) => {
  if (req.method === 'GET' && req.url === '/api/ready') {
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ready"}')
    return
  }
  if (req.method === 'GET' && req.url === '/api/health') {
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}')
    return
  }
  const chunks = []
  for await (const chunk of req) chunks.push(chunk)
  try {
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
    const [row] = await sql`insert into bench_floor (key, body) values (${req.headers['idempotency-key'] ?? null}, ${sql.json(body)}) returning id`
    res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ id: String(row.id) }))
  }
  catch (error) {
    res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: String(error) }))
  }
})
server.listen(Number(process.env.PORT), process.env.HOST ?? '127.0.0.1')
process.on('SIGTERM', () => server.close(() => sql.end().then(() => process.exit(0))))
