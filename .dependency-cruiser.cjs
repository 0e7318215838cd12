/**
 * The architecture, checked: the pure core (decider, envelope rules, projections) imports
 * no framework and no I/O; the runtime client imports no part of the server framework.
 */
const PURE = '^(src/domain|projections)/';
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
