// @ts-check
// The Nuxt team's flat config, generated for this project's auto-imports by the @nuxt/eslint module
// (`nuxt prepare`, run on install), with its stylistic rules (no Prettier).
import withNuxt from './.nuxt/eslint.config.mjs'

export default withNuxt(
  { ignores: ['drizzle/**', 'docs/**', 'test-results/**', '.data/**'] },
  {
    rules: {
      // Crashes on a spread entry in nuxt.config.ts (`...(buildRoot && {…})`).
      'nuxt/nuxt-config-keys-order': 'off',
      // A callback of two short statements (`() => { socket.destroy(); resolve(false) }`) stays on its line.
      '@stylistic/max-statements-per-line': ['error', { max: 2 }],
    },
  },
  {
    files: ['tests/**'],
    rules: {
      // Tests read JSON answers whose shape is what they assert: `any` there, typed everywhere else.
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
)
