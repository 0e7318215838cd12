/**
 * The state behind the EventStoreDB PROTOCOL DOUBLE: a transaction log held in memory, with the
 * append rules the server applies (EventStore.Core IndexWriter.CheckCommit) as a client sees them.
 * It is not a database: nothing is persisted, nothing is replicated, nothing is scavenged.
 */
import { EventEmitter } from 'node:events';

export type ExpectedRevision =
  | { kind: 'any' }
  | { kind: 'no_stream' }
  | { kind: 'stream_exists' }
  | { kind: 'revision'; revision: bigint };

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
  | { kind: 'wrong_expected_version'; currentRevision: bigint | undefined; expected: ExpectedRevision };

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
    const current = this.streamRevision(stream);
    const existing = this.streams.get(stream) ?? [];
    const wrong = (): AppendOutcome => ({ kind: 'wrong_expected_version', currentRevision: current, expected });

    if (expected.kind === 'stream_exists' && current === undefined) return wrong();

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
        if (stored?.id !== proposed[index].id) return wrong();
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
    this.appended.emit('appended');
    const last = written[written.length - 1];
    // The server answers with the position of the batch's last event.
    return { kind: 'written', currentRevision: last.revision, position: last.position, events: written };
  }

  /** undefined when the stream does not exist (the server answers StreamNotFound). */
  readStream(stream: string, from: ReadFrom, backwards: boolean, count: number): LoggedEvent[] | undefined {
    const events = this.streams.get(stream);
    if (!events || events.length === 0) return undefined;
    if (!backwards) {
      if (from === 'end') return [];
      const start = from === 'start' ? 0 : Number(from);
      return events.slice(start, start + count);
    }
    // Backwards from a revision includes that revision.
    const top = from === 'end' ? events.length - 1 : from === 'start' ? 0 : Math.min(Number(from), events.length - 1);
    const out: LoggedEvent[] = [];
    for (let index = top; index >= 0 && out.length < count; index--) out.push(events[index]);
    return out;
  }

  /** Forwards from a position includes it; backwards from a position excludes it (AllReader). */
  readAll(from: ReadFrom, backwards: boolean, count: number, filter?: EventFilter): LoggedEvent[] {
    const out: LoggedEvent[] = [];
    if (!backwards) {
      if (from === 'end') return out;
      for (let index = from === 'start' ? 0 : this.firstAtOrAfter(from); index < this.all.length && out.length < count; index++) {
        if (matches(this.all[index], filter)) out.push(this.all[index]);
      }
      return out;
    }
    if (from === 'start') return out;
    for (let index = (from === 'end' ? this.all.length : this.firstAtOrAfter(from)) - 1; index >= 0 && out.length < count; index--) {
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
  const bytes = RECORD_OVERHEAD + Buffer.byteLength(event.stream) + Buffer.byteLength(event.type) + event.data.length + event.customMetadata.length;
  return BigInt(Math.ceil(bytes / 8) * 8);
}
