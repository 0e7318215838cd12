import type { Pool, PoolClient } from 'pg';
import {
  NO_STREAM,
  RevisionConflictError,
  StoreIntegrityError,
  StoreUnavailableError,
  type AnchoredStream,
  type AppendOptions,
  type AppendResult,
  type EventStore,
  type FoldStart,
  type FoldStartOptions,
  type JsonObject,
  type KeptSnapshot,
  type LogAnchor,
  type NewEvent,
  type ReadAllOptions,
  type StoreHealth,
  type StoredEvent,
  type StreamHead,
  type SubscribeOptions,
  type Subscription,
  type SubscriptionHandlers,
} from '../../store/event-store.port';
import { isEventMetadata } from '../../store/event-metadata';
import { anchorSignatureHolds, GENESIS_HASH, nextLogHash, signAnchor } from '../../integrity/hash-chain';
import { followLog } from '../follow-log';
import { migrate, openPool, query, STORED_HASH, toPortError, type PostgresOptions } from './postgres-database';
import { Notifier } from './postgres-notifier';

export interface PostgresEventStoreOptions extends PostgresOptions {
  /** How often a live subscription reads again when no notification came (a missed NOTIFY, a reconnect). */
  pollIntervalMs?: number;
  /**
   * Read the whole committed log, not only what lies below the high-water mark. Only for the test
   * that shows the mark is needed (test/int/postgres-event-store.int.spec.ts): never in service.
   */
  unsafeIgnoreHighWaterMark?: boolean;
  /** LEDGER_ANCHOR_KEY: the log anchor is signed with it, and not moved on from one it did not sign. */
  anchorKey?: string;
}

interface HeadRow {
  stream: string;
  revision: number;
  head_hash: string | null;
  head_position: string | null;
}

interface FoldRow extends Omit<EventRow, 'position'> {
  position: string | null;
  head_revision: number | null;
  head_hash: string | null;
  head_position: string | null;
  kept_revision: number | null;
  kept_hash: string | null;
  kept_state: string | null;
}

interface AnchorRow {
  position: string;
  events: string;
  log_hash: string;
  signature: string | null;
}

interface EventRow {
  position: string;
  stream: string;
  revision: number;
  event_id: string;
  type: string;
  data: string;
  metadata: string;
}

/** Events one append may carry: the index within a transaction takes the low 16 bits of a position. */
const MAX_BATCH = 0xffff;
const NOTIFY_CHANNEL = 'ledger_events';
const COLUMNS = 'position, stream, revision, event_id, type, data, metadata';

/**
 * The event log in PostgreSQL (docs/postgres.md), shared by every instance that connects to it.
 *
 * An append is one statement, so one transaction: the stream's row in `ledger_streams` moves from
 * the expected revision to the new one (an UPDATE … WHERE revision = expected, or an INSERT for a
 * new stream, which a concurrent writer of the same stream waits on and then finds changed), and
 * the events are inserted; the promise settles only when the server has answered the statement,
 * which it does once the transaction has committed (pg settles a query at ReadyForQuery). Followers
 * are told after the commit (`Announcer`).
 *
 * Positions, and the trap they avoid. A sequence numbers rows when they are inserted, but
 * transactions commit in another order: one that took 5 can commit after one that took 6, and a
 * follower that read 6 and moved on to "after 6" skips 5 for ever. Emmett's PostgreSQL store keeps
 * `pg_current_xact_id()` (xid8) on every row, reads only rows whose transaction id is below
 * `pg_snapshot_xmin(pg_current_snapshot())` — the oldest transaction still running, so every
 * transaction below it has ended and no row below it can still appear — and orders them by
 * (transaction_id, global_position). Here the position is that order in one number: the
 * transaction id times 2^16 plus the event's index in the append. A row not yet readable belongs to
 * a transaction at or above the mark, so its position is above every position already read: a
 * reader after N never passes a row that commits later. What it relies on: xid8 values never
 * repeat or wrap (64 bits with the epoch), are assigned in increasing order, and the snapshot's
 * xmin never goes back. The cost: a writing transaction left open anywhere in the cluster holds
 * every follower back until it ends (the lag then shows it). Positions have gaps and are not
 * dense; they stay safe integers for 2^37 transactions.
 *
 * A stream's own reads (readStream and the rest) are not held back: its revisions are serialised
 * by the stream's row, so no later commit can land below what they read.
 *
 * Anchors (docs/postgres.md, "Integrity"). Each stream's head (the revision, hash and position of
 * its last event) is kept in its `ledger_streams` row, moved by the append's own statement, which
 * moves it only from the expected revision and with the batch chaining from the head's hash: so a
 * stream read with its head in one statement shows a cut or forged tail, which the ledger then
 * refuses to decide on (src/ledger/sealed-streams.ts). The log anchor (the log chain,
 * src/integrity/hash-chain.ts nextLogHash) cannot be moved by every append without making every
 * append wait for the one before it; it is kept in `ledger_log_anchor` and moved forward by whoever
 * reads it, over the rows below the high-water mark (where no row can still appear), with a
 * compare-and-set so that instances moving it together agree. States the ledger folded are kept in `ledger_snapshots` (with the
 * append that reached them, or by a reader while their hash is still the stored event's), and a
 * fold reads them with the events after them and the head in one statement. Keeps no index.
 */
