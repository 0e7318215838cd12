/**
 * A PostgreSQL for the tests that need one: the server at DATABASE_URL when it is set, otherwise a
 * throwaway cluster started from Debian's binaries (`apt-get install postgresql`) in a temporary
 * directory on a free loopback port, one per test file, stopped after it. Either way each test file
 * gets a database of its own, dropped after, so files running side by side never share a table.
 *
 * Where there is neither, the tier is skipped with one printed line on how to run it (as the
 * browser tier does, test/support/browser.ts), unless LEDGER_REQUIRE_POSTGRES=1 (.ci/run), where
 * the missing server is one failing test, never a silent skip.
 *
 * initdb and the server refuse to run as root: as root (CI runs so) the cluster is made and run as
 * the `postgres` user that Debian's package creates, through runuser.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { appendFileSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';

/** Set by .ci/run: there a missing server fails the run instead of skipping the tier. */
export const POSTGRES_REQUIRED = process.env.LEDGER_REQUIRE_POSTGRES === '1';

export const POSTGRES_SKIP_LINE =
  'postgres tier skipped: DATABASE_URL is not set and no PostgreSQL binaries were found. To run it: ' +
  'apt-get install postgresql (or DATABASE_URL=postgres://user@host:5432/db), then npx jest test/int/postgres-';

