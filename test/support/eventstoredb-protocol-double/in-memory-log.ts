/**
 * The state behind the EventStoreDB PROTOCOL DOUBLE: a transaction log held in memory, with the
 * append rules the server applies (IndexWriter.CheckCommit) as a client sees them, including those
 * for deleted streams: a soft delete writes `{"$tb": <long max>}` to the metastream `$$<stream>`,
 * reads then answer StreamNotFound, and an append at `no_stream` (or at the old last revision)
 * is accepted and CONTINUES at the old revision, re-opening the stream with `$tb` at the first new
 * event (StorageWriterService.SoftUndeleteStream). `$tb` and `$maxCount` hide the first events of
 * a stream from reads (IndexReader). A tombstoned stream answers StreamDeleted to reads and appends.
 * It is not a database: nothing is persisted, nothing is replicated, nothing is scavenged.
 */
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';

export type ExpectedRevision =
  { kind: 'any' } | { kind: 'no_stream' } | { kind: 'stream_exists' } | { kind: 'revision'; revision: bigint };

export interface ProposedEvent {
  id: string;
  type: string;
  contentType: string;
  data: Uint8Array;
  customMetadata: Uint8Array;
}

export interface LoggedEvent extends ProposedEvent {
  stream: string;
  revision: bigint;
  /** Commit and prepare position are the same for every event written through gRPC (no explicit transactions). */
  position: bigint;
  /** .NET ticks (100 ns) since the Unix epoch, which is what the server sends as `created`. */
  createdTicks: bigint;
}

export type AppendOutcome =
  | { kind: 'written'; currentRevision: bigint; position: bigint; events: LoggedEvent[] }
  /** The same ids already stand where this batch would go: the original result, nothing written. */
  | { kind: 'idempotent'; currentRevision: bigint; position: bigint }
  | { kind: 'wrong_expected_version'; currentRevision: bigint | undefined; expected: ExpectedRevision }
  /** Hard-deleted (tombstoned): no append is ever accepted again. */
  | { kind: 'stream_deleted' };

/** EventNumber.DeletedStream (long.MaxValue): the `$tb` a soft delete writes. */
export const DELETED_STREAM = 9223372036854775807n;

export interface StreamMetadata {
  $tb?: number | string;
  $maxCount?: number;
  [key: string]: unknown;
}

export interface EventFilter {
  on: 'stream' | 'event_type';
  prefixes: string[];
  regex?: RegExp;
}

export type ReadFrom = 'start' | 'end' | bigint;

const RECORD_OVERHEAD = 96;

export class InMemoryLog {
  private readonly all: LoggedEvent[] = [];
  private readonly streams = new Map<string, LoggedEvent[]>();
  /** event id -> where it was written, for the idempotency check of `any` / `stream_exists`. */
  private readonly committed = new Map<string, LoggedEvent>();
  private readonly appended = new EventEmitter();
  private readonly tombstoned = new Set<string>();
  private nextPosition: bigint;

  /**
   * Positions start high (above 2^32 by default) and advance by a record size, not by one, so a client
   * that assumes dense or 32-bit positions fails here as it would on a large real log.
   */
  constructor(initialPosition = 5_000_000_000n) {
    this.nextPosition = initialPosition;
    this.appended.setMaxListeners(0);
  }

  get events(): readonly LoggedEvent[] {
    return this.all;
  }

  streamRevision(stream: string): bigint | undefined {
    const events = this.streams.get(stream);
    return events && events.length > 0 ? events[events.length - 1].revision : undefined;
  }