export class PostgresEventStore implements EventStore {
  private readonly pool: Pool;
  private readonly ready: Promise<void>;
  private readonly notifier: Notifier;
  private readonly announcer: Announcer;
  private closed = false;

  readonly keepsAnchors = true;
  readonly keepsSnapshots = true;
  /** Events decoded from the database by this store (`ledger_store_events_read_total`). */
  eventsRead = 0;
  readonly densePositions = false;

  constructor(private readonly options: PostgresEventStoreOptions) {
    this.pool = openPool(options);
    this.ready = migrate(this.pool);
    // A start against an unreachable server is not an unhandled rejection: requests report it.
    this.ready.catch(() => undefined);
    this.notifier = new Notifier(options, NOTIFY_CHANNEL);
    this.announcer = new Announcer(() => announceAppends(this.pool));
  }

  /** Notifications this store has sent for its appends: fewer than its appends when they were coalesced. */
  get announcements(): number {
    return this.announcer.sent;
  }

  private async open(): Promise<Pool> {
    if (this.closed) throw new StoreUnavailableError('event store closed');
    try {
      await this.ready;
    } catch {
      await migrate(this.pool);
    }
    return this.pool;
  }

  async append(
    stream: string,
    expectedRevision: number,
    events: NewEvent[],
    options: AppendOptions = {},
  ): Promise<AppendResult> {
    if (events.length === 0) throw new Error('append needs at least one event');
    if (events.length > MAX_BATCH) throw new Error(`an append carries at most ${MAX_BATCH} events`);
    const pool = await this.open();
    const revision = expectedRevision + events.length;
    // One statement outside any BEGIN: its own transaction, committed before the server answers it.
    const written = await writeAppend(pool, stream, expectedRevision, events, options.snapshot).catch(
      (error: unknown) => {
        throw toPortError(error, stream, expectedRevision);
      },
    );
    if (written === undefined) return this.sameBatchOrConflict(stream, expectedRevision, events);
    this.announcer.announce();
    return { revision, position: written };
  }

  /**
   * A refused append: the original result when this very batch already stands there; a conflict
   * when the stream is at another revision; and when it is at the expected one, a batch that does
   * not chain from its head (docs/reliability.md), or a head left empty (its last event was missing
   * when heads were first kept).
   */
  private async sameBatchOrConflict(stream: string, expectedRevision: number, events: NewEvent[]) {
    const stored = await this.readStreamRange(stream, expectedRevision + 1, events.length);
    if (stored.length === events.length && stored.every((event, index) => event.event_id === events[index].event_id)) {
      const last = stored[stored.length - 1];
      return { revision: last.revision, position: last.position };
    }
    const head = await this.anchoredHead(stream);
    const actual = head?.revision ?? NO_STREAM;
    if (actual !== expectedRevision) throw new RevisionConflictError(stream, expectedRevision, actual);
    throw new StoreIntegrityError(stream, `the batch does not chain from the anchored head at revision ${actual}`);
  }

  async readStream(stream: string): Promise<StoredEvent[]> {
    return this.read('ledger_read_stream', `SELECT ${COLUMNS} FROM ledger_events WHERE stream = $1 ORDER BY revision`, [
      stream,
    ]);
  }

