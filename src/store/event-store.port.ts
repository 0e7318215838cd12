/**
 * The event-store port (docs/contract.md §6). Every adapter passes test/contract/event-store.contract.ts.
 *
 * Revisions are 0-based per stream; a stream with no events has revision -1 (NO_STREAM). Positions
 * are positive safe integers, strictly increasing along the global log; they may have gaps, so a
 * reader never computes one, it only compares them. Driver types never cross this port.
 */
export const NO_STREAM = -1;

import type { JsonObject } from '@recovery-ledger/core';

export type { JsonObject, JsonValue } from '@recovery-ledger/core';

export interface EventMetadata {
  schema_version: number;
  /** The ledger's clock at decision time (ISO-8601). */
  recorded_at: string;
  /** The id of the submitting key (never the key itself), or `local` in local mode. */
  actor: string;
  tenant: string;
  operation_ref: string;
  /** For derived events: the submitted fact that caused them. */
  causation_event_id?: string;
  traceparent?: string;
  tracestate?: string;
  /** A fact submitted under a work-feed lease: the worker and lease (projections/src/projection.ts). */
  lease?: { lease_id: string; holder: string; current: boolean; took_over_from?: string };
  /** SHA-256 of the canonical submitted fact, to tell a resubmission from a reused id. */
  submitted_hash?: string;
  /** Hash chain (docs in src/integrity/hash-chain.ts). */
  prev_hash: string;
  hash: string;
}

export interface NewEvent {
  event_id: string;
  type: string;
  data: JsonObject;
  metadata: EventMetadata;
}

export interface StoredEvent extends NewEvent {
  stream: string;
  revision: number;
  position: number;
}

export interface AppendResult {
  /** Revision of the last event of the batch, which is now the stream's revision. */
  revision: number;
  /** Global position of the last event of the batch. */
  position: number;
}

export interface ReadAllOptions {
  /** Exclusive: events with a position strictly greater than this. 0 reads from the start. */
  after: number;
  limit: number;
  /** Only streams whose name starts with this. */
  streamPrefix?: string;
}

export interface SubscribeOptions {
  /** Exclusive, like readAll. */
  after: number;
  streamPrefix?: string;
}

export interface Subscription {
  close(): Promise<void>;
}

export interface SubscriptionHandlers {
  /** Called in log order; the next batch waits until the returned promise settles. */
  onEvents(events: StoredEvent[]): Promise<void> | void;
  /** The subscription has stopped for good (after close() this is not called). */
  onError?(error: Error): void;
}

/** What a store recorded, with a stream's last append, as that stream's head (its anchor). */
export interface StreamHead {
  stream: string;
  revision: number;
  hash: string;
  position: number;
}

/**
 * The anchor of the whole log: a hash chained over every event in log order
 * (src/integrity/hash-chain.ts, nextLogHash), the count and the last position, optionally signed with
 * a key kept outside the store. It is what catches a deleted stream, a cut tail or a re-hashed
 * suffix, which a per-stream chain cannot see.
 */
export interface LogAnchor {
  position: number;
  events: number;
  log_hash: string;
  /** HMAC-SHA256 of the anchor under the configured key (absent when no key is configured). */
  signature?: string;
}

/** How the application files a stream, committed in the same transaction as the events. */
export interface StreamIndexEntry {
  key: string;
  data: JsonObject;
}

export interface AnchoredStream {
  events: StoredEvent[];
  head: StreamHead | undefined;
}

export interface IndexedStream extends StreamHead {
  key: string;
  data: JsonObject;
}

/**
 * How the application files a stream, as an incremental fold over its events: what a store uses to
 * index a log that was written before it kept an index, in one pass however long the log.
 */
export interface StreamIndexer<State = unknown> {
  start(): State;
  add(state: State, event: StoredEvent): State;
  entry(state: State): StreamIndexEntry | undefined;
}

export interface AppendOptions {
  /** Replaces the stream's index entry with this one, atomically with the append. */
  index?: StreamIndexEntry;
  /**
   * The application's state folded up to the batch's last event, kept beside the stream atomically
   * with the append (where the store keeps snapshots), so a later read folds only what follows it.
   */
  snapshot?: { fold_version: string; state: JsonObject };
}

/**
 * A state the application folded and kept beside a stream: a cache of the log, never its truth. A
 * reader checks `hash` against the stored event at `revision` before it trusts `state`.
 */
export interface KeptSnapshot {
  fold_version: string;
  revision: number;
  /** The hash of the stream's event at `revision` when the snapshot was written. */
  hash: string;
  state: JsonObject;
}

/** Where a fold of one stream starts, and what it folds (`readFoldStart`). */
export interface FoldStart {
  /** The latest snapshot of the asked fold version at or before the asked revision; undefined when none. */
  snapshot: KeptSnapshot | undefined;
  /**
   * The stored events from the snapshot's revision (inclusive, so its hash can be checked) or from
   * revision 0 without one, up to the asked revision or the stream's end, in order.
   */
  events: StoredEvent[];
  /** The anchored head, read in the same snapshot of the store (undefined as in `anchoredHead`). */
  head: StreamHead | undefined;
}

export interface FoldStartOptions {
  foldVersion: string;
  /** Fold only up to this revision (a state as it stood then); the stream's end when absent. */
  upTo?: number;
}

export interface StoreHealth {
  ok: boolean;
  detail?: string;
}

