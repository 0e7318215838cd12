import Database from 'better-sqlite3';
import { EventEmitter } from 'node:events';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import {
  NO_STREAM,
  RevisionConflictError,
  StoreUnavailableError,
  type AppendResult,
  type EventStore,
  type NewEvent,
  type ReadAllOptions,
  type StoreHealth,
  type StoredEvent,
  type SubscribeOptions,
  type Subscription,
  type SubscriptionHandlers,
} from '../event-store.port';
import { toPortError } from './sqlite-errors';

export interface SqliteEventStoreOptions {
  /** A file path, or ':memory:'. */
  file: string;
  /**
   * Concurrent appends share one transaction and one fsync (on by default). Each append is still
   * checked and applied on its own savepoint; its promise settles only after the shared COMMIT.
   */
  groupCommit?: boolean;
  /** Upper bound of appends in one group, so one commit never holds the write lock for long. */
  maxGroupSize?: number;
  /** How often a live subscription looks for events written by another process. */
  pollIntervalMs?: number;
  busyTimeoutMs?: number;
  /** Called after each commit with the number of appends it carried (for metrics). */
  onGroupCommitted?: (appends: number, events: number) => void;
  /**
   * Fault injection for tests: receives a way to run a PRAGMA on this store's own connection.
   * `max_page_count` (a full disk) and `query_only` (a read-only database) hold per connection,
   * so a second connection to the same file cannot impose them on this one.
   */
  exposePragma?: (pragma: (statement: string) => unknown) => void;
}

interface EventRow {
  position: number;
  stream: string;
  revision: number;
  event_id: string;
  type: string;
  data: string;
  metadata: string;
}

