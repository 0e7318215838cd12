#!/usr/bin/env node
/**
 * `npm test`'s first part: the type check with the linter, the layer check, the format check and the
 * build, which read the sources and write nothing another of them reads, run side by side rather
 * than one after another. Each one's output is printed whole when it ends, under its name; the
 * exit code is non-zero when any failed, after all have ended. Each is the package.json script of
 * that name, so `npm run typecheck` alone checks the same thing. The build leaves out its own type
 * check of the server (`--no-check`, scripts/build.cjs): the type check beside it covers the whole
 * tree, and the program is the costliest thing either reads.
 * Plain Node and no dependency: it runs before anything is built.
 */
'use strict';
const { spawn } = require('node:child_process');
const { join } = require('node:path');

const root = join(__dirname, '..');
// The type check and the linter share one program (scripts/typecheck-and-lint.cjs): run apart, each
// would build it for itself.
const CHECKS =
  process.argv.length > 2 ? process.argv.slice(2) : ['typecheck-and-lint', 'lint:boundaries', 'format:check', 'build'];
/** Arguments a script is given here, when the type check runs beside it. */
const ARGUMENTS = { build: ['--no-check'] };
const TYPE_CHECKS = ['typecheck', 'typecheck-and-lint'];

function runScript(name) {
  const started = Date.now();
  return new Promise((resolve) => {
    const extra =
      CHECKS.some((check) => TYPE_CHECKS.includes(check)) && ARGUMENTS[name] ? ['--', ...ARGUMENTS[name]] : [];
    const child = spawn('npm', ['run', '--silent', name, ...extra], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    child.on('close', (code, signal) => {
      const seconds = ((Date.now() - started) / 1000).toFixed(1);
      const verdict = code === 0 ? 'ok' : `failed (${signal ?? `exit ${code}`})`;
      process.stdout.write(`\n> npm run ${name}: ${verdict}, ${seconds} s\n${output.trimEnd()}${output ? '\n' : ''}`);
      resolve(code === 0);
    });
  });
}

Promise.all(CHECKS.map(runScript)).then((results) => {
  if (results.every(Boolean)) return;
  const failed = CHECKS.filter((_, index) => !results[index]);
  process.stderr.write(`\nFailed: ${failed.map((name) => `npm run ${name}`).join(', ')}\n`);
  process.exit(1);
});