export interface EventStore {
  /**
   * Appends atomically at the expected revision. Appending again a batch whose event ids already
   * stand at expectedRevision+1.. answers the original result (idempotent); any other mismatch throws
   * RevisionConflictError. Unavailability throws StoreUnavailableError.
   */
  append(stream: string, expectedRevision: number, events: NewEvent[], options?: AppendOptions): Promise<AppendResult>;
  /** All events of one stream in order; an empty array when the stream does not exist. */
  readStream(stream: string): Promise<StoredEvent[]>;
  readAll(options: ReadAllOptions): Promise<StoredEvent[]>;
  /** Catch-up then live subscription to the global log. */
  subscribe(options: SubscribeOptions, handlers: SubscriptionHandlers): Subscription;
  /** Position of the last event in the global log (0 when empty). */
  headPosition(): Promise<number>;
  /**
   * The head recorded with the stream's last append; undefined when the stream was never appended
   * to, or when this store keeps no anchors (`keepsAnchors` false). An append whose expected revision
   * or first prev_hash does not meet the anchored head throws StoreIntegrityError.
   */
  anchoredHead(stream: string): Promise<StreamHead | undefined>;
  /**
   * The stream and its anchored head read in one snapshot of the store, so that an append landing
   * between two separate reads (another process sharing the log) never looks like a cut tail.
   * `head` is undefined exactly when `anchoredHead` would answer undefined.
   */
  readStreamAnchored(stream: string): Promise<AnchoredStream>;
  /**
   * What a fold of the stream needs, in one snapshot of the store: the latest kept snapshot and the
   * events after it. A store that keeps no snapshots (`keepsSnapshots` false) answers none and
   * every event from revision 0.
   */
  readFoldStart(stream: string, options: FoldStartOptions): Promise<FoldStart>;
  /** Up to `limit` events of one stream from revision `from` (inclusive), in order. */
  readStreamRange(stream: string, from: number, limit: number): Promise<StoredEvent[]>;
  /** The stream's events whose event id is one of these, in revision order (none: an empty array). */
  readEventsById(stream: string, eventIds: readonly string[]): Promise<StoredEvent[]>;
  /**
   * Keeps a state a reader folded up to `snapshot.revision` beside the stream, with the next
   * commit, if `snapshot.hash` is then still the stored event's at that revision (otherwise
   * nothing): for a stream read whole (no snapshot of the reader's fold version) and not appended
   * to since. Best effort: it settles once tried and never rejects. A no-op where
   * `keepsSnapshots` is false.
   */
  keepSnapshot(stream: string, snapshot: KeptSnapshot): Promise<void>;
  /** Whether `append` keeps `options.snapshot` and `readFoldStart` answers it. */
  readonly keepsSnapshots: boolean;
  /** Every anchored head under a prefix, ordered by stream name (what verify walks). */
  anchoredHeads(streamPrefix: string): Promise<StreamHead[]>;
  /**
   * The same heads a page at a time: up to `limit` whose stream name sorts after `after` (bytewise,
   * as SQLite's BINARY collation), in that order. Optional: where absent, the whole-log audit reads
   * `anchoredHeads` at once (docs/scaling.md, "Memory").
   */
  anchoredHeadsPage?(streamPrefix: string, after: string, limit: number): Promise<StreamHead[]>;
  /** The whole log's anchor; undefined when the log is empty or the store keeps none. */
  logAnchor(): Promise<LogAnchor | undefined>;
  /** Whether this store keeps stream heads and a log anchor committed with every append. */
  readonly keepsAnchors: boolean;
  /**
   * Whether the log's n-th event stands at position n (from 1, no gaps), so that `head - position`
   * counts the events after a position. Only then may a reader subtract positions: EventStoreDB's
   * are byte offsets into its transaction log, and there the difference is a size, not a count.
   */
  readonly densePositions: boolean;
  /**
   * Streams under a prefix whose index entry has one of these keys, with the entry; undefined
   * when this store keeps no index (readers then use a projection caught up to the head).
   */
  indexedStreams(streamPrefix: string, keys: readonly string[]): Promise<IndexedStream[] | undefined>;
  health(): Promise<StoreHealth>;
  close(): Promise<void>;
}

export class RevisionConflictError extends Error {
  constructor(
    readonly stream: string,
    readonly expectedRevision: number,
    readonly actualRevision: number | undefined,
  ) {
    super(`stream ${stream}: expected revision ${expectedRevision}, actual ${actualRevision ?? 'unknown'}`);
    this.name = 'RevisionConflictError';
  }
}

export class StoreUnavailableError extends Error {
  constructor(
    readonly reason: string,
    /** Seconds a caller should wait before trying again. */
    readonly retryAfterSeconds = 1,
  ) {
    super(`event store unavailable: ${reason}`);
    this.name = 'StoreUnavailableError';
  }
}

/**
 * A stream (or the log) whose stored history is not the one the ledger wrote: a broken hash chain,
 * a head that is not the anchored one, a row that cannot be decoded, a deleted or truncated stream.
 * Nothing a caller sends can mend it, so the service refuses to append on top of it and says so
 * (docs/reliability.md, "A log whose every loss is detectable").
 */
export class StoreIntegrityError extends Error {
  constructor(
    /** The stream at fault, or undefined when the fault is in the log as a whole. */
    readonly stream: string | undefined,
    readonly reason: string,
    /** The log position of the row at fault, when one row is (so a scan can go past it). */
    readonly position?: number,
  ) {
    super(`store integrity: ${stream === undefined ? 'the log' : `stream ${stream}`}: ${reason}`);
    this.name = 'StoreIntegrityError';
  }
}

export const EVENT_STORE = Symbol('EVENT_STORE');
