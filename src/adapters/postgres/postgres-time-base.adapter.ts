import type { Pool, PoolClient } from 'pg';
import { StoreUnavailableError } from '../../store/event-store.port';
import {
  BASES_KEPT,
  HEARTBEAT_RETENTION_MS,
  latestBaseMs,
  raisedBase,
  type InstanceHeartbeat,
  type TimeBase,
  type TimeBaseStore,
} from '../../store/time-base.port';
import { ADVISORY_LOCKS, inTransaction, migrate, openPool, query, type PostgresOptions } from './postgres-database';

export interface PostgresTimeBaseStoreOptions extends PostgresOptions {
  /**
   * `database`: a new boot's base takes its wall time from the database's clock
   * (`clock_timestamp()`), not the host's, so instances on hosts whose clocks disagree still compute
   * one ledger time, the database's (docs/postgres.md, "Time"). `caller` (the default, as the
   * other stores): the proposed base's own wall time.
   */
  wallClock?: 'database' | 'caller';
}

/**
 * The time base and heartbeats in two tables of the log's PostgreSQL database. A new base is written
 * in one transaction under one advisory lock, so the first instance of a boot writes the base and
 * every other one reads that, as the SQLite adapter does under its file's write lock; a heartbeat
 * is one statement under the same lock (`beat`).
 */
export class PostgresTimeBaseStore implements TimeBaseStore {
  private readonly pool: Pool;
  private readonly ready: Promise<void>;
  private closed = false;

  constructor(private readonly options: PostgresTimeBaseStoreOptions) {
    this.pool = openPool({ ...options, maxConnections: options.maxConnections ?? 2 });
    this.ready = migrate(this.pool);
    this.ready.catch(() => undefined);
  }

  private async run<T>(work: (client: PoolClient) => Promise<T>): Promise<T> {
    if (this.closed) throw new StoreUnavailableError('time base store closed');
    await this.ready.catch(() => migrate(this.pool));
    return inTransaction(this.pool, async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [ADVISORY_LOCKS.timeBase]);
      return work(client);
    });
  }

  async adoptBase(proposed: TimeBase): Promise<TimeBase> {
    // The proposal's monotonic reading was taken about now: elapsed time from here dates it.
    const proposedAt = performance.now();
    return this.run(async (client) => {
      const { rows } = await client.query<{ record: string }>(
        'SELECT record FROM ledger_clock_bases WHERE boot_id = $1',
        [proposed.boot_id],
      );
      if (rows[0]) return JSON.parse(rows[0].record) as TimeBase;
      const bases = (await client.query<{ record: string }>('SELECT record FROM ledger_clock_bases')).rows.map(
        (row) => JSON.parse(row.record) as TimeBase,
      );
      const wallMs =
        this.options.wallClock === 'database' ? await databaseWallMs(client, proposedAt) : proposed.wall_ms;
      const base = raisedBase({ ...proposed, wall_ms: wallMs }, latestBaseMs(bases));
      await client.query('INSERT INTO ledger_clock_bases (boot_id, wall_ms, record) VALUES ($1, $2, $3)', [
        base.boot_id,
        base.wall_ms,
        JSON.stringify(base),
      ]);
      await client.query(
        `DELETE FROM ledger_clock_bases WHERE boot_id NOT IN
           (SELECT boot_id FROM ledger_clock_bases ORDER BY wall_ms DESC LIMIT $1)`,
        [BASES_KEPT],
      );
      return base;
    });
  }

  /**
   * One statement, outside any transaction the client holds open: an instance descheduled between
   * the statements of a transaction would sit idle in it holding the time base's lock, queueing
   * every other heartbeat and holding back the log's high-water mark (docs/postgres.md, "Appends
   * and positions"). The lock is taken inside the statement, for its transaction alone, and held
   * only while the server runs it: heartbeats and new bases still change the tables one at a time.
   */
  async beat(heartbeat: InstanceHeartbeat): Promise<InstanceHeartbeat[]> {
    if (this.closed) throw new StoreUnavailableError('time base store closed');
    await this.ready.catch(() => migrate(this.pool));
    const rows = await query<{ record: string }>(this.pool, BEAT, [
      heartbeat.instance_id,
      heartbeat.ledger_ms,
      JSON.stringify(heartbeat),
      HEARTBEAT_RETENTION_MS,
      ADVISORY_LOCKS.timeBase,
    ]);
    return rows.map((row) => JSON.parse(row.record) as InstanceHeartbeat);
  }

  async leave(instanceId: string): Promise<void> {
    if (this.closed) throw new StoreUnavailableError('time base store closed');
    await query(this.pool, 'DELETE FROM ledger_clock_heartbeats WHERE instance_id = $1', [instanceId]);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end().catch(() => undefined);
  }
}

/**
 * A heartbeat in one statement ($1 instance, $2 its ledger time, $3 its record, $4 the retention,
 * $5 the time base's lock): `heartbeatCutMs` over the stored heartbeats with this one in place of
 * its last (the retention before the second newest, else the newest), this one written unless it
 * falls below the cut, every other below it deleted, and the rest answered, ordered by instance.
 * Every write reads the one row of `cut`, which is read from `locked`: nothing is written before
 * the lock is held. No row is written twice in the statement, whose parts read one snapshot, not
 * each other's changes: a heartbeat that waited on the lock reads the heartbeats as they stood when
 * it began, and writes after the one it waited on.
 */
const BEAT = `
  WITH locked AS (
    SELECT pg_advisory_xact_lock($5::bigint)
  ), others AS (
    SELECT instance_id, ledger_ms, record FROM ledger_clock_heartbeats WHERE instance_id <> $1
  ), everyone AS (
    SELECT $1::text AS instance_id, $2::bigint AS ledger_ms, $3::text AS record
    UNION ALL SELECT instance_id, ledger_ms, record FROM others
  ), cut AS (
    SELECT coalesce(
      (SELECT ledger_ms FROM everyone ORDER BY ledger_ms DESC OFFSET 1 LIMIT 1),
      $2::bigint
    ) - $4::bigint AS ms
    FROM locked
  ), written AS (
    INSERT INTO ledger_clock_heartbeats (instance_id, ledger_ms, record)
    SELECT $1, $2, $3 FROM cut WHERE $2::bigint >= cut.ms
    ON CONFLICT (instance_id) DO UPDATE SET ledger_ms = excluded.ledger_ms, record = excluded.record
  ), dropped AS (
    DELETE FROM ledger_clock_heartbeats USING cut
    WHERE CASE WHEN instance_id = $1 THEN $2::bigint ELSE ledger_ms END < cut.ms
  )
  SELECT record FROM everyone, cut WHERE everyone.ledger_ms >= cut.ms ORDER BY instance_id`;

/**
 * The database's clock as it stood when the caller's proposal was made (at `proposedAt`, by
 * performance.now()): its reading, taken at the midpoint of the round trip, less the time elapsed
 * since the proposal. Off by at most half the round trip.
 */
async function databaseWallMs(client: PoolClient, proposedAt: number): Promise<number> {
  const sent = performance.now();
  const { rows } = await client.query<{ now_ms: number }>(
    'SELECT extract(epoch FROM clock_timestamp())::float8 * 1000 AS now_ms',
  );
  const received = performance.now();
  return Math.round(rows[0].now_ms - ((sent + received) / 2 - proposedAt));
}
