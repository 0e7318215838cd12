/**
 * Loads TypeScript in the campaign's own processes (the CLI and the forked load clients), with the
 * same @swc/core settings jest uses (jest.config.js), so the chaos code runs unbuilt while the
 * service under test is the built one (dist/src/main.js).
 */
const { readFileSync } = require('node:fs');
const { transformSync } = require('@swc/core');

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
