/**
 * The architecture, checked (docs/architecture.md): the pure core (packages/core: decider, envelope
 * rules, facts) and the read models over it (projections/) import no framework and no I/O; the layers import one way, HTTP ->
 * application -> domain and ports <- adapters; the client (packages/client) imports nothing but the
 * core and Node; the MCP gateway reaches the ledger through the client; packages meet by name only.
 */
const PURE = '^packages/core/src/';
/** The read models: each one's fold, stored shape and queries, over the core. */
const PROJECTIONS = '^projections/src/';
/** Every server folder below the HTTP edge: application services, ports, adapters, cross-cutting parts. */
const BELOW_HTTP =
  '^src/(auth|ledger|integrity|store|adapters|projection-engine|work|webhooks|observability|health|openapi|config|logging|shared)/';
/** The adapters, one folder per store: drivers and their translation to the ports. */
const ADAPTERS = '^src/adapters/';
const CORE_NODE = [
  'fs',
  'path',
  'crypto',
  'http',
  'https',
  'net',
  'os',
  'child_process',
  'worker_threads',
  'events',
  'stream',
  'timers',
  'process',
];

/** The framework each agent-frameworks subpath wraps, as node_modules paths (the frameworks' test project's: scripts/frameworks.cjs). */
const AGENT_FRAMEWORKS = {
  'ai-sdk': '(ai|@ai-sdk/[^/]+)',
  'openai-agents': '(@openai/[^/]+|openai)',
  langchain: '(langchain|@langchain/[^/]+)',
  mastra: '(@mastra/[^/]+)',
};

/**
 * Each package's entry points, as its package.json `exports` names them (`index.ts` is the package's
 * name; the agent-framework integrations have one entry per framework and no index).
 */
const PACKAGE_ENTRIES = {
  'packages/core': ['index', 'envelope'],
  projections: ['index'],
  'packages/client': ['index'],
  'packages/mcp-gateway': ['index'],
  'packages/agent-frameworks': ['ai-sdk', 'openai-agents', 'langchain', 'mastra'],
};

/** From outside a package, only its entry points: a deep import would tie a consumer to a file the package may move. */
function packageEntryRules() {
  return Object.entries(PACKAGE_ENTRIES).map(([dir, entries]) => ({
    name: `${dir.replace(/^packages\//, '')}-only-through-its-entry-points`,
    comment: `${dir} exports a curated surface (${entries.map((entry) => `src/${entry}.ts`).join(', ')}); from outside it, import it by name, not a file inside it.`,
    severity: 'error',
    from: { pathNot: `^${dir}/` },
    to: { path: `^${dir}/src/`, pathNot: `^${dir}/src/(${entries.join('|')})\\.ts$` },
  }));
}

/** A name the packages do not export (`@recovery-ledger/core/domain/...`) resolves to nothing: refused, not waved through. */
const UNEXPORTED_PACKAGE_PATH = {
  name: 'packages-only-by-exported-names',
  comment: 'A package is imported by a name its package.json `exports` lists; any other path into it does not resolve.',
  severity: 'error',
  from: {},
  to: { couldNotResolve: true, path: '^@recovery-ledger/' },
};

/** Each subpath loads only its own framework, so a runtime that uses one never loads another. */
function agentFrameworkRules() {
  return Object.entries(AGENT_FRAMEWORKS).map(([subpath]) => ({
    name: `agent-frameworks-${subpath}-loads-only-its-framework`,
    comment: `${subpath}.ts wraps one framework: importing another would load it in every runtime that uses this subpath.`,
    severity: 'error',
    from: { path: `^packages/agent-frameworks/src/${subpath}\\.ts$` },
    to: {
      path: `^(test/frameworks/)?node_modules/(${Object.entries(AGENT_FRAMEWORKS)
        .filter(([other]) => other !== subpath)
        .map(([, framework]) => framework)
        .join('|')})/`,
    },
  }));
}

