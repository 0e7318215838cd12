#!/usr/bin/env node
/**
 * `npm test`'s checks: the type check with the linter, the layer check, the format check and the
 * build, which read the sources and write nothing another of them reads, run side by side rather
 * than one after another. Each one's output is printed whole when it ends, under its name; the exit
 * code is non-zero when any failed, after all have ended. Each is the package.json script of that
 * name, so `npm run typecheck` alone checks the same thing. The build leaves out its own type check
 * of the server (`--no-check`, scripts/build.cjs): the type check beside it covers the whole tree,
 * and the program is the costliest thing either reads. What follows `--` (npm test's tiers) starts
 * as soon as the build is done, beside the checks still running.
 * Plain Node and no dependency: it runs before anything is built.
 */
'use strict';
const { spawn } = require('node:child_process');
const { join } = require('node:path');

const root = join(__dirname, '..');
// The type check and the linter share one program (scripts/typecheck-and-lint.cjs): run apart, each
// would build it for itself.
const separator = process.argv.indexOf('--');
const named = separator === -1 ? process.argv.slice(2) : process.argv.slice(2, separator);
const CHECKS = named.length > 0 ? named : ['typecheck-and-lint', 'lint:boundaries', 'format:check', 'build'];
/**
 * What runs once the build is done, beside the checks still running (npm test's tiers, which need
 * the build and nothing the other checks write): the cores stay busy instead of waiting on the
 * longest check. Its output is its own; the exit code is non-zero when it or any check failed.
 */
const THEN = separator === -1 ? [] : process.argv.slice(separator + 1);
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

function runAfterBuild(built) {
  if (THEN.length === 0) return Promise.resolve(true);
  return built.then((ok) => {
    if (!ok) {
      process.stderr.write(`\nNot run, the build having failed: ${THEN.join(' ')}\n`);
      return false;
    }
    return new Promise((resolve) => {
      const child = spawn(THEN[0], THEN.slice(1), { cwd: root, stdio: 'inherit' });
      child.on('error', (error) => {
        process.stderr.write(`\n${THEN[0]}: ${error.message}\n`);
        resolve(false);
      });
      child.on('close', (code) => resolve(code === 0));
    });
  });
}

const checks = CHECKS.map(runScript);
const buildIndex = CHECKS.indexOf('build');
const after = runAfterBuild(buildIndex === -1 ? Promise.resolve(true) : checks[buildIndex]);

Promise.all([Promise.all(checks), after]).then(([results, afterOk]) => {
  const failed = CHECKS.filter((_, index) => !results[index]).map((name) => `npm run ${name}`);
  if (!afterOk) failed.push(THEN.join(' '));
  if (failed.length === 0) return;
  process.stderr.write(`\nFailed: ${failed.join(', ')}\n`);
  process.exit(1);
});
