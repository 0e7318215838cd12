import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { StoreUnavailableError } from '../../store/event-store.port';
import {
  leaseOperations,
  type AcquireRequest,
  type AcquireResult,
  type LeaseRecord,
  type LeaseStore,
} from '../../store/lease-store.port';
import { toPortError } from './sqlite-errors';

export interface SqliteLeaseStoreOptions {
  /** The events file: leases live in a table beside the log, so one file is the whole store. */
  file: string;
  busyTimeoutMs?: number;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS leases (
  key           TEXT    PRIMARY KEY,
  expires_at_ms INTEGER NOT NULL,
  record        TEXT    NOT NULL
) WITHOUT ROWID;
`;

const IN_CHUNK = 500;

/**
 * Leases in the SQLite file of the log, on a connection of their own. Every change is read and
 * written inside one BEGIN IMMEDIATE transaction, which takes the file's write lock first: two
 * processes sharing the file serialise there, so the compare-and-set holds across them. Leases
 * are not facts: they are not in the log, nothing folds them, and losing the table loses only who
 * holds what now (every item is free again), never a decision.
 */
export class SqliteLeaseStore implements LeaseStore {
  private readonly db: Database.Database;
  private readonly statements: ReturnType<SqliteLeaseStore['prepare']>;
  private closed = false;

  static open(options: SqliteLeaseStoreOptions): SqliteLeaseStore {
    return new SqliteLeaseStore(options);
  }

  private constructor(options: SqliteLeaseStoreOptions) {
    if (options.file !== ':memory:') mkdirSync(dirname(options.file), { recursive: true });
    try {
      this.db = new Database(options.file, { timeout: options.busyTimeoutMs ?? 5000 });
      this.db.pragma('journal_mode = WAL');
      // A lease lost to a power cut only frees its item early; the dispatch gate still holds.
      this.db.pragma('synchronous = NORMAL');
      this.db.exec(SCHEMA);
      this.statements = this.prepare();
    } catch (error) {
      throw toPortError(error);
    }
  }

  /**
   * Prepared once, as is the transaction: preparing per call (a statement, a transaction function)
   * was most of the lease store's CPU under the work feed's load (docs/performance.md, figure 8).
   */
  private prepare() {
    const get = this.db.prepare<[string], { record: string }>('SELECT record FROM leases WHERE key = ?');
    const put = this.db.prepare<[string, number, string]>(
      'INSERT INTO leases (key, expires_at_ms, record) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET expires_at_ms = excluded.expires_at_ms, record = excluded.record',
    );
    const change = this.db.transaction(
      (key: string, decide: (current: LeaseRecord | undefined) => { write?: LeaseRecord; answer: unknown }) => {
        const row = get.get(key);
        const current = row ? (JSON.parse(row.record) as LeaseRecord) : undefined;
        const { write, answer } = decide(current);
        if (write) put.run(key, write.expires_at_ms, JSON.stringify(write));
        return answer;
      },
    );
    return {
      get,
      put,
      change,
      getIn: new Map<number, Database.Statement<string[], { key: string; record: string }>>(),
    };
  }

  /** `SELECT … WHERE key IN (?, …)` for `count` keys, prepared once per count. */
  private selectIn(count: number): Database.Statement<string[], { key: string; record: string }> {
    let statement = this.statements.getIn.get(count);
    if (!statement) {
      statement = this.db.prepare<string[], { key: string; record: string }>(
        `SELECT key, record FROM leases WHERE key IN (${Array.from({ length: count }, () => '?').join(',')})`,
      );
      this.statements.getIn.set(count, statement);
    }
    return statement;
  }

  /** Read, decide, write, under the write lock (BEGIN IMMEDIATE): the compare-and-set. */
  private change<T>(key: string, decide: (current: LeaseRecord | undefined) => { write?: LeaseRecord; answer: T }): T {
    if (this.closed) throw new StoreUnavailableError('lease store closed');
    try {
      return this.statements.change.immediate(key, decide) as T;
    } catch (error) {
      throw toPortError(error);
    }
  }

  private readonly operations = leaseOperations(async (key, decide) => this.change(key, decide));

  acquire(request: AcquireRequest): Promise<AcquireResult> {
    return this.operations.acquire(request);
  }

  renew(key: string, leaseId: string, nowMs: number, ttlMs: number): Promise<LeaseRecord | undefined> {
    return this.operations.renew(key, leaseId, nowMs, ttlMs);
  }

  release(key: string, leaseId: string, nowMs: number, holdMs?: number): Promise<boolean> {
    return this.operations.release(key, leaseId, nowMs, holdMs);
  }

  async getMany(keys: readonly string[]): Promise<Map<string, LeaseRecord>> {
    if (this.closed) throw new StoreUnavailableError('lease store closed');
    const found = new Map<string, LeaseRecord>();
    try {
      if (keys.length === 1) {
        const row = this.statements.get.get(keys[0]);
        if (row) found.set(keys[0], JSON.parse(row.record) as LeaseRecord);
        return found;
      }
      for (let start = 0; start < keys.length; start += IN_CHUNK) {
        const chunk = keys.slice(start, start + IN_CHUNK);
        for (const row of this.selectIn(chunk.length).all(...chunk))
          found.set(row.key, JSON.parse(row.record) as LeaseRecord);
      }
    } catch (error) {
      throw toPortError(error);
    }
    return found;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.db.close();
  }
}
