import type { Pool, PoolClient } from 'pg';
import { StoreUnavailableError } from '../../store/event-store.port';
import {
  BASES_KEPT,
  heartbeatCutMs,
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
 * The time base and heartbeats in two tables of the log's PostgreSQL database. Each change runs in
 * one transaction under one advisory lock, so the first instance of a boot writes the base and
 * every other one reads that, as the SQLite adapter does under its file's write lock.
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

  async beat(heartbeat: InstanceHeartbeat): Promise<InstanceHeartbeat[]> {
    return this.run(async (client) => {
      await client.query(
        `INSERT INTO ledger_clock_heartbeats (instance_id, ledger_ms, record) VALUES ($1, $2, $3)
         ON CONFLICT (instance_id) DO UPDATE SET ledger_ms = excluded.ledger_ms, record = excluded.record`,
        [heartbeat.instance_id, heartbeat.ledger_ms, JSON.stringify(heartbeat)],
      );
      const times = (await client.query<{ ledger_ms: string }>('SELECT ledger_ms FROM ledger_clock_heartbeats')).rows;
      await client.query('DELETE FROM ledger_clock_heartbeats WHERE ledger_ms < $1', [
        heartbeatCutMs(times.map((row) => Number(row.ledger_ms))),
      ]);
      const kept = await client.query<{ record: string }>(
        'SELECT record FROM ledger_clock_heartbeats ORDER BY instance_id',
      );
      return kept.rows.map((row) => JSON.parse(row.record) as InstanceHeartbeat);
    });
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