  /** Decides and writes in one synchronous step, so concurrent appends are serialised like the server's writer. */
  append(stream: string, expected: ExpectedRevision, proposed: ProposedEvent[]): AppendOutcome {
    if (this.tombstoned.has(stream)) return { kind: 'stream_deleted' };
    const current = this.streamRevision(stream);
    const existing = this.streams.get(stream) ?? [];
    const wrong = (): AppendOutcome => ({ kind: 'wrong_expected_version', currentRevision: current, expected });
    const softDeleted = this.isSoftDeleted(stream);

    if (expected.kind === 'stream_exists' && (current === undefined || softDeleted)) return wrong();

    if (expected.kind === 'any' || expected.kind === 'stream_exists') {
      // The server looks ids up in its recent-commits cache; a batch that is all there is a replay.
      const found = proposed.map((event) => this.committed.get(event.id));
      if (found.length > 0 && found.every((event) => event?.stream === stream)) {
        const last = found[found.length - 1] as LoggedEvent;
        return { kind: 'idempotent', currentRevision: last.revision, position: last.position };
      }
      if (found[0]?.stream === stream) return wrong(); // part of the batch is there: corrupted idempotency
      return this.write(stream, existing, proposed);
    }

    const expectedRevision = expected.kind === 'no_stream' ? -1n : expected.revision;
    const currentRevision = current ?? -1n;
    if (expectedRevision < currentRevision) {
      // Idempotent only if every id stands, in order, right after the expected revision.
      for (let index = 0; index < proposed.length; index++) {
        const stored = existing[Number(expectedRevision) + 1 + index];
        if (stored?.id === proposed[index].id) continue;
        // A soft-deleted stream takes `no_stream` and carries on from its old last revision.
        if (index === 0 && expected.kind === 'no_stream' && softDeleted) return this.write(stream, existing, proposed);
        return wrong();
      }
      if (proposed.length === 0) return wrong();
      const last = existing[Number(expectedRevision) + proposed.length];
      return { kind: 'idempotent', currentRevision: last.revision, position: last.position };
    }
    if (expectedRevision > currentRevision) return wrong();
    return this.write(stream, existing, proposed);
  }

  private write(stream: string, existing: LoggedEvent[], proposed: ProposedEvent[]): AppendOutcome {
    const createdTicks = BigInt(Date.now()) * 10_000n;
    const written: LoggedEvent[] = [];
    const undelete = proposed.length > 0 && this.isSoftDeleted(stream);
    let revision = existing.length > 0 ? existing[existing.length - 1].revision : -1n;
    for (const event of proposed) {
      revision += 1n;
      const logged: LoggedEvent = { ...event, stream, revision, position: this.nextPosition, createdTicks };
      this.nextPosition += recordSize(logged);
      written.push(logged);
    }
    if (written.length === 0) {
      return { kind: 'written', currentRevision: revision, position: this.nextPosition, events: [] };
    }
    existing.push(...written);
    this.streams.set(stream, existing);
    this.all.push(...written);
    for (const event of written) this.committed.set(event.id, event);
    if (undelete) this.writeMetadata(stream, { ...this.metadataOf(stream), $tb: Number(written[0].revision) });
    this.appended.emit('appended');
    const last = written[written.length - 1];
    // The server answers with the position of the batch's last event.
    return { kind: 'written', currentRevision: last.revision, position: last.position, events: written };
  }

  /**
   * undefined when the stream does not exist or is soft-deleted (the server answers StreamNotFound),
   * 'deleted' when it is tombstoned (StreamDeleted). Events before `$tb` or beyond `$maxCount` are
   * not returned; `visibleUpTo` hides events past a position (a follower that has not caught up).
   */
  readStream(
    stream: string,
    from: ReadFrom,
    backwards: boolean,
    count: number,
    visibleUpTo?: bigint,
  ): LoggedEvent[] | undefined | 'deleted' {
    if (this.tombstoned.has(stream)) return 'deleted';
    const all = this.streams.get(stream)?.filter((event) => visibleUpTo === undefined || event.position <= visibleUpTo);
    if (!all || all.length === 0 || this.isSoftDeleted(stream)) return undefined;
    const events = this.readableFrom(stream, all);
    if (!backwards) {
      if (from === 'end') return [];
      const start = from === 'start' ? 0n : from;
      return events.filter((event) => event.revision >= start).slice(0, count);
    }
    // Backwards from a revision includes that revision.
    const out: LoggedEvent[] = [];
    for (let index = events.length - 1; index >= 0 && out.length < count; index--) {
      const event = events[index];
      if (from === 'start' ? event.revision === 0n : from === 'end' || event.revision <= from) out.push(event);
    }
    return out;
  }

  /** The stream's events that reads return: none before `$tb`, at most `$maxCount`. */
  private readableFrom(stream: string, events: LoggedEvent[]): LoggedEvent[] {
    const metadata = this.metadataOf(stream);
    let first = 0n;
    if (metadata?.$tb !== undefined) first = BigInt(metadata.$tb);
    if (typeof metadata?.$maxCount === 'number') {
      const last = events[events.length - 1].revision;
      const kept = last - BigInt(metadata.$maxCount) + 1n;
      if (kept > first) first = kept;
    }
    return first === 0n ? events : events.filter((event) => event.revision >= first);
  }

