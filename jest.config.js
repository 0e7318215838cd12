/** Test tiers live in their file names: *.unit.spec.ts, *.int.spec.ts, *.e2e.spec.ts. */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.spec.ts'],
  transform: {
    '/node_modules/.+\\.js$': ['@swc/jest', { jsc: { target: 'es2022' }, module: { type: 'commonjs' } }],
    '^.+\\.ts$': [
      '@swc/jest',
      {
        jsc: {
          target: 'es2022',
          parser: { syntax: 'typescript', decorators: true },
          transform: { legacyDecorator: true, decoratorMetadata: true },
        },
        module: { type: 'commonjs' },
      },
    ],
  },
  // secretlint ships ES modules only; Jest on Node 20 cannot require them, so they are compiled
  // to CommonJS like the sources (the service itself loads them with Node's require of ESM).
  transformIgnorePatterns: ['/node_modules/(?!(@secretlint|structured-source|boundary)/)'],
  testTimeout: 60000,
  maxWorkers: 2,
};
