#!/usr/bin/env node
/**
 * `npm run build` compiles the workspaces in dependency order (the core with tsc, the client and the
 * agent-framework integrations bundled with tsup, the MCP gateway with tsc), then the server with
 * tsc, and stamps dist/ with the time the compile began. The server compiles against the packages' built declarations, as an installed
 * package would.
 * `node scripts/build.cjs --if-stale` (npm start's prestart) compiles only when dist/ is missing or
 * a source is newer than that stamp, so a start with a current build loads no compiler at all.
 * Plain Node and no dependency: it must run before anything is built.
 */
'use strict';
const { spawnSync } = require('node:child_process');
const { existsSync, readdirSync, rmSync, statSync, writeFileSync, utimesSync, mkdirSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');
const STAMP = join(root, 'dist', '.build-stamp');
// What tsconfig.build.json compiles, and the settings that shape the output.
const INPUTS = [
  'src',
  'examples',
  'bench',
  'tools',
  'packages',
  'tsconfig.base.json',
  'tsconfig.json',
  'tsconfig.build.json',
];
/** The workspaces, in the order they depend on each other, and how each is compiled. */
const WORKSPACES = [
  { dir: 'packages/core', tool: 'typescript/bin/tsc', args: ['-p', 'tsconfig.json'] },
  { dir: 'packages/client', tool: 'tsup/dist/cli-default.js', args: ['--silent'] },
  { dir: 'packages/mcp-gateway', tool: 'typescript/bin/tsc', args: ['-p', 'tsconfig.json'] },
  { dir: 'packages/agent-frameworks', tool: 'tsup/dist/cli-default.js', args: ['--silent'] },
];
const PACKAGES = WORKSPACES.filter(({ dir }) => existsSync(join(root, dir, 'package.json')));
const SKIP = new Set(['node_modules', 'results', 'figures', '.peers', 'dist']);

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
  if (PACKAGES.some(({ dir }) => !existsSync(join(root, dir, 'dist')))) return true;
  return INPUTS.some((input) => newestMtime(join(root, input)) > stamp.mtimeMs);
}

function run(tool, args, cwd) {
  const bin = require.resolve(tool, { paths: [root] });
  const result = spawnSync(process.execPath, [bin, ...args], { stdio: 'inherit', cwd });
  if (result.status !== 0) process.exit(result.status ?? 1);
}

function build() {
  const startedAt = new Date();
  for (const { dir, tool, args } of PACKAGES) {
    // A renamed or deleted source must not leave its old output behind in the package.
    rmSync(join(root, dir, 'dist'), { recursive: true, force: true });
    run(tool, args, join(root, dir));
  }
  run('typescript/bin/tsc', ['-p', join(root, 'tsconfig.build.json')], root);
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
