/**
 * Appends alone on PostgreSQL (docs/postgres.md, "Measured: tool steps with one, two and three
 * instances", "Appends alone"): 16 concurrent appenders on one PostgreSQL event store (new streams,
 * then each continued at its revision) for 5 s, and what the database's backends waited on,
 * sampled every 100 ms from `pg_stat_activity`. Given the dist/ directories of several builds, it
 * runs them turn about, each round on a fresh database of one private cluster (Debian's server,
 * fsync and synchronous_commit on), in one order and then the reverse:
 *
 *   npm run build && node dist/bench/postgres-appends.bench.js [rounds=3] [dist of another build...]
 *
 * This build's dist/ is always measured, first in the first round. Loopback only, bounded in time.
 */
import { createHash, randomUUID } from 'node:crypto';
import { join, resolve } from 'node:path';
import { Client } from 'pg';
import type { EventStore, NewEvent } from '../src/store/event-store.port';
import { postgresBinaries, startPostgres } from './support/peers/postgres';

const APPENDERS = 16;
const SECONDS = 5;

interface Round {
  build: string;
  round: number;
  appendsPerSecond: number;
  /** Backends of the database seen active, on average, by what they waited on (`CPU` when nothing). */
  waits: Record<string, number>;
}

const GENESIS = '0'.repeat(64);
const linkHash = (stream: string, revision: number) =>
  createHash('sha256').update(`${stream}\n${revision}`).digest('hex');

/**
 * An event linked to the one before it in its stream (the store refuses a batch that does not chain
 * from the stream's head). Not the ledger's content hash: the store keeps what it is given, and
 * nothing here reads it back, so no hashing cost is measured.
 */
function event(stream: string, index: number): NewEvent {
  return {
    event_id: randomUUID(),
    type: 'BenchAppended',
    data: { index },
    metadata: {
      schema_version: 1,
      recorded_at: new Date().toISOString(),
      actor: 'bench',
      tenant: 'bench',
      operation_ref: 'bench',
      prev_hash: index === 0 ? GENESIS : linkHash(stream, index - 1),
      hash: linkHash(stream, index),
    },
  };
}

async function measure(
  dist: string,
  url: string,
  database: string,
  monitor: Client,
): Promise<Omit<Round, 'build' | 'round'>> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the adapter of the build named on the command line
  const adapter = require(join(dist, 'src/adapters/postgres/postgres-event-store.adapter.js')) as {
    PostgresEventStore: new (options: { connectionString: string; maxConnections: number }) => EventStore;
  };
  const store = new adapter.PostgresEventStore({ connectionString: url, maxConnections: APPENDERS });
  await store.headPosition();
  const seen = new Map<string, number>();
  let samples = 0;
  let sampling = Promise.resolve();
  const sampler = setInterval(() => {
    sampling = sampling
      .then(async () => {
        const { rows } = await monitor.query<{ wait: string; n: string }>(
          `SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') AS wait, count(*) AS n
             FROM pg_stat_activity WHERE datname = $1 AND state = 'active' GROUP BY 1`,
          [database],
        );
        samples += 1;
        for (const row of rows) seen.set(row.wait, (seen.get(row.wait) ?? 0) + Number(row.n));
      })
      .catch(() => undefined);
  }, 100);
  const end = Date.now() + SECONDS * 1000;
  let appends = 0;
  await Promise.all(
    Array.from({ length: APPENDERS }, async (_, appender) => {
      const stream = `bench-${appender}-${randomUUID()}`;
      for (let revision = -1; Date.now() < end; revision++) {
        await store.append(stream, revision, [event(stream, revision + 1)]);
        appends += 1;
      }
    }),
  );
  clearInterval(sampler);
  await sampling;
  await store.close();
  const waits = Object.fromEntries(
    [...seen]
      .sort((a, b) => b[1] - a[1])
      .map(([wait, count]) => [wait, Number((count / Math.max(1, samples)).toFixed(2))]),
  );
  return { appendsPerSecond: appends / SECONDS, waits };
}

async function main(): Promise<void> {
  const rounds = Number(process.argv[2] ?? 3);
  const builds = [resolve(__dirname, '..'), ...process.argv.slice(3).map((dist) => resolve(dist))];
  const found = postgresBinaries((line) => console.log(line));
  if ('skip' in found) {
    console.log(`postgres appends: skipped: ${found.skip}`);
    return;
  }
  const postgres = await startPostgres(found.bin);
  const monitor = new Client({ connectionString: postgres.url('postgres') });
  await monitor.connect();
  const results: Round[] = [];
  try {
    for (let round = 0; round < rounds; round++) {
      for (const [index, dist] of (round % 2 === 0 ? builds : [...builds].reverse()).entries()) {
        const database = `appends_${round}_${index}_${Date.now().toString(36)}`;
        postgres.createDatabase(database);
        const result = { build: dist, round, ...(await measure(dist, postgres.url(database), database, monitor)) };
        results.push(result);
        console.log(JSON.stringify(result));
      }
    }
  } finally {
    await monitor.end();
    postgres.stop();
  }
  for (const dist of builds) {
    const own = results.filter((result) => result.build === dist).map((result) => result.appendsPerSecond);
    console.log(`${dist}: appends/s per round ${own.map((value) => value.toFixed(0)).join(', ')}`);
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
