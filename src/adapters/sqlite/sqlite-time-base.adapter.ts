import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
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
import { toPortError } from './sqlite-errors';

export interface SqliteTimeBaseStoreOptions {
  /** The events file: the base lives beside the log, so every process sharing the log shares it. */
  file: string;
  busyTimeoutMs?: number;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS clock_bases (
  boot_id TEXT    PRIMARY KEY,
  wall_ms INTEGER NOT NULL,
  record  TEXT    NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS clock_heartbeats (
  instance_id TEXT    PRIMARY KEY,
  ledger_ms   INTEGER NOT NULL,
  record      TEXT    NOT NULL
) WITHOUT ROWID;
`;

/**
 * The time base and heartbeats in two tables of the log's SQLite file, on a connection of their
 * own. The base is read and, when missing, written in one BEGIN IMMEDIATE transaction (the file's
 * write lock), so the first process of a boot writes it and every other one reads that.
 */
export class SqliteTimeBaseStore implements TimeBaseStore {
  private readonly db: Database.Database;
  private closed = false;

  static open(options: SqliteTimeBaseStoreOptions): SqliteTimeBaseStore {
    return new SqliteTimeBaseStore(options);
  }

  private constructor(options: SqliteTimeBaseStoreOptions) {
    if (options.file !== ':memory:') mkdirSync(dirname(options.file), { recursive: true });
    try {
      this.db = new Database(options.file, { timeout: options.busyTimeoutMs ?? 5000 });
      this.db.pragma('journal_mode = WAL');
      this.db.exec(SCHEMA);
    } catch (error) {
      throw toPortError(error);
    }
  }

  private run<T>(work: () => T): T {
    if (this.closed) throw new StoreUnavailableError('time base store closed');
    try {
      return this.db.transaction(work).immediate();
    } catch (error) {
      throw toPortError(error);
    }
  }

  private heartbeats(): InstanceHeartbeat[] {
    return this.db
      .prepare<[], { record: string }>('SELECT record FROM clock_heartbeats ORDER BY instance_id')
      .all()
      .map((row) => JSON.parse(row.record) as InstanceHeartbeat);
  }

  async adoptBase(proposed: TimeBase): Promise<TimeBase> {
    return this.run(() => {
      const row = this.db
        .prepare<[string], { record: string }>('SELECT record FROM clock_bases WHERE boot_id = ?')
        .get(proposed.boot_id);
      if (row) return JSON.parse(row.record) as TimeBase;
      const bases = this.db
        .prepare<[], { record: string }>('SELECT record FROM clock_bases')
        .all()
        .map((stored) => JSON.parse(stored.record) as TimeBase);
      const base = raisedBase(proposed, latestBaseMs(bases));
      this.db
        .prepare('INSERT INTO clock_bases (boot_id, wall_ms, record) VALUES (?, ?, ?)')
        .run(base.boot_id, base.wall_ms, JSON.stringify(base));
      this.db
        .prepare(
          'DELETE FROM clock_bases WHERE boot_id NOT IN (SELECT boot_id FROM clock_bases ORDER BY wall_ms DESC LIMIT ?)',
        )
        .run(BASES_KEPT);
      return base;
    });
  }

  async beat(heartbeat: InstanceHeartbeat): Promise<InstanceHeartbeat[]> {
    return this.run(() => {
      this.db
        .prepare(
          'INSERT INTO clock_heartbeats (instance_id, ledger_ms, record) VALUES (?, ?, ?) ON CONFLICT (instance_id) DO UPDATE SET ledger_ms = excluded.ledger_ms, record = excluded.record',
        )
        .run(heartbeat.instance_id, heartbeat.ledger_ms, JSON.stringify(heartbeat));
      const times = this.db
        .prepare<[], { ledger_ms: number }>('SELECT ledger_ms FROM clock_heartbeats')
        .all()
        .map((row) => row.ledger_ms);
      this.db.prepare('DELETE FROM clock_heartbeats WHERE ledger_ms < ?').run(heartbeatCutMs(times));
      return this.heartbeats();
    });
  }

  async leave(instanceId: string): Promise<void> {
    this.run(() => this.db.prepare('DELETE FROM clock_heartbeats WHERE instance_id = ?').run(instanceId));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.db.close();
  }
}