  async readStreamRange(stream: string, from: number, limit: number): Promise<StoredEvent[]> {
    return this.read(
      'ledger_read_stream_range',
      `SELECT ${COLUMNS} FROM ledger_events WHERE stream = $1 AND revision >= $2 ORDER BY revision LIMIT $3`,
      [stream, from, limit],
    );
  }

  async readEventsById(stream: string, eventIds: readonly string[]): Promise<StoredEvent[]> {
    if (eventIds.length === 0) return [];
    return this.read(
      'ledger_read_events_by_id',
      `SELECT ${COLUMNS} FROM ledger_events WHERE stream = $1 AND event_id = ANY($2::text[]) ORDER BY revision`,
      [stream, [...eventIds]],
    );
  }

  async readAll({ after, limit, streamPrefix }: ReadAllOptions): Promise<StoredEvent[]> {
    const mark = this.options.unsafeIgnoreHighWaterMark
      ? ''
      : 'AND transaction_id < pg_snapshot_xmin(pg_current_snapshot())';
    const prefix = streamPrefix ? 'AND starts_with(stream, $3)' : '';
    return this.read(
      `ledger_read_all${mark ? '' : '_unguarded'}${prefix ? '_prefix' : ''}`,
      `SELECT ${COLUMNS} FROM ledger_events WHERE position > $1 ${mark} ${prefix} ORDER BY position LIMIT $2`,
      streamPrefix ? [after, limit, streamPrefix] : [after, limit],
    );
  }

  subscribe(options: SubscribeOptions, handlers: SubscriptionHandlers): Subscription {
    const pollMs = this.options.pollIntervalMs ?? 250;
    // The wakes counted before each read: one that comes during the read ends the next wait at once.
    let heard = this.notifier.heard();
    return followLog(options.after, handlers, {
      read: (after) => {
        heard = this.notifier.heard();
        return this.readAll({ after, limit: 500, streamPrefix: options.streamPrefix });
      },
      wait: (stopped) => this.notifier.wait(pollMs, stopped, heard),
      wake: () => this.notifier.wakeAll(),
      closed: () => this.closed,
    });
  }

  async headPosition(): Promise<number> {
    const [row] = await query<{ head: string }>(
      await this.open(),
      'SELECT coalesce(max(position), 0) AS head FROM ledger_events',
    );
    return toPosition(row.head);
  }

  async anchoredHead(stream: string): Promise<StreamHead | undefined> {
    const [row] = await query<HeadRow>(
      await this.open(),
      'SELECT stream, revision, head_hash, head_position FROM ledger_streams WHERE stream = $1',
      [stream],
    );
    return row ? toHead(row) : undefined;
  }

  async readStreamAnchored(stream: string): Promise<AnchoredStream> {
    const { events, head } = await this.readWithHead(stream, null, undefined);
    return { events, head };
  }

  async readFoldStart(stream: string, { foldVersion, upTo }: FoldStartOptions): Promise<FoldStart> {
    return this.readWithHead(stream, foldVersion, upTo);
  }

  /** Kept only while `snapshot.hash` is the stored event's at its revision; never rejects. */
  async keepSnapshot(stream: string, snapshot: KeptSnapshot): Promise<void> {
    try {
      await query(
        await this.open(),
        `INSERT INTO ledger_snapshots (stream, fold_version, revision, hash, state)
           SELECT $1, $2, $3, $4, $5 WHERE EXISTS (
             SELECT 1 FROM ledger_events e WHERE e.stream = $1 AND e.revision = $3 AND ${STORED_HASH('e')} = $4)
           ON CONFLICT (stream, fold_version, revision) DO UPDATE SET hash = excluded.hash, state = excluded.state`,
        [stream, snapshot.fold_version, snapshot.revision, snapshot.hash, JSON.stringify(snapshot.state)],
      );
    } catch {
      // A cache of the log: a state not kept is folded again next time.
    }
  }

  async anchoredHeads(streamPrefix: string): Promise<StreamHead[]> {
    const rows = await query<HeadRow>(
      await this.open(),
      `SELECT stream, revision, head_hash, head_position FROM ledger_streams
        WHERE starts_with(stream, $1) ORDER BY stream COLLATE "C"`,
      [streamPrefix],
    );
    return rows.map(toHead);
  }

