#!/usr/bin/env node
/**
 * `npm run build` compiles with tsc and stamps dist/ with the time the compile began.
 * `node scripts/build.cjs --if-stale` (npm start's prestart) compiles only when dist/ is missing or
 * a source is newer than that stamp, so a start with a current build loads no compiler at all.
 * Plain Node and no dependency: it must run before anything is built.
 */
'use strict';
const { spawnSync } = require('node:child_process');
const { existsSync, readdirSync, statSync, writeFileSync, utimesSync, mkdirSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');
const STAMP = join(root, 'dist', '.build-stamp');
// What tsconfig.build.json compiles, and the settings that shape the output.
const INPUTS = ['src', 'projections', 'examples', 'bench', 'tools', 'tsconfig.json', 'tsconfig.build.json'];
const SKIP = new Set(['node_modules', 'results', 'figures', '.peers']);

function newestMtime(path) {
  const stat = statSync(path, { throwIfNoEntry: false });
  if (!stat) return 0;
  if (!stat.isDirectory()) return stat.mtimeMs;
  let newest = stat.mtimeMs; // a deleted or renamed file changes its folder's time
  for (const entry of readdirSync(path)) {
    if (SKIP.has(entry)) continue;
    newest = Math.max(newest, newestMtime(join(path, entry)));
  }
  return newest;
}

function isStale() {
  const stamp = statSync(STAMP, { throwIfNoEntry: false });
  if (!stamp || !existsSync(join(root, 'dist', 'src', 'main.js'))) return true;
  return INPUTS.some((input) => newestMtime(join(root, input)) > stamp.mtimeMs);
}

function build() {
  const startedAt = new Date();
  const tsc = require.resolve('typescript/bin/tsc', { paths: [root] });
  const result = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit', cwd: root });
  if (result.status !== 0) process.exit(result.status ?? 1);
  mkdirSync(join(root, 'dist'), { recursive: true });
  writeFileSync(STAMP, `${startedAt.toISOString()}\n`);
  // The compile's start, not its end: a source saved while tsc ran must count as newer.
  utimesSync(STAMP, startedAt, startedAt);
}

if (process.argv.includes('--if-stale')) {
  if (isStale()) {
    process.stderr.write('recovery-ledger: compiling (dist/ is missing or older than the sources)\n');
    build();
  }
} else {
  build();
}