interface PendingAppend {
  stream: string;
  expectedRevision: number;
  events: NewEvent[];
  resolve(result: AppendResult): void;
  reject(error: Error): void;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS events (
  position INTEGER PRIMARY KEY AUTOINCREMENT,
  stream   TEXT    NOT NULL,
  revision INTEGER NOT NULL,
  event_id TEXT    NOT NULL,
  type     TEXT    NOT NULL,
  data     TEXT    NOT NULL,
  metadata TEXT    NOT NULL,
  UNIQUE (stream, revision),
  UNIQUE (stream, event_id)
);
`;

function toStored(row: EventRow): StoredEvent {
  return {
    stream: row.stream,
    revision: row.revision,
    position: row.position,
    event_id: row.event_id,
    type: row.type,
    data: JSON.parse(row.data),
    metadata: JSON.parse(row.metadata),
  };
}

/**
 * The embedded default store: one SQLite file in WAL mode with synchronous=FULL, so a COMMIT has
 * reached the disk before any append is acknowledged (an acknowledged fact survives a kill or a
 * power cut). Writers take the lock with BEGIN IMMEDIATE, so two processes on one file serialise
 * their appends and the expected-revision check is made under the lock.
 */
export class SqliteEventStore implements EventStore {
  private readonly db: Database.Database;
  private readonly appended = new EventEmitter();
  private readonly pending: PendingAppend[] = [];
  private flushScheduled = false;
  private closed = false;
  private readonly statements: ReturnType<SqliteEventStore['prepare']>;

  static open(options: SqliteEventStoreOptions): SqliteEventStore {
    return new SqliteEventStore(options);
  }

  private constructor(private readonly options: SqliteEventStoreOptions) {
    if (options.file !== ':memory:') mkdirSync(dirname(options.file), { recursive: true });
    try {
      this.db = new Database(options.file, { timeout: options.busyTimeoutMs ?? 5000 });
      this.db.pragma('journal_mode = WAL');
      this.db.pragma('synchronous = FULL');
      this.db.pragma('foreign_keys = ON');
      this.db.exec(SCHEMA);
      this.statements = this.prepare();
    } catch (error) {
      throw toPortError(error);
    }
    this.appended.setMaxListeners(0);
    options.exposePragma?.((statement) => this.db.pragma(statement));
  }

  private prepare() {
    const db = this.db;
    return {
      streamRevision: db.prepare<[string], { revision: number | null }>(
        'SELECT MAX(revision) AS revision FROM events WHERE stream = ?',
      ),
      eventsFrom: db.prepare<[string, number, number], { event_id: string; position: number; revision: number }>(
        'SELECT event_id, position, revision FROM events WHERE stream = ? AND revision >= ? ORDER BY revision LIMIT ?',
      ),
      insert: db.prepare<[string, number, string, string, string, string]>(
        'INSERT INTO events (stream, revision, event_id, type, data, metadata) VALUES (?, ?, ?, ?, ?, ?)',
      ),
      readStream: db.prepare<[string], EventRow>('SELECT * FROM events WHERE stream = ? ORDER BY revision'),
      readAll: db.prepare<[number, number], EventRow>('SELECT * FROM events WHERE position > ? ORDER BY position LIMIT ?'),
      readAllPrefixed: db.prepare<[number, number, string, number], EventRow>(
        'SELECT * FROM events WHERE position > ? AND substr(stream, 1, ?) = ? ORDER BY position LIMIT ?',
      ),
      head: db.prepare<[], { position: number | null }>('SELECT MAX(position) AS position FROM events'),
      begin: db.prepare('BEGIN IMMEDIATE'),
      commit: db.prepare('COMMIT'),
      rollback: db.prepare('ROLLBACK'),
      savepoint: db.prepare('SAVEPOINT append_one'),
      release: db.prepare('RELEASE append_one'),
      rollbackTo: db.prepare('ROLLBACK TO append_one'),
    };
  }

  append(stream: string, expectedRevision: number, events: NewEvent[]): Promise<AppendResult> {
    if (this.closed) return Promise.reject(new StoreUnavailableError('store closed'));
    if (events.length === 0) return Promise.reject(new Error('append needs at least one event'));
    return new Promise<AppendResult>((resolve, reject) => {
      this.pending.push({ stream, expectedRevision, events, resolve, reject });
      if (this.options.groupCommit === false) {
        this.flush();
      } else if (!this.flushScheduled) {
        // setImmediate, not a timer: appends that arrive in the same turn of the event loop share a
        // commit, and a lone append waits no longer than one turn.
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.flushScheduled = false;
    while (this.pending.length > 0) {
      const group = this.pending.splice(0, this.options.maxGroupSize ?? 256);
      this.commitGroup(group);
    }
  }

  private commitGroup(group: PendingAppend[]): void {
    const outcomes: Array<{ ok: true; result: AppendResult } | { ok: false; error: Error }> = [];
    const s = this.statements;
    try {
      s.begin.run();
    } catch (error) {
      const portError = toPortError(error);
      for (const append of group) append.reject(portError);
      return;
    }
    let eventCount = 0;
    try {
      for (const append of group) {
        s.savepoint.run();
        try {
          outcomes.push({ ok: true, result: this.applyOne(append) });
          s.release.run();
          eventCount += append.events.length;
        } catch (error) {
          if (!this.db.inTransaction) {
            // SQLite rolled back the whole transaction, savepoints and all (SQLITE_FULL, an I/O
            // error): nothing of the group stands, so every append of it fails with this error.
            const portError = toPortError(error);
            for (const each of group) each.reject(portError);
            return;
          }
          s.rollbackTo.run();
          s.release.run();
          outcomes.push({ ok: false, error: toPortError(error, append.stream, append.expectedRevision) });
        }
      }
      s.commit.run();
    } catch (error) {
      // The COMMIT (or a savepoint) failed: nothing of the group is durable, so nothing is acknowledged.
      try {
        if (this.db.inTransaction) s.rollback.run();
      } catch {
        /* the connection reports the original error below */
      }
      const portError = toPortError(error);
      for (const append of group) append.reject(portError);
      return;
    }
    this.options.onGroupCommitted?.(group.length, eventCount);
    group.forEach((append, index) => {
      const outcome = outcomes[index];
      if (outcome.ok) append.resolve(outcome.result);
      else append.reject(outcome.error);
    });
    if (eventCount > 0) this.appended.emit('appended');
  }

  private applyOne({ stream, expectedRevision, events }: PendingAppend): AppendResult {
    const s = this.statements;
    const actual = s.streamRevision.get(stream)?.revision ?? NO_STREAM;
    if (actual !== expectedRevision) {
      const original = this.sameBatchAlreadyAppended(stream, expectedRevision, events);
      if (original) return original;
      throw new RevisionConflictError(stream, expectedRevision, actual);
    }
    let revision = expectedRevision;
    let position = 0;
    for (const event of events) {
      revision += 1;
      const info = s.insert.run(
        stream,
        revision,
        event.event_id,
        event.type,
        JSON.stringify(event.data),
        JSON.stringify(event.metadata),
      );
      position = Number(info.lastInsertRowid);
    }
    return { revision, position };
  }

  /** Idempotent re-append: the same ids already stand right after the expected revision. */
  private sameBatchAlreadyAppended(stream: string, expectedRevision: number, events: NewEvent[]): AppendResult | undefined {
    const rows = this.statements.eventsFrom.all(stream, expectedRevision + 1, events.length);
    if (rows.length !== events.length) return undefined;
    if (!rows.every((row, index) => row.event_id === events[index].event_id)) return undefined;
    const last = rows[rows.length - 1];
    return { revision: last.revision, position: last.position };
  }

  async readStream(stream: string): Promise<StoredEvent[]> {
    try {
      return this.statements.readStream.all(stream).map(toStored);
    } catch (error) {
      throw toPortError(error);
    }
  }

  async readAll({ after, limit, streamPrefix }: ReadAllOptions): Promise<StoredEvent[]> {
    try {
      const rows = streamPrefix
        ? this.statements.readAllPrefixed.all(after, streamPrefix.length, streamPrefix, limit)
        : this.statements.readAll.all(after, limit);
      return rows.map(toStored);
    } catch (error) {
      throw toPortError(error);
    }
  }

  subscribe(options: SubscribeOptions, handlers: SubscriptionHandlers): Subscription {
    let active = true;
    let position = options.after;
    let wake: (() => void) | undefined;
    const notify = () => wake?.();
    this.appended.on('appended', notify);
    const pollMs = this.options.pollIntervalMs ?? 200;
    const waitForMore = () =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(done, pollMs);
        function done() {
          clearTimeout(timer);
          wake = undefined;
          resolve();
        }
        wake = done;
      });
    const loop = (async () => {
      while (active) {
        let batch: StoredEvent[];
        try {
          batch = await this.readAll({ after: position, limit: 500, streamPrefix: options.streamPrefix });
        } catch (error) {
          if (!active) return;
          // A busy or briefly unavailable file: try again on the next poll rather than end the feed.
          if (error instanceof StoreUnavailableError && !this.closed) {
            await waitForMore();
            continue;
          }
          handlers.onError?.(error as Error);
          return;
        }
        if (batch.length === 0) {
          await waitForMore();
          continue;
        }
        try {
          await handlers.onEvents(batch);
        } catch (error) {
          if (active) handlers.onError?.(error as Error);
          return;
        }
        position = batch[batch.length - 1].position;
      }
    })();
    return {
      close: async () => {
        active = false;
        this.appended.off('appended', notify);
        wake?.();
        await loop;
      },
    };
  }

  async headPosition(): Promise<number> {
    try {
      return this.statements.head.get()?.position ?? 0;
    } catch (error) {
      throw toPortError(error);
    }
  }

  async health(): Promise<StoreHealth> {
    if (this.closed) return { ok: false, detail: 'store closed' };
    try {
      this.db.prepare('SELECT 1').get();
      return { ok: true };
    } catch (error) {
      return { ok: false, detail: toPortError(error).message };
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    // Appends already queued are committed first: closing never drops an accepted append.
    this.flush();
    this.closed = true;
    this.appended.emit('appended');
    this.db.close();
  }
}
