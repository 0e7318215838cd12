/**
 * Loads TypeScript in the campaign's own processes (the CLI and the forked load clients), with the
 * same @swc/core settings jest uses (jest.config.js), so the chaos code runs unbuilt while the
 * service under test is the built one (dist/src/main.js).
 */
const Module = require('node:module');
const { readFileSync } = require('node:fs');
const { join } = require('node:path');
const { transformSync } = require('@swc/core');

// The workspaces by name, from source, as jest.config.js and tsconfig.json read them: unbuilt code
// here uses unbuilt packages too.
const ROOT = join(__dirname, '..', '..');
const WORKSPACE_SOURCES = [
  [/^@recovery-ledger\/core$/, () => join(ROOT, 'packages/core/src/index.ts')],
  [/^@recovery-ledger\/core\/(.+)$/, (path) => join(ROOT, 'packages/core/src', path)],
  [/^@recovery-ledger\/projections$/, () => join(ROOT, 'projections/src/index.ts')],
  [/^@recovery-ledger\/client$/, () => join(ROOT, 'packages/client/src/index.ts')],
  [/^@recovery-ledger\/mcp-gateway$/, () => join(ROOT, 'packages/mcp-gateway/src/index.ts')],
  [/^@recovery-ledger\/agent-frameworks\/(.+)$/, (path) => join(ROOT, 'packages/agent-frameworks/src', `${path}.ts`)],
];
// The agent frameworks are a test project's (scripts/frameworks.cjs): a package the checkout does
// not have is looked for there, after the root's node_modules, as NODE_PATH would be.
const FRAMEWORKS_PROJECT = join(ROOT, 'test/frameworks');
const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function resolveWorkspaceSource(request, parent, isMain, options) {
  for (const [pattern, source] of WORKSPACE_SOURCES) {
    const match = pattern.exec(request);
    if (match) return resolveFilename.call(this, source(match[1]), parent, isMain, options);
  }
  try {
    return resolveFilename.call(this, request, parent, isMain, options);
  } catch (error) {
    if (error.code !== 'MODULE_NOT_FOUND' || /^[./]/.test(request)) throw error;
    return resolveFilename.call(this, request, parent, isMain, { paths: [FRAMEWORKS_PROJECT] });
  }
};

const OPTIONS = {
  jsc: {
    target: 'es2022',
    parser: { syntax: 'typescript', decorators: true },
    transform: { legacyDecorator: true, decoratorMetadata: true },
  },
  module: { type: 'commonjs' },
  sourceMaps: 'inline',
};

require.extensions['.ts'] = function compileTypeScript(module, filename) {
  const { code } = transformSync(readFileSync(filename, 'utf8'), { ...OPTIONS, filename });
  module._compile(code, filename);
};
