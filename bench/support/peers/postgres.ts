/**
 * A private PostgreSQL cluster for the DBOS row: Debian's server binaries (`postgresql` package,
 * /usr/lib/postgresql/<major>/bin), a fresh data directory in a temporary folder, listening on
 * 127.0.0.1 on a free port, fsync and synchronous_commit on (stated, though they are the defaults),
 * trust authentication for the local bench user. Debian's server refuses to run as root, so a root
 * caller runs it as the `postgres` user (or `nobody`) with runuser.
 *
 * When the binaries are missing, BENCH_INSTALL_SYSTEM_PEERS=1 lets the bench `apt-get install -y
 * postgresql`; otherwise the row is skipped with the reason.
 */
import { spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../processes';

export interface Postgres {
  url(database: string): string;
  /** The postmaster's pid: it and its children are the server. */
  pid: number;
  createDatabase(name: string): void;
  /** One SQL statement in `database`; its rows as psql's unaligned output. */
  query(database: string, sql: string): string;
  stop(): void;
}

function binDir(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const majors = readdirSync(root)
    .filter((name) => existsSync(join(root, name, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return majors.length > 0 ? join(root, majors[0], 'bin') : undefined;
}

/** The binaries, installing Debian's package first when the caller allows it. */
export function postgresBinaries(log: (line: string) => void): { bin: string } | { skip: string } {
  let bin = binDir();
  if (!bin && process.env.BENCH_INSTALL_SYSTEM_PEERS === '1') {
    log('  installing Debian postgresql (BENCH_INSTALL_SYSTEM_PEERS=1)');
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    spawnSync('apt-get', ['update'], { stdio: 'ignore', env });
    const result = spawnSync('apt-get', ['install', '-y', '--no-install-recommends', 'postgresql'], {
      stdio: 'ignore',
      env,
    });
    if (result.status !== 0)
      return { skip: `apt-get install postgresql failed (exit ${result.status ?? result.error?.message})` };
    bin = binDir();
  }
  return bin
    ? { bin }
    : {
        skip: 'no PostgreSQL server binaries in /usr/lib/postgresql (install Debian postgresql, or set BENCH_INSTALL_SYSTEM_PEERS=1)',
      };
}

/** The user the server runs as, and the command prefix to run as that user. */
function runAs(): { user: string; prefix: string[] } {
  if (userInfo().uid !== 0) return { user: userInfo().username, prefix: [] };
  const user = spawnSync('id', ['-u', 'postgres']).status === 0 ? 'postgres' : 'nobody';
  return { user, prefix: ['runuser', '-u', user, '--'] };
}

function uidGid(user: string): { uid: number; gid: number } {
  const read = (flag: string) => Number(spawnSync('id', [flag, user], { encoding: 'utf8' }).stdout.trim());
  return { uid: read('-u'), gid: read('-g') };
}

export async function startPostgres(bin: string): Promise<Postgres> {
  const { user, prefix } = runAs();
  const dir = mkdtempSync(join(tmpdir(), 'ledger-bench-pg-'));
  if (prefix.length > 0) {
    const { uid, gid } = uidGid(user);
    chownSync(dir, uid, gid);
  }
  const data = join(dir, 'data');
  const run = (command: string, args: string[]) => {
    const [file, ...rest] = [...prefix, join(bin, command), ...args];
    const result = spawnSync(file, rest, { encoding: 'utf8' });
    if (result.status !== 0)
      throw new Error(
        `${command} failed (exit ${result.status}): ${result.stderr || result.stdout || result.error?.message}`,
      );
    return result.stdout;
  };
  run('initdb', ['-D', data, '-A', 'trust', '-U', user, '--no-instructions', '-E', 'UTF8', '--locale=C']);
  const port = await freePort();
  const options = `-c listen_addresses=127.0.0.1 -c port=${port} -k ${dir} -c fsync=on -c synchronous_commit=on -c full_page_writes=on -c max_connections=200`;
  run('pg_ctl', ['-D', data, '-l', join(dir, 'server.log'), '-o', options, '-w', '-t', '60', 'start']);
  const pid = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const psql = (sql: string, database = 'postgres') =>
    run('psql', [
      '-h',
      '127.0.0.1',
      '-p',
      String(port),
      '-U',
      user,
      '-d',
      database,
      '-v',
      'ON_ERROR_STOP=1',
      '-qAt',
      '-c',
      sql,
    ]);
  const settings = psql('SHOW fsync').trim() + '/' + psql('SHOW synchronous_commit').trim();
  if (settings !== 'on/on') throw new Error(`PostgreSQL runs with fsync/synchronous_commit ${settings}`);
  return {
    pid,
    url: (database) => `postgres://${user}@127.0.0.1:${port}/${database}`,
    createDatabase: (name) => void psql(`CREATE DATABASE ${name}`),
    query: (database, sql) => psql(sql, database),
    stop: () => {
      try {
        run('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
