#!/usr/bin/env node
/**
 * `npm run typecheck` and `npm run lint` in one process, over one TypeScript program: the type
 * check reads tsconfig.json's whole tree, and the linter's type-aware rules (eslint.config.mjs)
 * read the same program for the server and the packages. Run apart, each builds it for itself,
 * the costliest thing either does; here the linter is handed the program the type check built
 * (eslint.config.mjs takes it from `globalThis.typeCheckedProgram`). npm test's checks
 * (scripts/checks.cjs) run this in their place; each script alone checks the same files with the
 * same rules. The type check's diagnostics are printed as tsc prints them; the linter's as
 * `eslint`'s default formatter does. Exits non-zero when either found a problem.
 * `node scripts/typecheck-and-lint.cjs [directory]` checks another tree laid out the same way (its
 * tsconfig.json and eslint.config.mjs); the repository's by default.
 */
'use strict';
const { join, resolve } = require('node:path');

const root = process.argv[2] ? resolve(process.argv[2]) : join(__dirname, '..');

function typeCheck(ts) {
  const parsed = ts.getParsedCommandLineOfConfigFile(
    join(root, 'tsconfig.json'),
    { noEmit: true },
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
        throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
      },
    },
  );
  const program = ts.createProgram({
    rootNames: parsed.fileNames,
    options: parsed.options,
    projectReferences: parsed.projectReferences,
    configFileParsingDiagnostics: parsed.errors,
  });
  const diagnostics = ts.sortAndDeduplicateDiagnostics([...parsed.errors, ...ts.getPreEmitDiagnostics(program)]);
  const host = {
    getCanonicalFileName: (fileName) => fileName,
    getCurrentDirectory: () => root,
    getNewLine: () => '\n',
  };
  if (diagnostics.length > 0) {
    const format = process.stdout.isTTY ? ts.formatDiagnosticsWithColorAndContext : ts.formatDiagnostics;
    process.stdout.write(format(diagnostics, host));
    process.stdout.write(`\nFound ${diagnostics.length} error${diagnostics.length === 1 ? '' : 's'}.\n`);
  }
  return { program, ok: diagnostics.length === 0 };
}

async function lint(program) {
  const { ESLint } = require(require.resolve('eslint', { paths: [root] }));
  // eslint.config.mjs reads it: its type-aware block then takes this program instead of building one.
  globalThis.typeCheckedProgram = program;
  const eslint = new ESLint({
    cwd: root,
    cache: true,
    cacheLocation: join(root, 'node_modules/.cache/eslint-shared-program'),
  });
  const results = await eslint.lintFiles(['.']);
  const formatter = await eslint.loadFormatter('stylish');
  const output = await formatter.format(results);
  if (output) process.stdout.write(output);
  return results.every((result) => result.errorCount === 0 && result.fatalErrorCount === 0);
}

async function main() {
  const ts = require(require.resolve('typescript', { paths: [root] }));
  const checked = typeCheck(ts);
  const linted = await lint(checked.program);
  if (!checked.ok) process.stderr.write('The type check failed.\n');
  if (!linted) process.stderr.write('The linter failed.\n');
  process.exit(checked.ok && linted ? 0 : 1);
}

main().catch((error) => {
  process.stderr.write(`${error.stack ?? error}\n`);
  process.exit(1);
});