  async anchoredHeadsPage(streamPrefix: string, after: string, limit: number): Promise<StreamHead[]> {
    const rows = await query<HeadRow>(
      await this.open(),
      `SELECT stream, revision, head_hash, head_position FROM ledger_streams
        WHERE stream COLLATE "C" > $2 AND starts_with(stream, $1) ORDER BY stream COLLATE "C" LIMIT $3`,
      [streamPrefix, after, limit],
    );
    return rows.map(toHead);
  }

  /**
   * The anchor, first moved forward over what was committed since (below the high-water mark). It
   * is not moved from one that does not hold under the anchor key (the check then says so), nor
   * past a row that does not decode (the check reads that row itself and names it).
   */
  async logAnchor(): Promise<LogAnchor | undefined> {
    const pool = await this.open();
    const key = this.options.anchorKey;
    for (;;) {
      const [row] = await query<AnchorRow>(
        pool,
        'SELECT position, events, log_hash, signature FROM ledger_log_anchor WHERE id = 1',
      );
      if (!row) return undefined;
      const anchor = toAnchor(row);
      if (key !== undefined && anchor.events > 0 && !anchorSignatureHolds(key, anchor)) return anchor;
      const page = await this.readAll({ after: anchor.position, limit: ANCHOR_PAGE }).catch((error: unknown) => {
        if (error instanceof StoreIntegrityError) return [];
        throw error;
      });
      if (page.length === 0) return anchor.events === 0 ? undefined : anchor;
      let logHash = anchor.log_hash;
      for (const event of page)
        logHash = nextLogHash(logHash, { stream: event.stream, revision: event.revision, hash: event.metadata.hash });
      const next = { position: page[page.length - 1].position, events: anchor.events + page.length, log_hash: logHash };
      // Moved only from the anchor read: another instance that moved it first wins, and this reads it again.
      await query(
        pool,
        `UPDATE ledger_log_anchor SET position = $4, events = $5, log_hash = $6, signature = $7
          WHERE id = 1 AND position = $1 AND events = $2 AND log_hash = $3`,
        [
          anchor.position,
          anchor.events,
          anchor.log_hash,
          next.position,
          next.events,
          next.log_hash,
          key === undefined ? null : signAnchor(key, next),
        ],
      );
    }
  }

  async indexedStreams(): Promise<undefined> {
    return undefined;
  }

