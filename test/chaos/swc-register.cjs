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
  [/^@recovery-ledger\/core\/(.+)$/, (path) => join(ROOT, 'packages/core/src', path)],
  [/^@recovery-ledger\/projections$/, () => join(ROOT, 'projections/src/index.ts')],
  [/^@recovery-ledger\/client$/, () => join(ROOT, 'packages/client/src/index.ts')],
  [/^@recovery-ledger\/mcp-gateway$/, () => join(ROOT, 'packages/mcp-gateway/src/index.ts')],
  [/^@recovery-ledger\/agent-frameworks\/(.+)$/, (path) => join(ROOT, 'packages/agent-frameworks/src', `${path}.ts`)],
];
const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function resolveWorkspaceSource(request, ...rest) {
  for (const [pattern, source] of WORKSPACE_SOURCES) {
    const match = pattern.exec(request);
    if (match) return resolveFilename.call(this, source(match[1]), ...rest);
  }
  return resolveFilename.call(this, request, ...rest);
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