/** Where initdb and pg_ctl are: `pg_config --bindir`, else the newest /usr/lib/postgresql/N/bin. */
export function postgresBinDir(): string | undefined {
  const fromConfig = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' });
  const candidates: string[] = [];
  if (fromConfig.status === 0) candidates.push(fromConfig.stdout.trim());
  if (existsSync('/usr/lib/postgresql')) {
    const versions = readdirSync('/usr/lib/postgresql')
      .filter((name) => /^\d+$/.test(name))
      .sort((a, b) => Number(b) - Number(a));
    candidates.push(...versions.map((version) => `/usr/lib/postgresql/${version}/bin`));
  }
  return candidates.find((dir) => existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl')));
}

const isRoot = () => process.getuid?.() === 0;

/** The uid and gid of the `postgres` user, read from /etc/passwd (no process spawned). */
function postgresUser(): { uid: number; gid: number } | undefined {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((entry) => entry.startsWith('postgres:'));
  if (!line) return undefined;
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/** Whether a server can be had here: DATABASE_URL, or binaries (and, as root, a user to run them). */
export function postgresAvailable(): boolean {
  if (process.env.DATABASE_URL) return true;
  if (!postgresBinDir()) return false;
  return !isRoot() || postgresUser() !== undefined;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Runs a PostgreSQL binary as this user, or as `postgres` when this is root. */
function runBinary(bin: string, args: string[]): void {
  const [command, argv] = isRoot() ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
  execFileSync(command, argv, { stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 });
}

interface Cluster {
  /** The URL of the cluster's `postgres` database, as its superuser. */
  adminUrl: string;
  stop(): void;
  /** Stops the server as a crash would and answers how to start it again (a throwaway cluster only). */
  crash?(): () => void;
  /** What the server has logged so far (a throwaway cluster only). */
  serverLog?(): string;
}

/**
 * Another address of this host for the server to listen on beside loopback (the host end of a
 * network namespace's link: test/support/network-namespace.ts), and the one client address there
 * it lets in, as loopback is, without a password.
 */
export interface ExtraListen {
  address: string;
  client: string;
}

async function startCluster(binDir: string, extra?: ExtraListen): Promise<Cluster> {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-postgres-'));
  if (isRoot()) {
    const user = postgresUser() as { uid: number; gid: number };
    chownSync(dir, user.uid, user.gid);
  }
  const data = join(dir, 'data');
  // No fsync: a throwaway cluster, and the tests assert what is committed, not what survives a power cut.
  runBinary(join(binDir, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
  // initdb's pg_hba.conf lets in loopback only: the one client of the extra address is added by name.
  if (extra) appendFileSync(join(data, 'pg_hba.conf'), `host all all ${extra.client}/32 trust\n`);
  const listen = ['127.0.0.1', ...(extra ? [extra.address] : [])].join(',');
  let port: number;
  let options = '';
  const start = () =>
    runBinary(join(binDir, 'pg_ctl'), ['-D', data, '-o', options, '-l', join(dir, 'server.log'), '-w', 'start']);
  for (let attempt = 0; ; attempt++) {
    port = await freePort();
    options = `-p ${port} -k ${dir} -c listen_addresses=${listen} -c fsync=off -c max_connections=200`;
    try {
      start();
      break;
    } catch (error) {
      // Another process took the port between the probe and the start: try another one.
      if (attempt >= 3) throw error;
    }
  }
  return {
    adminUrl: `postgres://postgres@127.0.0.1:${port}/postgres`,
    stop: () => {
      try {
        runBinary(join(binDir, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    crash: () => {
      runBinary(join(binDir, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop']);
      return start;
    },
    serverLog: () => readFileSync(join(dir, 'server.log'), 'utf8'),
  };
}

export interface TestDatabase {
  /** A database of this test file's own. */
  url: string;
  /** The server's maintenance database, for a test that makes further databases. */
  adminUrl: string;
  /**
   * Stops the whole server at once (`pg_ctl stop -m immediate`: no checkpoint, as a crash) and
   * answers how to start it again on the same port; only on a throwaway cluster, not DATABASE_URL.
   */
  crash?: () => () => void;
  /** What the server has logged so far; only on a throwaway cluster. */
  serverLog?: () => string;
  stop(): Promise<void>;
}

/**
 * A fresh database on the configured server or on a throwaway cluster; one that must also listen
 * on another address (`extra`) is always a throwaway cluster of its own.
 */
export async function startTestDatabase(extra?: ExtraListen): Promise<TestDatabase> {
  const cluster =
    process.env.DATABASE_URL && !extra
      ? { adminUrl: process.env.DATABASE_URL, stop: () => undefined }
      : await startCluster(postgresBinDir() as string, extra);
  const name = `ledger_test_${randomUUID().replace(/-/g, '').slice(0, 16)}`;
  const admin = new Client({ connectionString: cluster.adminUrl });
  try {
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
  } catch (error) {
    cluster.stop();
    throw error;
  } finally {
    await admin.end().catch(() => undefined);
  }
  const url = new URL(cluster.adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    adminUrl: cluster.adminUrl,
    ...('crash' in cluster && cluster.crash ? { crash: cluster.crash } : {}),
    ...('serverLog' in cluster && cluster.serverLog ? { serverLog: cluster.serverLog } : {}),
    stop: async () => {
      const client = new Client({ connectionString: cluster.adminUrl });
      try {
        await client.connect();
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end().catch(() => undefined);
        cluster.stop();
      }
    },
  };
}

/**
 * `describe` for the tests that need PostgreSQL. `database()` answers this file's database once
 * the block's beforeAll has started it. Skipped with one line where no server can be had, failing
 * instead under LEDGER_REQUIRE_POSTGRES=1.
 */
export function describeWithPostgres(name: string, body: (database: () => TestDatabase) => void): void {
  if (!postgresAvailable()) {
    if (POSTGRES_REQUIRED) {
      describe(name, () => {
        it('needs PostgreSQL (LEDGER_REQUIRE_POSTGRES=1)', () => {
          throw new Error(POSTGRES_SKIP_LINE.replace('postgres tier skipped', 'postgres tier required'));
        });
      });
      return;
    }
    // Written directly: console.log inside Jest adds a stack frame, and this is meant as one line.
    process.stderr.write(`${POSTGRES_SKIP_LINE}\n`);
    describe.skip(name, () => body(() => undefined as unknown as TestDatabase));
    return;
  }
  describe(name, () => {
    let started: TestDatabase | undefined;
    beforeAll(async () => {
      started = await startTestDatabase();
    }, 120_000);
    afterAll(async () => {
      await started?.stop();
    }, 60_000);
    body(() => {
      if (!started) throw new Error('the test database has not started (see beforeAll)');
      return started;
    });
  });
}
