import { createRequire } from 'node:module'
import postgres from 'postgres'
import { describe, expect, it } from 'vitest'
import { checkPatchedDriver, PATCHED_DRIVER_MARKER, UnpatchedDriverError } from '../../server/db'

// patches/postgres+3.4.9.patch is applied by patch-package in postinstall, which `npm ci
// --ignore-scripts` skips without a word: the app checks the marker the patch sets.

describe('checkPatchedDriver', () => {
  it('accepts the installed postgres.js, its ESM and its CommonJS build', () => {
    expect(() => checkPatchedDriver(postgres)).not.toThrow()
    expect(() => checkPatchedDriver(createRequire(import.meta.url)('postgres'))).not.toThrow()
    expect((postgres as unknown as Record<symbol, unknown>)[PATCHED_DRIVER_MARKER]).toBe(true)
  })

  it('refuses a driver without the marker, saying what to run', () => {
    // The same function as postgres.js exports, as an unpatched install has it.
    const unpatched = function Postgres() {}
    for (const driver of [unpatched, Object.assign(() => {}, { [PATCHED_DRIVER_MARKER]: 'yes' }), undefined, {}]) {
      let refusal: unknown
      try {
        checkPatchedDriver(driver)
      }
      catch (error) {
        refusal = error
      }
      expect(refusal).toBeInstanceOf(UnpatchedDriverError)
      expect((refusal as Error).message).toBe('postgres.js is missing the fix in patches/postgres+3.4.9.patch (without it a lost Postgres connection can crash the process). '
        + 'Did `npm ci` run with --ignore-scripts? Run `npx patch-package`, rebuild, and start again.')
    }
  })
})
