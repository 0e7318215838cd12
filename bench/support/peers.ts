/**
 * The systems the benchmark compares the ledger with (Emmett's SQLite event store on the sqlite3
 * driver). The service and its tests never load them, so `npm ci` does not install them: sqlite3
 * alone compiles SQLite from C source at install. They are installed on demand, into a prefix of
 * their own (bench/.peers, ignored by git), and loaded from there; a figure whose peer cannot be
 * had is skipped with a printed line, and the other figures still run.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';

/** Exact versions: the committed figures were measured against these. */
export const BENCH_PEERS = {
  '@event-driven-io/emmett': '0.38.5',
  '@event-driven-io/emmett-sqlite': '0.38.5',
  sqlite3: '5.1.7',
} as const;

export type BenchPeer = keyof typeof BENCH_PEERS;

/** bench/.peers under the package root (this file runs as dist/bench/support/peers.js). */
export const PEER_PREFIX = resolve(__dirname, '../../../bench/.peers');

const peerRequire = () => createRequire(join(PEER_PREFIX, 'package.json'));

function installed(name: BenchPeer): boolean {
  try {
    peerRequire().resolve(name);
    return true;
  } catch {
    return false;
  }
}

/**
 * Installs whatever peer is missing (`npm install` into PEER_PREFIX, never into the project's own
 * node_modules or lockfile). Answers the peers that can be loaded now; never throws.
 */
export function ensurePeers(log: (line: string) => void): Set<BenchPeer> {
  const names = Object.keys(BENCH_PEERS) as BenchPeer[];
  const missing = names.filter((name) => !installed(name));
  if (missing.length > 0) {
    log(`  installing benchmark peers into ${PEER_PREFIX}: ${missing.map((name) => `${name}@${BENCH_PEERS[name]}`).join(' ')}`);
    mkdirSync(PEER_PREFIX, { recursive: true });
    const manifest = join(PEER_PREFIX, 'package.json');
    if (!existsSync(manifest)) {
      writeFileSync(manifest, `${JSON.stringify({ name: 'recovery-ledger-bench-peers', private: true, dependencies: BENCH_PEERS }, null, 2)}\n`);
    }
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    const result = spawnSync(npm, ['install', '--prefix', PEER_PREFIX, '--no-audit', '--no-fund', '--loglevel=error'], {
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    if (result.error || result.status !== 0) log(`  npm install of the benchmark peers failed (${result.error?.message ?? `exit ${result.status}`})`);
  }
  return new Set(names.filter(installed));
}

/** Loads a peer from PEER_PREFIX; typed by the caller with the part it uses. */
export function loadPeer<T>(name: BenchPeer): T {
  return peerRequire()(name) as T;
}
