#!/usr/bin/env node
/**
 * `npm run bench`: builds when dist/ is not the build of the sources (`--if-stale`, scripts/build.cjs),
 * then runs dist/bench/run.js with the arguments given. `--help` (or `-h`)
 * prints the usage, which is bench/run.ts's header, and exits before anything is built, installed
 * or measured. Plain Node and no dependency: it runs before anything is built.
 */
'use strict';
const { spawnSync } = require('node:child_process');
const { readFileSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');
const args = process.argv.slice(2);

if (args.includes('--help') || args.includes('-h')) {
  const header = /\/\*\*([\s\S]*?)\*\//.exec(readFileSync(join(root, 'bench', 'run.ts'), 'utf8'));
  const text = (header ? header[1] : '').replace(/^[ \t]*\* ?/gm, '').trim();
  process.stdout.write(`${text}\n`);
  process.exit(0);
}

for (const step of [
  [join(root, 'scripts', 'build.cjs'), '--if-stale'],
  [join(root, 'dist', 'bench', 'run.js'), ...args],
]) {
  const result = spawnSync(process.execPath, step, { stdio: 'inherit', cwd: root });
  if (result.status !== 0) process.exit(result.status ?? 1);
}