module.exports = {
  forbidden: [
    {
      name: 'pure-core-imports-only-pure-core',
      comment:
        'The decider, envelope rules and projections are pure: they import each other, never NestJS, a driver, a node:* module, a package or the server.',
      severity: 'error',
      from: { path: PURE },
      to: { pathNot: PURE },
    },
    {
      name: 'pure-core-resolves-everything',
      comment: 'An import the checker cannot resolve is refused in the core rather than waved through.',
      severity: 'error',
      from: { path: PURE },
      to: { couldNotResolve: true },
    },
    {
      name: 'projections-import-only-the-core',
      comment:
        "The read models fold the core's facts and answer from a read model they are handed: they import the core and each other, never NestJS, a driver, a node:* module, another package or the server.",
      severity: 'error',
      from: { path: PROJECTIONS },
      to: { pathNot: `${PROJECTIONS}|${PURE}|^node_modules/@recovery-ledger/core/` },
    },
    {
      name: 'projections-resolve-everything',
      severity: 'error',
      from: { path: PROJECTIONS },
      to: { couldNotResolve: true },
    },
    {
      name: 'shared-is-pure',
      severity: 'error',
      from: { path: '^packages/core/src/shared/' },
      to: { pathNot: '^packages/core/src/shared/' },
    },
    {
      name: 'client-without-server-framework',
      comment:
        'A runtime installs the client alone: it imports the core (bundled into its build) and Node, never a package, NestJS or the server.',
      severity: 'error',
      from: { path: '^packages/client/src/' },
      to: { path: '(^node_modules/|^src/|^projections/|^packages/mcp-gateway/)' },
    },
    {
      name: 'mcp-gateway-through-the-client',
      comment:
        'The MCP gateway is a runtime of the ledger: it reaches it through the client package only, like any other, and never the core or the server directly.',
      severity: 'error',
      from: { path: '^packages/mcp-gateway/src/' },
      to: { path: '(^node_modules/@nestjs/|^src/|^packages/core/|^projections/)' },
    },
    {
      name: 'agent-frameworks-through-the-client',
      comment:
        'The framework integrations are runtimes of the ledger: they reach it through the client package only, never the core, the gateway or the server.',
      severity: 'error',
      from: { path: '^packages/agent-frameworks/src/' },
      to: {
        path: '(^node_modules/@nestjs/|^src/|^packages/core/|^projections/|^packages/mcp-gateway/|^node_modules/@recovery-ledger/(core|projections|mcp-gateway)/)',
      },
    },
    ...agentFrameworkRules(),
    ...packageEntryRules(),
    UNEXPORTED_PACKAGE_PATH,
    {
      name: 'packages-never-import-the-server',
      comment:
        'The packages stand below the server: nothing under packages/ or projections/ reaches into src/, tools/ or the tests.',
      severity: 'error',
      from: { path: '^(packages|projections)/' },
      // A framework installed in test/frameworks (scripts/frameworks.cjs) is a package, not the tests.
      to: { path: '^(src|tools|test|bench|examples)/', pathNot: '/node_modules/' },
    },
    {
      name: 'packages-meet-by-name',
      comment:
        'A package is imported by its name (@recovery-ledger/...), as an installed one would be; a relative path into another package (or from the server into one) would not survive packing.',
      severity: 'error',
      from: { path: '^(packages/[^/]+|projections|src)/' },
      to: { path: '^(packages|projections)/', pathNot: '^$1/', dependencyTypesNot: ['aliased'] },
    },
    {
      name: 'store-below-http',
      comment: 'Adapters never reach up into the HTTP layer.',
      severity: 'error',
      from: { path: '^src/(store|adapters)/' },
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
      comment:
        'Build-time tools (tools/: the artefact generator) may load the application; the runtime never loads them.',
      severity: 'error',
      from: { path: '^(src|packages)/' },
      to: { path: '^tools/' },
    },
    {
      name: 'adapters-only-through-the-factory',
      comment:
        'The adapters (src/adapters: event, lease, time-base, read-model and webhook stores) are chosen in one place (src/adapters/store.factory.ts); everything else, the application services included, holds each store by its port.',
      severity: 'error',
      from: { pathNot: ADAPTERS },
      to: { path: ADAPTERS, pathNot: '^src/adapters/store\\.factory\\.ts$' },
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
    exclude: { path: '(^|/)(dist|\\.venv)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    builtInModules: { add: CORE_NODE },
  },
};