  /** The last event of `$$<stream>`, parsed; undefined when there is none. */
  metadataOf(stream: string): StreamMetadata | undefined {
    const events = this.streams.get(`$$${stream}`);
    const last = events?.[events.length - 1];
    if (!last) return undefined;
    try {
      // `$tb` can be long.MaxValue, beyond a double: keep big integers as strings.
      const text = Buffer.from(last.data)
        .toString('utf8')
        .replace(/("\$tb"\s*:\s*)(\d{16,})/, '$1"$2"');
      return JSON.parse(text) as StreamMetadata;
    } catch {
      return undefined;
    }
  }

  isSoftDeleted(stream: string): boolean {
    const tb = this.metadataOf(stream)?.$tb;
    return tb !== undefined && BigInt(tb) === DELETED_STREAM;
  }

  /** Soft delete, as the server's Delete does it: the metastream gets `{"$tb": long.MaxValue}` and nothing else. */
  softDelete(stream: string): LoggedEvent {
    return this.writeMetadata(stream, { $tb: DELETED_STREAM.toString() });
  }

  /** Hard delete: the stream is gone for good. */
  tombstone(stream: string): void {
    this.tombstoned.add(stream);
  }

  streamExists(stream: string): boolean {
    return this.streams.has(stream) || this.streams.has(`$$${stream}`) || this.tombstoned.has(stream);
  }

  private writeMetadata(stream: string, metadata: StreamMetadata): LoggedEvent {
    const json = JSON.stringify(metadata).replace(/"\$tb":"(\d+)"/, '"$tb":$1');
    const outcome = this.append(`$$${stream}`, { kind: 'any' }, [
      {
        id: randomUUID(),
        type: '$metadata',
        contentType: 'application/json',
        data: Buffer.from(json),
        customMetadata: new Uint8Array(),
      },
    ]);
    if (outcome.kind !== 'written') throw new Error(`metadata of ${stream} not written: ${outcome.kind}`);
    return outcome.events[outcome.events.length - 1];
  }

  /** Forwards from a position includes it; backwards from a position excludes it (AllReader). */
  readAll(
    from: ReadFrom,
    backwards: boolean,
    count: number,
    filter?: EventFilter,
    visibleUpTo?: bigint,
  ): LoggedEvent[] {
    const out: LoggedEvent[] = [];
    const limit = visibleUpTo === undefined ? this.all.length : this.firstAtOrAfter(visibleUpTo + 1n);
    if (!backwards) {
      if (from === 'end') return out;
      for (let index = from === 'start' ? 0 : this.firstAtOrAfter(from); index < limit && out.length < count; index++) {
        if (matches(this.all[index], filter)) out.push(this.all[index]);
      }
      return out;
    }
    if (from === 'start') return out;
    for (
      let index = Math.min(limit, from === 'end' ? this.all.length : this.firstAtOrAfter(from)) - 1;
      index >= 0 && out.length < count;
      index--
    ) {
      if (matches(this.all[index], filter)) out.push(this.all[index]);
    }
    return out;
  }

  /** Index of the first event with a position >= the given one. */
  firstAtOrAfter(position: bigint): number {
    let low = 0;
    let high = this.all.length;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (this.all[middle].position < position) low = middle + 1;
      else high = middle;
    }
    return low;
  }

  /** Resolves on the next append, or when `abort` fires. */
  nextAppend(abort: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.appended.off('appended', done);
        abort.removeEventListener('abort', done);
        resolve();
      };
      if (abort.aborted) return resolve();
      this.appended.on('appended', done);
      abort.addEventListener('abort', done);
    });
  }
}

export function matches(event: LoggedEvent, filter: EventFilter | undefined): boolean {
  if (!filter) return true;
  const subject = filter.on === 'stream' ? event.stream : event.type;
  if (filter.prefixes.some((prefix) => subject.startsWith(prefix))) return true;
  return filter.regex ? filter.regex.test(subject) : false;
}

function recordSize(event: LoggedEvent): bigint {
  const bytes =
    RECORD_OVERHEAD +
    Buffer.byteLength(event.stream) +
    Buffer.byteLength(event.type) +
    event.data.length +
    event.customMetadata.length;
  return BigInt(Math.ceil(bytes / 8) * 8);
}
