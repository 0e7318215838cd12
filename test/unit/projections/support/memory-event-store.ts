import {
  type AnchoredStream,
  type FoldStart,
  type FoldStartOptions,
  NO_STREAM,
  RevisionConflictError,
  type AppendResult,
  type EventStore,
  type NewEvent,
  type ReadAllOptions,
  type StoredEvent,
  type SubscribeOptions,
  type Subscription,
  type SubscriptionHandlers,
} from '../../../../src/store/event-store.port';
import { followLog } from '../../../../src/adapters/follow-log';

/**
 * An array-backed event store implementing the port, for tests that need no file; it passes the
 * store contract suite (test/unit/projections/memory-event-store.unit.spec.ts). Positions can be
 * given a stride or a first position so tests see gaps, as the port allows (it then says its
 * positions are not dense). Subscriptions deliver in batches of at most `batchSize`, like the real
 * adapters.
 */
export class MemoryEventStore implements EventStore {
  readonly densePositions: boolean;
  readonly events: StoredEvent[] = [];
  private readonly listeners = new Set<() => void>();
  private nextPosition: number;

  constructor(private readonly options: { positionStride?: number; firstPosition?: number; batchSize?: number } = {}) {
    this.nextPosition = options.firstPosition ?? 1;
    this.densePositions = this.nextPosition === 1 && (options.positionStride ?? 1) === 1;
  }

  async append(stream: string, expectedRevision: number, events: NewEvent[]): Promise<AppendResult> {
    const existing = this.events.filter((event) => event.stream === stream);
    // The same ids already standing right after the expected revision: the first append's answer.
    const standing = existing.slice(expectedRevision + 1, expectedRevision + 1 + events.length);
    if (
      events.length > 0 &&
      standing.length === events.length &&
      standing.every((event, index) => event.event_id === events[index].event_id)
    ) {
      const last = standing[standing.length - 1];
      return { revision: last.revision, position: last.position };
    }
    const actual = existing.length === 0 ? NO_STREAM : existing[existing.length - 1].revision;
    if (actual !== expectedRevision) throw new RevisionConflictError(stream, expectedRevision, actual);
    let revision = expectedRevision;
    let position = 0;
    for (const event of events) {
      revision += 1;
      position = this.nextPosition;
      this.nextPosition += this.options.positionStride ?? 1;
      this.events.push({ ...structuredClone(event), stream, revision, position });
    }
    for (const listener of this.listeners) listener();
    return { revision, position };
  }

  /** A model of the port's log and subscriptions only: it keeps no anchors and no index. */
  readonly keepsAnchors = false;

  async anchoredHead(): Promise<undefined> {
    return undefined;
  }

  async readStreamAnchored(stream: string): Promise<AnchoredStream> {
    return { events: await this.readStream(stream), head: undefined };
  }

  readonly keepsSnapshots = false;

  async readFoldStart(stream: string, { upTo }: FoldStartOptions): Promise<FoldStart> {
    const events = await this.readStream(stream);
    return { snapshot: undefined, events: upTo === undefined ? events : events.slice(0, upTo + 1), head: undefined };
  }

  async keepSnapshot(): Promise<void> {
    return undefined;
  }

  async readStreamRange(stream: string, from: number, limit: number): Promise<StoredEvent[]> {
    return (await this.readStream(stream)).slice(Math.max(0, from), Math.max(0, from) + limit);
  }

  async readEventsById(stream: string, eventIds: readonly string[]): Promise<StoredEvent[]> {
    return (await this.readStream(stream)).filter((event) => eventIds.includes(event.event_id));
  }

  async anchoredHeads(): Promise<[]> {
    return [];
  }

  async logAnchor(): Promise<undefined> {
    return undefined;
  }

  async indexedStreams(): Promise<undefined> {
    return undefined;
  }

  async readStream(stream: string): Promise<StoredEvent[]> {
    return this.events.filter((event) => event.stream === stream).map((event) => structuredClone(event));
  }

  async readAll({ after, limit, streamPrefix }: ReadAllOptions): Promise<StoredEvent[]> {
    return this.events
      .filter((event) => event.position > after && (!streamPrefix || event.stream.startsWith(streamPrefix)))
      .slice(0, limit)
      .map((event) => structuredClone(event));
  }

  /** The same catch-up-then-live loop the polling adapters run (src/adapters/follow-log.ts). */
  subscribe(options: SubscribeOptions, handlers: SubscriptionHandlers): Subscription {
    let wake: (() => void) | undefined;
    // An append that lands while the loop is reading must not be missed: remember it.
    let appended = false;
    const listener = () => {
      appended = true;
      wake?.();
    };
    this.listeners.add(listener);
    const subscription = followLog(options.after, handlers, {
      read: (after) => {
        appended = false;
        return this.readAll({ after, limit: this.options.batchSize ?? 500, streamPrefix: options.streamPrefix });
      },
      wait: async (stopped) => {
        if (!appended && !stopped()) await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
      },
      wake: () => wake?.(),
      closed: () => false,
    });
    return {
      close: async () => {
        this.listeners.delete(listener);
        await subscription.close();
      },
    };
  }

  async headPosition(): Promise<number> {
    return this.events.length === 0 ? 0 : this.events[this.events.length - 1].position;
  }

  async health() {
    return { ok: true };
  }

  async close(): Promise<void> {
    for (const listener of this.listeners) listener();
  }
}