  async health(): Promise<StoreHealth> {
    try {
      await query(await this.open(), 'SELECT 1');
      return { ok: true };
    } catch (error) {
      return { ok: false, detail: (error as Error).message };
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.notifier.close();
    await this.pool.end().catch(() => undefined);
  }

  /**
   * A stream's latest kept state of `foldVersion` at or before `upTo` (none when `foldVersion` is
   * null), its events from that state's revision (or from 0) up to `upTo`, and its head, in one
   * statement, so one snapshot of the database: an append landing between two reads (another
   * instance) never looks like a cut tail, nor a state kept past the events read.
   */
  private async readWithHead(stream: string, foldVersion: string | null, upTo: number | undefined): Promise<FoldStart> {
    const pool = await this.open();
    let rows: FoldRow[];
    try {
      ({ rows } = await pool.query<FoldRow>({
        name: 'ledger_read_fold_start',
        text: `WITH kept AS (
                 SELECT revision, hash, state FROM ledger_snapshots
                  WHERE stream = $1 AND fold_version = $2 AND ($3::integer IS NULL OR revision <= $3)
                  ORDER BY revision DESC LIMIT 1)
               SELECT h.revision AS head_revision, h.head_hash, h.head_position,
                      k.revision AS kept_revision, k.hash AS kept_hash, k.state AS kept_state,
                      e.position, e.stream, e.revision, e.event_id, e.type, e.data, e.metadata
                 FROM (SELECT 1) AS one
                 LEFT JOIN ledger_streams h ON h.stream = $1
                 LEFT JOIN kept k ON true
                 LEFT JOIN ledger_events e ON e.stream = $1 AND e.revision >= coalesce(k.revision, 0)
                                          AND ($3::integer IS NULL OR e.revision <= $3)
                ORDER BY e.revision`,
        values: [stream, foldVersion, upTo ?? null],
      }));
    } catch (error) {
      throw toPortError(error);
    }
    const [first] = rows;
    const head =
      first && first.head_revision !== null
        ? toHead({
            stream,
            revision: first.head_revision,
            head_hash: first.head_hash,
            head_position: first.head_position,
          })
        : undefined;
    const snapshot =
      first && first.kept_revision !== null && foldVersion !== null
        ? toSnapshot(stream, foldVersion, first.kept_revision, first.kept_hash ?? '', first.kept_state ?? '')
        : undefined;
    const events = rows.filter((row) => row.position !== null).map((row) => this.decoded(row as EventRow));
    return { snapshot, events, head };
  }

  /** Every event decoded, counted (`ledger_store_events_read_total`: what a read or a start cost). */
  private decoded(row: EventRow): StoredEvent {
    this.eventsRead += 1;
    return decode(row);
  }

  /** A read by a named statement: parsed and planned once per connection, not at every call. */
  private async read(name: string, text: string, values: unknown[]): Promise<StoredEvent[]> {
    const pool = await this.open();
    try {
      return (await pool.query<EventRow>({ name, text, values })).rows.map((row) => this.decoded(row));
    } catch (error) {
      throw toPortError(error);
    }
  }
}

/**
 * One append as one statement: the stream's row moved from `expectedRevision` (an UPDATE … WHERE
 * revision = expected, or an INSERT for a new stream), and the events inserted only when it moved.
 * Under READ COMMITTED a concurrent writer of the same stream waits on the row, then re-checks the
 * condition against the committed revision: exactly one of many racing at one revision moves it.
 * Answers the last event's position, or undefined when the stream is not at `expectedRevision`
 * (nothing written). On a pool it is a transaction of its own, committed before the server
 * answers; exported for the test that runs it inside a transaction held open while another append
 * commits (test/int/postgres-event-store.int.spec.ts).
 */
export async function writeAppend(
  client: Pick<PoolClient, 'query'> | Pick<Pool, 'query'>,
  stream: string,
  expectedRevision: number,
  events: NewEvent[],
  snapshot?: AppendOptions['snapshot'],
): Promise<number | undefined> {
  // The head moves with the events: only from the expected revision and with the batch chaining
  // from the head's hash ($9). That the stored last event is still the head is checked by the read
  // every decision is taken on (readStreamAnchored, one statement), not here again: looking the
  // event up in every append cost about an eighth of the appends per second (docs/postgres.md).
  const headPosition = 'pg_current_xact_id()::text::bigint * 65536 + cardinality($4::text[]) - 1';
  const move =
    expectedRevision === NO_STREAM
      ? `INSERT INTO ledger_streams (stream, revision, head_hash, head_position)
           SELECT $1, $3, $8, ${headPosition} WHERE $9 = '${GENESIS_HASH}'
           ON CONFLICT (stream) DO NOTHING RETURNING 1`
      : `UPDATE ledger_streams SET revision = $3, head_hash = $8, head_position = ${headPosition}
          WHERE stream = $1 AND revision = $2 AND head_hash = $9
          RETURNING 1`;
  // The state the batch reaches, kept with it when the caller folded one (every SNAPSHOT_EVERY
  // events, src/ledger/sealed-streams.ts): a statement of its own name, so the others stay as short.
  const keep = snapshot
    ? `, kept AS (INSERT INTO ledger_snapshots (stream, fold_version, revision, hash, state)
         SELECT $1, $10, $3, $8, $11 WHERE EXISTS (SELECT 1 FROM moved)
         ON CONFLICT (stream, fold_version, revision) DO UPDATE SET hash = excluded.hash, state = excluded.state)`
    : '';
  const { rows } = await (client as Pick<Pool, 'query'>).query<{ position: string }>({
    // Named: parsed and planned once per connection, not at every append.
    name: `${expectedRevision === NO_STREAM ? 'ledger_append_new' : 'ledger_append'}${snapshot ? '_kept' : ''}`,
    text: `WITH moved AS (${move})${keep}
     INSERT INTO ledger_events (position, transaction_id, stream, revision, event_id, type, data, metadata)
     SELECT pg_current_xact_id()::text::bigint * 65536 + e.ordinality - 1, pg_current_xact_id(),
            $1, $2::integer + e.ordinality::integer, e.event_id, e.type, e.data, e.metadata
       FROM unnest($4::text[], $5::text[], $6::text[], $7::text[])
            WITH ORDINALITY AS e(event_id, type, data, metadata)
      WHERE EXISTS (SELECT 1 FROM moved)
     RETURNING position`,
    values: [
      stream,
      expectedRevision,
      expectedRevision + events.length,
      events.map((event) => event.event_id),
      events.map((event) => event.type),
      events.map((event) => JSON.stringify(event.data)),
      events.map((event) => JSON.stringify(event.metadata)),
      events[events.length - 1].metadata.hash,
      events[0].metadata.prev_hash,
      ...(snapshot ? [snapshot.fold_version, JSON.stringify(snapshot.state)] : []),
    ],
  });
  if (rows.length === 0) return undefined;
  return Math.max(...rows.map((row) => toPosition(row.position)));
}

/**
 * Tells every instance's followers that the log moved: a notification of its own, sent after the
 * append's COMMIT. Inside the append's transaction, NOTIFY would take PostgreSQL's cluster-wide
 * notification lock before the commit and hold it until the commit is flushed, so every append
 * would commit alone (docs/postgres.md, "Measured"). A notification carries nothing: followers
 * read the table below the high-water mark, and it only says when. Exported for the test that
 * commits a held append by hand.
 */
export async function announceAppends(client: Pick<Pool, 'query'> | Pick<PoolClient, 'query'>): Promise<void> {
  await (client as Pick<Pool, 'query'>).query(`SELECT pg_notify('${NOTIFY_CHANNEL}', '')`);
}

/**
 * At most one notification in flight per store. An append that commits while one is in flight
 * asks for one more, sent once that one has answered: so a notification always starts after every
 * commit it stands for, and a burst of appends costs two notifications, not one each. A follower
 * woken by it and held back by an older append still running is woken again by that append's own
 * notification after its commit, or by its poll when the older writer was no append of a store.
 * A failed notification is not retried: followers read again at their poll interval.
 */
export class Announcer {
  sent = 0;
  private inFlight = false;
  private again = false;

