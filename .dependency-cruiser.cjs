/**
 * The import rules CI holds the code to (`npm run lint:imports`; docs/architecture.md#layers): no
 * cycles, and the server's folders in layers, each importing only from those below it. The job
 * engine and the maintenance services know no domain; the composition root wires them.
 */
const layers = [
  // The ground floor: configuration, the database, problems, observability, HTTP helpers, locks.
  ['config', 'db', 'problems', 'observability', 'http', 'locks', 'redis', 'faults', 'mail'],
  // The job engine and the maintenance scheduler: no domain code.
  ['jobs', 'maintenance'],
  // The events the shop's systems follow, and their delivery to its webhook endpoints.
  ['events'],
  ['webhook-endpoints'],
  // Stock and its ledger: what orders reserve and settle.
  ['stock'],
  ['orders'],
  ['payments'],
  ['webhooks'],
  ['ops'],
  ['refunds', 'ledger', 'tenants', 'checkout'],
  // The composition root: the worker with every job kind, the maintenance services with their intervals.
  ['composition'],
  ['api', 'routes', 'plugins', 'middleware', 'utils'],
]
const folders = group => `^server/(${group.join('|')})/`

/** One rule per layer: nothing in it imports a folder of a higher layer. */
const layerRules = layers.slice(0, -1).map((group, index) => ({
  name: `layer-${group.join('-')}`,
  comment: `server/{${group.join(',')}}/ imports only from layers below it (docs/architecture.md#layers)`,
  severity: 'error',
  from: { path: folders(group) },
  to: { path: folders(layers.slice(index + 1).flat()) },
}))

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'An import cycle: one of its modules sees the other half-initialised.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    ...layerRules,
    {
      name: 'app-uses-module-entries',
      comment: 'The app reaches nuxt-idempotency through its documented entries (nuxt-idempotency/server, nuxt-idempotency/core), never its sources.',
      severity: 'error',
      from: { path: '^(server|shared|scripts)/' },
      to: { path: '^packages/nuxt-idempotency/src/' },
    },
    {
      name: 'db-kit-knows-no-idempotency',
      comment: 'packages/db-kit is below the module: it imports neither the module nor the app.',
      severity: 'error',
      from: { path: '^packages/db-kit/src/' },
      to: { path: '^(packages/nuxt-idempotency|server|shared)/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(node_modules|\\.nuxt|\\.output|dist)/' },
    tsPreCompilationDeps: true,
    combinedDependencies: true,
  },
}
