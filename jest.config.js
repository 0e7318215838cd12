/**
 * Three projects. `core` is the pure core's unit tier, run from packages/core with nothing of the
 * server loaded. `server` is everything else but the Docker build stage: test tiers live in their
 * file names there (*.unit.spec.ts, *.int.spec.ts, *.e2e.spec.ts), and the workspaces are read from
 * their sources. `docker` is the build stage's real `npm ci` and build, which npm test runs alone.
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
  '^@recovery-ledger/core/(.*)$': '<rootDir>/packages/core/src/$1',
  '^@recovery-ledger/client$': '<rootDir>/packages/client/src/index.ts',
  '^@recovery-ledger/mcp-gateway$': '<rootDir>/packages/mcp-gateway/src/index.ts',
  '^@recovery-ledger/agent-frameworks/(.*)$': '<rootDir>/packages/agent-frameworks/src/$1',
};

module.exports = {
  maxWorkers: 2,
  testTimeout: 60000,
  projects: [
    {
      displayName: 'core',
      testEnvironment: 'node',
      rootDir: '<rootDir>/packages/core',
      roots: ['<rootDir>/test'],
      testMatch: ['**/*.spec.ts'],
      transform: { '^.+\\.ts$': swcTypeScript },
    },
    {
      displayName: 'server',
      testEnvironment: 'node',
      roots: ['<rootDir>/test'],
      testMatch: ['**/*.spec.ts'],
      // Its own project, run alone after the rest (npm test): it runs a real npm ci that takes both cores.
      testPathIgnorePatterns: ['/node_modules/', 'docker-build-stage'],
      moduleNameMapper: workspaceSources,
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
    },
    {
      displayName: 'docker',
      testEnvironment: 'node',
      roots: ['<rootDir>/test'],
      testMatch: ['**/docker-build-stage.e2e.spec.ts'],
      moduleNameMapper: workspaceSources,
      transform: { '^.+\\.ts$': swcTypeScript },
    },
  ],
};
