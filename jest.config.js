/**
 * The tiers, named by what a test needs (README.md, "Tests by tier"):
 * - `unit`: pure functions, no service, no store: test/unit and the core's own tests.
 * - `int`: in the test's process, with the real parts that fit in it: SQLite files, the whole Nest
 *   application built from source on a loopback port (test/support/ledger-in-process.ts), the
 *   projection worker thread.
 * - `e2e`: a process of its own, only where the test needs the boundary (kill -9, restarts,
 *   signals, libfaketime, several instances, Chromium, MCP child processes, packed packages). It
 *   runs the build in dist/, and refuses one older than the sources (test/support/build-check.ts).
 * - `docker`: the Dockerfile's build stage (a real `npm ci` and build) and the runtime stage started
 *   from it; npm test runs it in the same run as the tiers, in a worker of its own.
 * Every tier reads the workspaces from their sources, as tsconfig.json's paths do.
 */
const swcTypeScript = [
  '@swc/jest',
  {
    jsc: {
      target: 'es2022',
      parser: { syntax: 'typescript', decorators: true },
      transform: { legacyDecorator: true, decoratorMetadata: true },
    },
    module: { type: 'commonjs' },
  },
];

/** The workspaces by name, from source, as tsconfig.json's paths read them. */
const workspaceSources = {
  '^@recovery-ledger/core$': '<rootDir>/packages/core/src/index.ts',
  '^@recovery-ledger/core/envelope$': '<rootDir>/packages/core/src/envelope.ts',
  '^@recovery-ledger/projections$': '<rootDir>/projections/src/index.ts',
  '^@recovery-ledger/client$': '<rootDir>/packages/client/src/index.ts',
  '^@recovery-ledger/mcp-gateway$': '<rootDir>/packages/mcp-gateway/src/index.ts',
  '^@recovery-ledger/agent-frameworks/(.*)$': '<rootDir>/packages/agent-frameworks/src/$1',
};

const serverProject = {
  testEnvironment: 'node',
  moduleNameMapper: workspaceSources,
  // The agent frameworks are a test project's, not the root's (scripts/frameworks.cjs): found there
  // after the root node_modules, as NODE_PATH would be.
  modulePaths: ['<rootDir>/test/frameworks/node_modules'],
  transform: {
    '/node_modules/.+\\.js$': ['@swc/jest', { jsc: { target: 'es2022' }, module: { type: 'commonjs' } }],
    // @mastra/core's CommonJS build imports ES modules with import(), which Jest's VM cannot run.
    '/node_modules/@mastra/.+\\.cjs$': ['@swc/jest', { jsc: { target: 'es2022' }, module: { type: 'commonjs' } }],
    '^.+\\.ts$': swcTypeScript,
  },
  // secretlint ships ES modules only; Jest on Node 20 cannot require them, so they are compiled
  // to CommonJS like the sources (the service itself loads them with Node's require of ESM).
  // So do the agent frameworks the integrations are tested in (ai, @mastra/core and what they load),
  // and NestJS 12 (ES modules only), so the int tier runs the whole application in process.
  transformIgnorePatterns: [
    '/node_modules/(?!(@nestjs|@secretlint|structured-source|boundary|ai|@ai-sdk|@mastra|zod|@workflow/serde|p-map|p-retry|is-network-error)/)',
  ],
};

module.exports = {
  // Two workers more than the 2 cores CI has: the slow files wait (on a service's start, a call
  // window, a retry's not_before, a lease's end) more than they compute. With three, /proc/stat
  // showed the cores 52-91 % busy through the suite; with four, 94 % on average.
  maxWorkers: 4,
  testTimeout: 60000,
  // The Docker build stage starts first (test/support/docker-first-sequencer.cjs).
  testSequencer: '<rootDir>/test/support/docker-first-sequencer.cjs',
  // The ten slowest files at the end of every run: where the suite's minutes go.
  reporters: ['default', '<rootDir>/test/support/slowest-files-reporter.cjs'],
  projects: [
    {
      ...serverProject,
      displayName: 'unit',
      testMatch: [
        '<rootDir>/test/unit/**/*.spec.ts',
        '<rootDir>/packages/core/test/**/*.spec.ts',
        '<rootDir>/projections/test/**/*.spec.ts',
      ],
    },
    {
      ...serverProject,
      displayName: 'int',
      testMatch: ['<rootDir>/test/int/**/*.spec.ts', '<rootDir>/test/chaos/**/*.spec.ts'],
      // Installs the frameworks the examples' --help runs load, once per lock file.
      globalSetup: '<rootDir>/test/support/frameworks-global-setup.ts',
      setupFilesAfterEnv: ['<rootDir>/test/support/last-resort-timeout.ts'],
    },
    {
      ...serverProject,
      displayName: 'e2e',
      testMatch: ['<rootDir>/test/e2e/**/*.spec.ts'],
      testPathIgnorePatterns: ['/node_modules/', 'docker-build-stage'],
      // Installs the frameworks (once per lock file), then refuses a dist/ older than the sources, once, in one line.
      globalSetup: '<rootDir>/test/support/e2e-global-setup.ts',
      setupFilesAfterEnv: ['<rootDir>/test/support/last-resort-timeout.ts'],
    },
    {
      ...serverProject,
      displayName: 'docker',
      testMatch: ['<rootDir>/test/e2e/docker-build-stage.e2e.spec.ts'],
    },
  ],
};
