/**
 * The systems the benchmark compares the ledger with: Emmett's SQLite event store on the sqlite3
 * driver; the Restate server (a binary shipped in its registry package) with its Node SDK; DBOS
 * (which also needs a PostgreSQL server, see postgres.ts). The service and its tests never load them, so `npm ci` does not install them: sqlite3
 * alone compiles SQLite from C source at install. They are installed on demand, into a prefix of
 * their own (bench/.peers, ignored by git), and loaded from there; a figure whose peer cannot be
 * had is skipped with a printed line, and the other figures still run.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';

/** Exact versions: the committed figures were measured against these. */
export const BENCH_PEERS = {
  '@event-driven-io/emmett': '0.38.5',
  '@event-driven-io/emmett-sqlite': '0.38.5',
  sqlite3: '5.1.7',
  '@restatedev/restate-server': '1.7.12',
  '@restatedev/restate-sdk': '1.17.2',
  '@dbos-inc/dbos-sdk': '5.3.0',
} as const;

export type BenchPeer = keyof typeof BENCH_PEERS;

const EMMETT: BenchPeer[] = ['@event-driven-io/emmett', '@event-driven-io/emmett-sqlite', 'sqlite3'];

/** bench/.peers under the package root (this file runs as dist/bench/support/peers.js). */
export const PEER_PREFIX = resolve(__dirname, '../../../bench/.peers');

const peerRequire = () => createRequire(join(PEER_PREFIX, 'package.json'));

/** Installed at the pinned version (some peers export no entry point to resolve: read the manifest). */
function installed(name: BenchPeer): boolean {
  try {
    const manifest = JSON.parse(readFileSync(join(PEER_PREFIX, 'node_modules', name, 'package.json'), 'utf8')) as {
      version?: string;
    };
    return manifest.version === BENCH_PEERS[name];
  } catch {
    return false;
  }
}

/**
 * Installs whichever of `names` is missing (`npm install name@version` into PEER_PREFIX, never into
 * the project's own node_modules or lockfile). Answers the peers that can be loaded now; never throws.
 */
export function ensurePeers(log: (line: string) => void, names: readonly BenchPeer[] = EMMETT): Set<BenchPeer> {
  const missing = names.filter((name) => !installed(name));
  if (missing.length > 0) {
    log(
      `  installing benchmark peers into ${PEER_PREFIX}: ${missing.map((name) => `${name}@${BENCH_PEERS[name]}`).join(' ')}`,
    );
    mkdirSync(PEER_PREFIX, { recursive: true });
    const manifest = join(PEER_PREFIX, 'package.json');
    if (!existsSync(manifest)) {
      writeFileSync(manifest, `${JSON.stringify({ name: 'recovery-ledger-bench-peers', private: true }, null, 2)}\n`);
    }
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    const specs = missing.map((name) => `${name}@${BENCH_PEERS[name]}`);
    const result = spawnSync(
      npm,
      ['install', '--prefix', PEER_PREFIX, '--save-exact', '--no-audit', '--no-fund', '--loglevel=error', ...specs],
      {
        stdio: ['ignore', 'inherit', 'inherit'],
      },
    );
    if (result.error || result.status !== 0)
      log(`  npm install of the benchmark peers failed (${result.error?.message ?? `exit ${result.status}`})`);
  }
  return new Set(names.filter(installed));
}

/** The absolute path of a file inside PEER_PREFIX/node_modules (a binary, say). */
export function peerFile(...parts: string[]): string {
  return join(PEER_PREFIX, 'node_modules', ...parts);
}

/** Loads a peer from PEER_PREFIX; typed by the caller with the part it uses. */
export function loadPeer<T>(name: BenchPeer): T {
  return peerRequire()(name) as T;
}
