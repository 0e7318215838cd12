/**
 * The architecture, checked (docs/architecture.md): the pure core (decider, envelope rules,
 * projections) imports no framework and no I/O; the layers import one way, HTTP -> application ->
 * domain and ports <- adapters; the runtime client imports no part of the server framework.
 */
const PURE = '^(src/domain|projections)/';
/** Every folder below the HTTP edge: application services, ports, adapters, the core, cross-cutting parts. */
const BELOW_HTTP = '^src/(auth|ledger|store|projection-engine|work|webhooks|observability|health|openapi|domain|config|errors|shared|logging)/';
/** The store adapters: drivers and their translation to the port. */
const ADAPTERS = '^src/store/(sqlite|eventstoredb)/';
const CORE_NODE = ['fs', 'path', 'crypto', 'http', 'https', 'net', 'os', 'child_process', 'worker_threads', 'events', 'stream', 'timers', 'process'];

module.exports = {
  forbidden: [
    {
      name: 'pure-core-imports-only-pure-core',
      comment:
        'The decider, envelope rules and projections are pure: they import each other and src/shared, never NestJS, a driver, a node:* module or an adapter.',
      severity: 'error',
      from: { path: PURE },
      to: { pathNot: '^(src/domain|src/shared|projections)/' },
    },
    {
      name: 'pure-core-resolves-everything',
      comment: 'An import the checker cannot resolve is refused in the core rather than waved through.',
      severity: 'error',
      from: { path: PURE },
      to: { couldNotResolve: true },
    },
    {
      name: 'shared-is-pure',
      severity: 'error',
      from: { path: '^src/shared/' },
      to: { pathNot: '^src/shared/' },
    },
    {
      name: 'client-without-server-framework',
      comment: 'A runtime imports the client alone: no NestJS, no server internals.',
      severity: 'error',
      from: { path: '^src/client/' },
      to: { path: '(^node_modules/@nestjs/|^src/(http|ledger|store|auth|projection-engine|observability|cli|config)/)' },
    },
    {
      name: 'mcp-gateway-through-the-client',
      comment: 'The MCP gateway is a runtime of the ledger: it reaches it through the client SDK only, like any other.',
      severity: 'error',
      from: { path: '^src/mcp-gateway/' },
      to: { path: '(^node_modules/@nestjs/|^src/(http|ledger|store|auth|projection-engine|observability|cli|config)/)' },
    },
    {
      name: 'store-below-http',
      comment: 'Adapters never reach up into the HTTP layer.',
      severity: 'error',
      from: { path: '^src/store/' },
      to: { path: '^src/(http|ledger|auth|projection-engine)/' },
    },
    {
      name: 'nothing-below-http-imports-http',
      comment:
        'The HTTP edge (controllers, DTOs, query parsing, the problem filter) sits on top: services take typed inputs and never reach up for a request, a decorator or a parser.',
      severity: 'error',
      from: { path: BELOW_HTTP },
      to: { path: '^src/http/' },
    },
    {
      name: 'controllers-live-in-http',
      comment:
        'Every route is declared under src/http and registered by src/http/http.module.ts; a controller file elsewhere is refused (any import it makes is reported).',
      severity: 'error',
      from: { path: '\\.controller\\.ts$', pathNot: '^src/http/' },
      to: {},
    },
    {
      name: 'observability-imports-neither-ledger-nor-projection-engine',
      comment:
        'Metrics are fed through hooks observability defines; the services they watch are handed those hooks, so observability depends on nothing it observes.',
      severity: 'error',
      from: { path: '^src/observability/' },
      to: { path: '^src/(ledger|projection-engine)/' },
    },
    {
      name: 'tools-outside-the-runtime',
      comment: 'Build-time tools (tools/: the artefact generator) may load the application; the runtime never loads them.',
      severity: 'error',
      from: { path: '^(src|projections)/' },
      to: { path: '^tools/' },
    },
    {
      name: 'adapters-only-through-the-factory',
      comment:
        'The SQLite and EventStoreDB adapters are chosen in one place (src/store/store.factory.ts); everything else, the application services included, holds the store by its port.',
      severity: 'error',
      from: { pathNot: `${ADAPTERS}|^src/store/store\\.factory\\.ts$` },
      to: { path: ADAPTERS },
    },
    {
      name: 'server-without-cli',
      comment: 'The service never depends on the command-line tool; shared formats live in src/store.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/cli/' },
      to: { path: '^src/cli/' },
    },
    {
      name: 'no-circular',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^dist/|^node_modules/)' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    builtInModules: { add: CORE_NODE },
  },
};
