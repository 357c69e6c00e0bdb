import { randomUUID } from 'node:crypto'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { fetch, setup } from '@nuxt/test-utils/e2e'
import { describe, expect, it } from 'vitest'

describe('POST /api/notes', async () => {
  await setup({
    rootDir: fileURLToPath(new URL('./fixtures/testing-your-app', import.meta.url)),
    // A fresh embedded database for each run (PGlite: no DATABASE_URL set).
    env: { NUXT_IDEMPOTENCY_PGLITE_DIR: join(mkdtempSync(join(tmpdir(), 'notes-')), 'db') },
  })

  const post = (key: string, body: unknown) => fetch('/api/notes', {
    method: 'POST',
    headers: { 'Idempotency-Key': key, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  })

  it('runs once per key and replays the first answer', async () => {
    const key = randomUUID()
    const first = await post(key, { text: 'hello' })
    expect(first.status).toBe(201)
    const note = await first.json()

    const retry = await post(key, { text: 'hello' })
    expect(retry.status).toBe(201)
    expect(retry.headers.get('idempotent-replayed')).toBe('true')
    expect(await retry.json()).toEqual(note)
  })

  it('refuses the key reused for another body (422) and a request without a key (400)', async () => {
    const key = randomUUID()
    await post(key, { text: 'hello' })
    const reused = await post(key, { text: 'bye' })
    expect(reused.status).toBe(422)
    expect(reused.headers.get('content-type')).toMatch(/^application\/problem\+json/)

    const missing = await fetch('/api/notes', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"text":"hello"}' })
    expect(missing.status).toBe(400)
  })
})
