import Database from 'better-sqlite3';
import { EventEmitter } from 'node:events';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { GENESIS_HASH, nextLogHash, signAnchor } from '../../integrity/hash-chain';
import {
  type AnchoredStream,
  type EventMetadata,
  type FoldStart,
  type FoldStartOptions,
  type KeptSnapshot,
  NO_STREAM,
  RevisionConflictError,
  StoreIntegrityError,
  StoreUnavailableError,
  type AppendOptions,
  type AppendResult,
  type IndexedStream,
  type JsonObject,
  type LogAnchor,
  type StreamHead,
  type StreamIndexer,
  type EventStore,
  type NewEvent,
  type ReadAllOptions,
  type StoreHealth,
  type StoredEvent,
  type SubscribeOptions,
  type Subscription,
  type SubscriptionHandlers,
} from '../../store/event-store.port';
import { isEventMetadata } from '../../store/event-metadata';
import { toPortError } from './sqlite-errors';
import { followLog } from '../follow-log';

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
  /** Signs the log anchor (LEDGER_ANCHOR_KEY); without it the anchor is a plain hash chain. */
  anchorKey?: string;
  /** Told once when a log written before anchors existed is anchored as it stands. */
  onLogAdopted?: (events: number) => void;
  /** Files each stream of such a log in the index, as the application would have on append. */
  indexer?: StreamIndexer;
  /** Called after each commit with the number of appends it carried (for metrics). */
  onGroupCommitted?: (appends: number, events: number) => void;
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
  options: AppendOptions;
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

/**
 * A submit's event ids looked up in their stream (the duplicate check of every decision). Ordered by
 * `revision + 0`, not `revision`: ordering by the bare column lets SQLite walk the stream's
 * (stream, revision) index to skip a sort, reading every event of the stream, where the
 * (stream, event_id) index finds the few asked for; a decision must not cost its step's length
 * (docs/scaling.md).
 */
export const READ_EVENTS_BY_ID_SQL =
  'SELECT * FROM events WHERE stream = ? AND event_id IN (SELECT value FROM json_each(?)) ORDER BY revision + 0';

/**
 * The anchors (docs/reliability.md, "A log whose every loss is detectable"), written in the same
 * transaction as the events: each stream's head, with the application's index entry for it, and
 * one row anchoring the whole log. `user_version` says they exist, so a file whose anchor tables
 * were dropped is not mistaken for one written before anchors.
 */
const ANCHOR_SCHEMA = `
CREATE TABLE IF NOT EXISTS stream_heads (
  stream     TEXT    PRIMARY KEY,
  revision   INTEGER NOT NULL,
  hash       TEXT    NOT NULL,
  position   INTEGER NOT NULL,
  index_key  TEXT,
  index_data TEXT
);
CREATE INDEX IF NOT EXISTS stream_heads_by_index_key ON stream_heads (index_key) WHERE index_key IS NOT NULL;
CREATE TABLE IF NOT EXISTS log_anchor (
  id        INTEGER PRIMARY KEY CHECK (id = 1),
  position  INTEGER NOT NULL,
  events    INTEGER NOT NULL,
  log_hash  TEXT    NOT NULL,
  signature TEXT
);
`;
const ANCHORED_SCHEMA_VERSION = 2;

/**
 * States the application folded, kept beside their stream in the transaction of the append that
 * reached them (AppendOptions.snapshot): a cache of the log that a reader checks against it.
 */
const SNAPSHOT_SCHEMA = `
CREATE TABLE IF NOT EXISTS stream_snapshots (
  stream       TEXT    NOT NULL,
  fold_version TEXT    NOT NULL,
  revision     INTEGER NOT NULL,
  hash         TEXT    NOT NULL,
  state        TEXT    NOT NULL,
  PRIMARY KEY (stream, fold_version, revision)
);
`;

interface SnapshotRow {
  stream: string;
  fold_version: string;
  revision: number;
  hash: string;
  state: string;
}

interface HeadRow {
  stream: string;
  revision: number;
  hash: string;
  position: number;
  index_key: string | null;
  index_data: string | null;
}

interface AnchorRow {
  position: number;
  events: number;
  log_hash: string;
  signature: string | null;
}