  constructor(private readonly send: () => Promise<void>) {}

  announce(): void {
    if (this.inFlight) {
      this.again = true;
      return;
    }
    this.inFlight = true;
    void this.run();
  }

  private async run(): Promise<void> {
    do {
      this.again = false;
      this.sent++;
      await this.send().catch(() => undefined);
    } while (this.again);
    this.inFlight = false;
  }
}

/** Rows the log anchor is moved over at a time. */
const ANCHOR_PAGE = 1_000;

/** A head kept empty (a stream whose stored last event was missing when heads were first kept) matches no event. */
function toHead(row: HeadRow): StreamHead {
  return {
    stream: row.stream,
    revision: row.revision,
    hash: row.head_hash ?? '',
    position: row.head_position === null ? 0 : toPosition(row.head_position),
  };
}

function toSnapshot(stream: string, foldVersion: string, revision: number, hash: string, text: string): KeptSnapshot {
  let state: unknown;
  try {
    state = JSON.parse(text);
  } catch {
    state = undefined;
  }
  if (state === null || typeof state !== 'object' || Array.isArray(state))
    throw new StoreIntegrityError(stream, `the snapshot at revision ${revision} is not a JSON object`);
  return { fold_version: foldVersion, revision, hash, state: state as JsonObject };
}

function toAnchor(row: AnchorRow): LogAnchor {
  return {
    position: toPosition(row.position),
    events: toPosition(row.events),
    log_hash: row.log_hash,
    ...(row.signature ? { signature: row.signature } : {}),
  };
}

function toPosition(text: string | number): number {
  const position = Number(text);
  if (!Number.isSafeInteger(position))
    throw new StoreIntegrityError(undefined, `position ${text} is not a safe integer`);
  return position;
}

function decode(row: EventRow): StoredEvent {
  const position = toPosition(row.position);
  let data: unknown;
  let metadata: unknown;
  try {
    data = JSON.parse(row.data);
    metadata = JSON.parse(row.metadata);
  } catch {
    throw new StoreIntegrityError(row.stream, `the event at revision ${row.revision} cannot be decoded`, position);
  }
  if (typeof data !== 'object' || data === null || Array.isArray(data) || !isEventMetadata(metadata)) {
    throw new StoreIntegrityError(
      row.stream,
      `the event at revision ${row.revision} is not one the ledger wrote`,
      position,
    );
  }
  return {
    event_id: row.event_id,
    type: row.type,
    data: data as JsonObject,
    metadata,
    stream: row.stream,
    revision: row.revision,
    position,
  };
}