/** A row that does not decode is the store's fault, never the caller's bad JSON. */
function decodeJson(row: EventRow, column: 'data' | 'metadata'): JsonObject {
  let value: unknown;
  try {
    value = JSON.parse(row[column]);
  } catch {
    throw new StoreIntegrityError(
      row.stream,
      `the ${column} of the event at revision ${row.revision} (position ${row.position}) is not valid JSON`,
      row.position,
    );
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new StoreIntegrityError(
      row.stream,
      `the ${column} of the event at revision ${row.revision} (position ${row.position}) is not a JSON object`,
      row.position,
    );
  }
  return value as JsonObject;
}

function toStored(row: EventRow): StoredEvent {
  return {
    stream: row.stream,
    revision: row.revision,
    position: row.position,
    event_id: row.event_id,
    type: row.type,
    data: decodeJson(row, 'data'),
    metadata: decodeMetadata(row),
  };
}

function decodeMetadata(row: EventRow): EventMetadata {
  const metadata = decodeJson(row, 'metadata');
  if (!isEventMetadata(metadata)) {
    throw new StoreIntegrityError(
      row.stream,
      `the metadata of the event at revision ${row.revision} (position ${row.position}) lacks the fields the ledger writes`,
      row.position,
    );
  }
  return metadata;
}

function toSnapshot(row: SnapshotRow): KeptSnapshot {
  let state: unknown;
  try {
    state = JSON.parse(row.state);
  } catch {
    state = undefined;
  }
  if (state === null || typeof state !== 'object' || Array.isArray(state))
    throw new StoreIntegrityError(row.stream, `the snapshot at revision ${row.revision} is not a JSON object`);
  return { fold_version: row.fold_version, revision: row.revision, hash: row.hash, state: state as JsonObject };
}

function toHead(row: HeadRow): StreamHead {
  return { stream: row.stream, revision: row.revision, hash: row.hash, position: row.position };
}

function toAnchor(row: AnchorRow): LogAnchor {
  return {
    position: row.position,
    events: row.events,
    log_hash: row.log_hash,
    ...(row.signature ? { signature: row.signature } : {}),
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
  private readonly pendingSnapshots: Array<{ stream: string; snapshot: KeptSnapshot; settle(): void }> = [];
  private flushScheduled = false;
  private closed = false;
  private readonly statements: ReturnType<SqliteEventStore['prepare']>;
  private decoded = 0;

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
      this.db.exec(SNAPSHOT_SCHEMA);
      const adopt = this.createAnchors();
      this.statements = this.prepare();
      if (adopt) this.adoptUnanchoredLog();
    } catch (error) {
      throw toPortError(error);
    }
    this.appended.setMaxListeners(0);
  }

  /**
   * Creates the anchor tables; answers true when the file holds a log written before anchors
   * existed, which is then anchored as it stands (its past is trusted on first use, and said so).
   */
  private createAnchors(): boolean {
    const version = this.db.pragma('user_version', { simple: true }) as number;
    const hadEvents = this.db.prepare('SELECT 1 FROM events LIMIT 1').get() !== undefined;
    const tables = this.db
      .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('stream_heads', 'log_anchor')")
      .all();
    // Anchors that were kept and are gone are recreated empty, never re-adopted from the log as it
    // now stands: every stream then lacks its head and the log its anchor, which verify reports
    // and every append to an existing stream refuses.
    if (version >= ANCHORED_SCHEMA_VERSION && tables.length < 2) {
      this.db.exec(ANCHOR_SCHEMA);
      return false;
    }
    this.db.exec(ANCHOR_SCHEMA);
    if (version < ANCHORED_SCHEMA_VERSION) {
      this.db.pragma(`user_version = ${ANCHORED_SCHEMA_VERSION}`);
      return hadEvents;
    }
    return false;
  }

  /** One pass in log order: the log chain, each stream's head and, given an indexer, its index entry. */
  private adoptUnanchoredLog(): void {
    const page = this.db.prepare<[number], EventRow>(
      'SELECT * FROM events WHERE position > ? ORDER BY position LIMIT 10000',
    );
    const indexer = this.options.indexer;
    const streams = new Map<string, { revision: number; hash: string; position: number; folded: unknown }>();
    let logHash = GENESIS_HASH;
    let events = 0;
    let position = 0;
    this.db.transaction(() => {
      // In pages, not one open cursor: the heads and the anchor are written in the same transaction.
      for (let rows = page.all(0); rows.length > 0; rows = page.all(position)) {
        for (const row of rows) {
          let hash = '';
          let stored: StoredEvent | undefined;
          try {
            stored = toStored(row);
            hash = String(stored.metadata.hash ?? '');
          } catch {
            // An undecodable row is anchored as it stands: the audit reports it.
          }
          logHash = nextLogHash(logHash, { stream: row.stream, revision: row.revision, hash });
          const previous = streams.get(row.stream);
          let folded = previous ? previous.folded : indexer?.start();
          if (indexer && stored) folded = indexer.add(folded, stored);
          streams.set(row.stream, { revision: row.revision, hash, position: row.position, folded });
          events += 1;
          position = row.position;
        }
      }
      for (const [stream, head] of streams) {
        const entry = indexer?.entry(head.folded);
        this.statements.upsertHead.run(
          stream,
          head.revision,
          head.hash,
          head.position,
          entry?.key ?? null,
          entry ? JSON.stringify(entry.data) : null,
        );
      }
      this.writeAnchor({ position, events, log_hash: logHash });
    })();
    this.options.onLogAdopted?.(events);
  }

  private writeAnchor(anchor: Omit<LogAnchor, 'signature'>): void {
    const signature = this.options.anchorKey ? signAnchor(this.options.anchorKey, anchor) : null;
    this.statements.upsertAnchor.run(anchor.position, anchor.events, anchor.log_hash, signature);
  }

  private prepare() {
    const db = this.db;
    return {
      streamHead: db.prepare<[string], HeadRow>('SELECT * FROM stream_heads WHERE stream = ?'),
      headsUnder: db.prepare<[number, string], HeadRow>(
        'SELECT * FROM stream_heads WHERE substr(stream, 1, ?) = ? ORDER BY stream',
      ),
      headsPage: db.prepare<[string, number, string, number], HeadRow>(
        'SELECT * FROM stream_heads WHERE stream > ? AND substr(stream, 1, ?) = ? ORDER BY stream LIMIT ?',
      ),
      upsertHead: db.prepare<[string, number, string, number, string | null, string | null]>(
        `INSERT INTO stream_heads (stream, revision, hash, position, index_key, index_data) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (stream) DO UPDATE SET revision = excluded.revision, hash = excluded.hash, position = excluded.position,
           index_key = COALESCE(excluded.index_key, stream_heads.index_key), index_data = COALESCE(excluded.index_data, stream_heads.index_data)`,
      ),
      anchor: db.prepare<[], AnchorRow>('SELECT position, events, log_hash, signature FROM log_anchor WHERE id = 1'),
      upsertAnchor: db.prepare<[number, number, string, string | null]>(
        `INSERT INTO log_anchor (id, position, events, log_hash, signature) VALUES (1, ?, ?, ?, ?)
         ON CONFLICT (id) DO UPDATE SET position = excluded.position, events = excluded.events, log_hash = excluded.log_hash, signature = excluded.signature`,
      ),
      lastEvent: db.prepare<[string], { revision: number; position: number; metadata: string }>(
        'SELECT revision, position, metadata FROM events WHERE stream = ? ORDER BY revision DESC LIMIT 1',
      ),
      eventsFrom: db.prepare<[string, number, number], { event_id: string; position: number; revision: number }>(
        'SELECT event_id, position, revision FROM events WHERE stream = ? AND revision >= ? ORDER BY revision LIMIT ?',
      ),
      insert: db.prepare<[string, number, string, string, string, string]>(
        'INSERT INTO events (stream, revision, event_id, type, data, metadata) VALUES (?, ?, ?, ?, ?, ?)',
      ),
      readStream: db.prepare<[string], EventRow>('SELECT * FROM events WHERE stream = ? ORDER BY revision'),
      readRange: db.prepare<[string, number, number, number], EventRow>(
        'SELECT * FROM events WHERE stream = ? AND revision >= ? AND revision <= ? ORDER BY revision LIMIT ?',
      ),
      readByIds: db.prepare<[string, string], EventRow>(READ_EVENTS_BY_ID_SQL),
      snapshotAtOrBefore: db.prepare<[string, string, number], SnapshotRow>(
        'SELECT * FROM stream_snapshots WHERE stream = ? AND fold_version = ? AND revision <= ? ORDER BY revision DESC LIMIT 1',
      ),
      keepSnapshotAtHash: db.prepare<[string, string, number, string, string, string, number, string]>(
        `INSERT OR REPLACE INTO stream_snapshots (stream, fold_version, revision, hash, state)
         SELECT ?, ?, ?, ?, ? WHERE EXISTS (
           SELECT 1 FROM events WHERE stream = ? AND revision = ? AND json_extract(metadata, '$.hash') = ?)`,
      ),
      insertSnapshot: db.prepare<[string, string, number, string, string]>(
        'INSERT OR REPLACE INTO stream_snapshots (stream, fold_version, revision, hash, state) VALUES (?, ?, ?, ?, ?)',
      ),
      readAll: db.prepare<[number, number], EventRow>(
        'SELECT * FROM events WHERE position > ? ORDER BY position LIMIT ?',
      ),
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

  append(
    stream: string,
    expectedRevision: number,
    events: NewEvent[],
    options: AppendOptions = {},
  ): Promise<AppendResult> {
    if (this.closed) return Promise.reject(new StoreUnavailableError('store closed'));
    if (events.length === 0) return Promise.reject(new Error('append needs at least one event'));
    return new Promise<AppendResult>((resolve, reject) => {
      this.pending.push({ stream, expectedRevision, events, options, resolve, reject });
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
    if (this.pendingSnapshots.length > 0) this.writeSnapshots(this.pendingSnapshots.splice(0));
  }

  /** After the appends of the turn, in one transaction: each kept only while its hash is still the log's. */
  private writeSnapshots(kept: Array<{ stream: string; snapshot: KeptSnapshot; settle(): void }>): void {
    try {
      this.db.transaction(() => {
        for (const { stream, snapshot } of kept) {
          const { fold_version, revision, hash, state } = snapshot;
          this.statements.keepSnapshotAtHash.run(
            stream,
            fold_version,
            revision,
            hash,
            JSON.stringify(state),
            stream,
            revision,
            hash,
          );
        }
      })();
    } catch {
      // A cache of the log: when it cannot be written now (a busy file), the next read or append keeps one.
    }
    for (const { settle } of kept) settle();
  }

  keepSnapshot(stream: string, snapshot: KeptSnapshot): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise<void>((settle) => {
      this.pendingSnapshots.push({ stream, snapshot, settle });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => this.flush());
      }
    });
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
    let reached: number;
    try {
      // Read under the write lock: another process on the file may have moved the anchor.
      const stored = s.anchor.get();
      let anchor: Omit<LogAnchor, 'signature'> = stored
        ? toAnchor(stored)
        : { position: 0, events: 0, log_hash: GENESIS_HASH };
      for (const append of group) {
        s.savepoint.run();
        try {
          const applied = this.applyOne(append, anchor);
          outcomes.push({ ok: true, result: applied.result });
          s.release.run();
          anchor = applied.anchor;
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
      if (eventCount > 0) this.writeAnchor(anchor);
      reached = anchor.position;
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
    if (eventCount > 0) this.appended.emit('appended', reached);
  }

  private applyOne(
    { stream, expectedRevision, events, options }: PendingAppend,
    anchor: Omit<LogAnchor, 'signature'>,
  ): { result: AppendResult; anchor: Omit<LogAnchor, 'signature'> } {
    const s = this.statements;
    const head = this.verifiedHead(stream);
    const actual = head?.revision ?? NO_STREAM;
    if (actual !== expectedRevision) {
      const original = this.sameBatchAlreadyAppended(stream, expectedRevision, events);
      if (original) return { result: original, anchor };
      throw new RevisionConflictError(stream, expectedRevision, actual);
    }
    // The batch must chain from the anchored head, whatever the caller read (docs/reliability.md).
    if (events[0].metadata.prev_hash !== (head?.hash ?? GENESIS_HASH)) {
      throw new StoreIntegrityError(stream, `the batch does not chain from the anchored head at revision ${actual}`);
    }
    let revision = expectedRevision;
    let position = 0;
    let { log_hash: logHash } = anchor;
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
      logHash = nextLogHash(logHash, { stream, revision, hash: event.metadata.hash });
    }
    const last = events[events.length - 1];
    const index = options.index;
    if (options.snapshot) {
      const { fold_version, state } = options.snapshot;
      s.insertSnapshot.run(stream, fold_version, revision, last.metadata.hash, JSON.stringify(state));
    }
    s.upsertHead.run(
      stream,
      revision,
      last.metadata.hash,
      position,
      index?.key ?? null,
      index ? JSON.stringify(index.data) : null,
    );
    return {
      result: { revision, position },
      anchor: { position, events: anchor.events + events.length, log_hash: logHash },
    };
  }

  /**
   * The stream's anchored head, checked against its stored last event: a tail cut, a forged tail,
   * a stream deleted or renamed while its head stayed are refused here, under the write lock.
   */
  private verifiedHead(stream: string): StreamHead | undefined {
    const headRow = this.statements.streamHead.get(stream);
    const last = this.statements.lastEvent.get(stream);
    if (!headRow && !last) return undefined;
    if (!headRow) throw new StoreIntegrityError(stream, 'the stream has events but no anchored head');
    if (!last)
      throw new StoreIntegrityError(
        stream,
        `the anchored head is at revision ${headRow.revision} but the stream has no events`,
      );
    let lastHash: unknown;
    try {
      lastHash = (JSON.parse(last.metadata) as { hash?: unknown }).hash;
    } catch {
      lastHash = undefined;
    }
    if (last.revision !== headRow.revision || lastHash !== headRow.hash) {
      throw new StoreIntegrityError(
        stream,
        `the stored last event (revision ${last.revision}) is not the anchored head (revision ${headRow.revision})`,
      );
    }
    return toHead(headRow);
  }

  /** Idempotent re-append: the same ids already stand right after the expected revision. */
  private sameBatchAlreadyAppended(
    stream: string,
    expectedRevision: number,
    events: NewEvent[],
  ): AppendResult | undefined {
    const rows = this.statements.eventsFrom.all(stream, expectedRevision + 1, events.length);
    if (rows.length !== events.length) return undefined;
    if (!rows.every((row, index) => row.event_id === events[index].event_id)) return undefined;
    const last = rows[rows.length - 1];
    return { revision: last.revision, position: last.position };
  }

  /** Events this store has decoded from its rows since it opened: what reads cost, counted (tests count it). */
  get eventsRead(): number {
    return this.decoded;
  }

  private decode(rows: EventRow[]): StoredEvent[] {
    this.decoded += rows.length;
    return rows.map(toStored);
  }

  async readStream(stream: string): Promise<StoredEvent[]> {
    try {
      return this.decode(this.statements.readStream.all(stream));
    } catch (error) {
      throw toPortError(error);
    }
  }

  async readAll({ after, limit, streamPrefix }: ReadAllOptions): Promise<StoredEvent[]> {
    try {
      const rows = streamPrefix
        ? this.statements.readAllPrefixed.all(after, streamPrefix.length, streamPrefix, limit)
        : this.statements.readAll.all(after, limit);
      return this.decode(rows);
    } catch (error) {
      throw toPortError(error);
    }
  }

  subscribe(options: SubscribeOptions, handlers: SubscriptionHandlers): Subscription {
    let wake: (() => void) | undefined;
    const notify = () => wake?.();
    this.appended.on('appended', notify);
    const pollMs = this.options.pollIntervalMs ?? 200;
    const subscription = followLog(options.after, handlers, {
      read: (after) => this.readAll({ after, limit: 500, streamPrefix: options.streamPrefix }),
      wait: () =>
        new Promise<void>((resolve) => {
          const timer = setTimeout(done, pollMs);
          function done() {
            clearTimeout(timer);
            wake = undefined;
            resolve();
          }
          wake = done;
        }),
      wake: notify,
      closed: () => this.closed,
    });
    return {
      close: async () => {
        this.appended.off('appended', notify);
        await subscription.close();
      },
    };
  }

  /** The file this store opened (or ':memory:'). */
  get file(): string {
    return this.options.file;
  }

  /**
   * Calls `listener` after each commit that added events, in this process, with the log position
   * that commit reached; answers how to stop. What another thread or process appends is seen by the
   * poll of `subscribe` only, unless it is announced here with `announceAppended` (no position).
   */
  onAppended(listener: (position?: number) => void): () => void {
    this.appended.on('appended', listener);
    return () => this.appended.off('appended', listener);
  }

  /** Wakes this connection's live subscriptions now: another connection has committed events. */
  announceAppended(): void {
    if (!this.closed) this.appended.emit('appended');
  }

  readonly keepsAnchors = true;

  /** AUTOINCREMENT from 1 in the same transaction as the row; a rolled-back append takes its numbers back. */
  readonly densePositions = true;

  async anchoredHead(stream: string): Promise<StreamHead | undefined> {
    try {
      const row = this.statements.streamHead.get(stream);
      return row ? toHead(row) : undefined;
    } catch (error) {
      throw toPortError(error);
    }
  }

  async readStreamAnchored(stream: string): Promise<AnchoredStream> {
    try {
      // One read transaction: in WAL mode both statements see the same snapshot of the file, however
      // many processes append to it meanwhile.
      return this.db.transaction(() => {
        const events = this.decode(this.statements.readStream.all(stream));
        const row = this.statements.streamHead.get(stream);
        return { events, head: row ? toHead(row) : undefined };
      })();
    } catch (error) {
      throw toPortError(error);
    }
  }

  readonly keepsSnapshots = true;

  async readFoldStart(stream: string, { foldVersion, upTo }: FoldStartOptions): Promise<FoldStart> {
    const last = upTo ?? Number.MAX_SAFE_INTEGER;
    try {
      // One read transaction, like readStreamAnchored: the snapshot, the events and the head agree.
      return this.db.transaction(() => {
        const row = this.statements.snapshotAtOrBefore.get(stream, foldVersion, last);
        const snapshot = row ? toSnapshot(row) : undefined;
        const from = snapshot?.revision ?? 0;
        const events = this.decode(this.statements.readRange.all(stream, from, last, -1));
        const head = this.statements.streamHead.get(stream);
        return { snapshot, events, head: head ? toHead(head) : undefined };
      })();
    } catch (error) {
      throw toPortError(error);
    }
  }

  async readStreamRange(stream: string, from: number, limit: number): Promise<StoredEvent[]> {
    try {
      return this.decode(this.statements.readRange.all(stream, from, Number.MAX_SAFE_INTEGER, limit));
    } catch (error) {
      throw toPortError(error);
    }
  }

  async readEventsById(stream: string, eventIds: readonly string[]): Promise<StoredEvent[]> {
    if (eventIds.length === 0) return [];
    try {
      return this.decode(this.statements.readByIds.all(stream, JSON.stringify(eventIds)));
    } catch (error) {
      throw toPortError(error);
    }
  }

  async anchoredHeads(streamPrefix: string): Promise<StreamHead[]> {
    try {
      return this.statements.headsUnder.all(streamPrefix.length, streamPrefix).map(toHead);
    } catch (error) {
      throw toPortError(error);
    }
  }

  async anchoredHeadsPage(streamPrefix: string, after: string, limit: number): Promise<StreamHead[]> {
    try {
      return this.statements.headsPage.all(after, streamPrefix.length, streamPrefix, limit).map(toHead);
    } catch (error) {
      throw toPortError(error);
    }
  }

  async logAnchor(): Promise<LogAnchor | undefined> {
    try {
      const row = this.statements.anchor.get();
      return row ? toAnchor(row) : undefined;
    } catch (error) {
      throw toPortError(error);
    }
  }

  async indexedStreams(streamPrefix: string, keys: readonly string[]): Promise<IndexedStream[]> {
    if (keys.length === 0) return [];
    const sql = `SELECT * FROM stream_heads WHERE index_key IN (${keys.map(() => '?').join(', ')}) AND substr(stream, 1, ?) = ? ORDER BY stream`;
    try {
      const rows = this.db.prepare<unknown[], HeadRow>(sql).all(...keys, streamPrefix.length, streamPrefix);
      return rows.map((row) => {
        let data: JsonObject;
        try {
          data = JSON.parse(row.index_data ?? '{}') as JsonObject;
        } catch {
          throw new StoreIntegrityError(row.stream, 'the index entry of the stream is not valid JSON');
        }
        return { ...toHead(row), key: row.index_key as string, data };
      });
    } catch (error) {
      throw toPortError(error);
    }
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
