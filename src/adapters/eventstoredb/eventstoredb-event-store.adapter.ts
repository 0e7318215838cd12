import {
  BACKWARDS,
  END,
  EventStoreDBClient,
  FORWARDS,
  NO_STREAM as ESDB_NO_STREAM,
  START,
  type AppendResult as EsdbAppendResult,
  type ReadPosition,
  type ResolvedEvent,
  type StreamingRead,
} from '@eventstore/db-client';
import { setImmediate as nextTurn } from 'node:timers/promises';
import {
  NO_STREAM,
  RevisionConflictError,
  StoreIntegrityError,
  StoreUnavailableError,
  type AnchoredStream,
  type AppendResult,
  type EventStore,
  type FoldStart,
  type FoldStartOptions,
  type NewEvent,
  type ReadAllOptions,
  type StoreHealth,
  type StoredEvent,
  type SubscribeOptions,
  type Subscription,
  type SubscriptionHandlers,
} from '../../store/event-store.port';
import { withDeadline } from './call-deadline';
import { preferAppendPath } from './eventstoredb-client';
import {
  allPositionOf,
  isLedgerEvent,
  toEventData,
  toPortPosition,
  toPortRevision,
  toReadPosition,
  toStoredEvent,
  validateStreamName,
} from './eventstoredb-event-codec';
import { isNotLeader, isStreamNotFound, toPortError } from './eventstoredb-errors';
import { ResilientAllSubscription, type SubscriptionStatus } from './eventstoredb-subscription';
import { DEFAULT_BACKOFF, type BackoffPolicy } from './reconnect-backoff';

export interface EventStoreDbTuning {
  /** Every append gets an answer or a StoreUnavailableError within this (the outcome is then unknown). */
  appendTimeoutMs?: number;
  /** Reads of one stream or one page of $all. */
  readTimeoutMs?: number;
  /** The probe health() makes when no subscription is down. */
  healthTimeoutMs?: number;
  /** Sent to callers with StoreUnavailableError (Retry-After). */
  retryAfterSeconds?: number;
  resubscribeBackoff?: Partial<BackoffPolicy>;
  /** Upper bound of events handed to one onEvents call. */
  maxBatchSize?: number;
  /** Every subscription state change (live, reconnecting, stopped): the hook for readiness and metrics. */
  onStatusChange?: (status: SubscriptionStatus) => void;
  /**
   * Let the store's own client append through BatchAppend where the server offers it. Off by
   * default (see preferAppendPath). A client passed in is used as its owner configured it.
   */
  batchAppend?: boolean;
}

export type EventStoreDbEventStoreOptions = EventStoreDbTuning &
  (
    | { /** `esdb://…`; the store owns the client it creates and disposes it on close(). */ connectionString: string }
    | { /** A client shared with its owner, who disposes it. */ client: EventStoreDBClient }
  );

export interface EventStoreDbStats {
  subscriptions: number;
  subscriptionsDown: number;
  /** Counts every lost subscription, i.e. every re-subscription started. */
  resubscriptions: number;
}

/**
 * The event-store port on EventStoreDB / KurrentDB through @eventstore/db-client 6.x. The port's
 * stream name is the server's stream name; the port's revision is the stream revision; the port's
 * position is the `$all` commit position. The server keeps the rules the port asks for: appends at
 * an expected revision are atomic, and a batch whose ids already stand right after that revision
 * answers the first result (see IndexWriter.CheckCommit). What the client leaves open is closed
 * here: deadlines on every call, events validated before the client serialises them, positions
 * checked to be safe integers, and subscriptions that come back after a drop.
 *
 * On a cluster, appends and stream reads ask for the leader (`requires-leader`): a follower may not
 * have an append yet, and a decision made on a stale read only meets a conflict later. A follower
 * answers NotLeader with the leader's endpoint, the client moves there, and the call is sent once
 * more. A stream whose history the server no longer shows whole (soft-deleted, truncated by `$tb`,
 * `$maxCount` or `$maxAge`, tombstoned) is a StoreIntegrityError, never read as new or re-based:
 * the ledger never deletes or truncates, so someone else did, and its chain is not whole.
 */
export class EventStoreDbEventStore implements EventStore {
  private readonly client: EventStoreDBClient;
  private readonly ownsClient: boolean;
  private readonly appendTimeoutMs: number;
  private readonly readTimeoutMs: number;
  private readonly healthTimeoutMs: number;
  private readonly retryAfterSeconds: number;
  private readonly backoff: BackoffPolicy;
  private readonly maxBatchSize: number;
  private readonly onStatusChange?: (status: SubscriptionStatus) => void;
  private readonly subscriptions = new Set<ResilientAllSubscription>();
  private readonly inFlight = new Set<Promise<unknown>>();
  private nextSubscriptionId = 1;
  private resubscriptions = 0;
  private closed = false;

  constructor(options: EventStoreDbEventStoreOptions) {
    if ('client' in options) {
      this.client = options.client;
      this.ownsClient = false;
    } else {
      this.client = EventStoreDBClient.connectionString(options.connectionString);
      this.ownsClient = true;
      if (!options.batchAppend) preferAppendPath(this.client);
    }
    // With it off, a conflict comes back as a "success: false" result, and the BatchAppend path
    // reports a wrong next revision in it (it calls hasCurrentStreamRevision() where it means get).
    // The getter is `protected` in the typings but is the client's own record of the option.
    if ((this.client as unknown as { throwOnAppendFailure: boolean }).throwOnAppendFailure === false) {
      throw new Error(
        'EventStoreDB client configured with throwOnAppendFailure=false; remove it from the connection string',
      );
    }
    this.appendTimeoutMs = options.appendTimeoutMs ?? 10_000;
    this.readTimeoutMs = options.readTimeoutMs ?? 30_000;
    this.healthTimeoutMs = options.healthTimeoutMs ?? 2_000;
    this.retryAfterSeconds = options.retryAfterSeconds ?? 2;
    this.backoff = { ...DEFAULT_BACKOFF, ...options.resubscribeBackoff };
    this.maxBatchSize = options.maxBatchSize ?? 256;
    this.onStatusChange = options.onStatusChange;
  }

  async append(stream: string, expectedRevision: number, events: NewEvent[]): Promise<AppendResult> {
    if (this.closed) throw new StoreUnavailableError('store closed', this.retryAfterSeconds);
    validateStreamName(stream);
    if (!Number.isSafeInteger(expectedRevision) || expectedRevision < NO_STREAM) {
      throw new RangeError(`expected revision must be an integer >= ${NO_STREAM}, got ${expectedRevision}`);
    }
    if (events.length === 0) throw new Error('append needs at least one event');
    const eventData = events.map(toEventData);
    const context = { stream, expectedRevision, retryAfterSeconds: this.retryAfterSeconds };
    const send = () =>
      this.track(
        withDeadline(
          this.client.appendToStream(stream, eventData, {
            expectedRevision: expectedRevision === NO_STREAM ? ESDB_NO_STREAM : BigInt(expectedRevision),
            // Enforced by gRPC on the Append path; BatchAppend only forwards it to the server, so
            // withDeadline below is what bounds an append there.
            deadline: this.appendTimeoutMs,
            requiresLeader: true,
          }),
          this.appendTimeoutMs,
          `append to ${stream}`,
        ),
      );
    try {
      return await this.toAppendResult(stream, expectedRevision, events.length, await this.onLeader(send));
    } catch (error) {
      throw toPortError(error, context);
    }
  }

  private async toAppendResult(
    stream: string,
    expectedRevision: number,
    count: number,
    result: EsdbAppendResult,
  ): Promise<AppendResult> {
    // Unreachable while throwOnAppendFailure is on (checked in the constructor); kept so a
    // refused append can never be reported as written.
    if (!result.success) throw new RevisionConflictError(stream, expectedRevision, undefined);
    const revision = toPortRevision(result.nextExpectedRevision, stream);
    // The server takes `no_stream` on a soft-deleted stream and carries on at its old revision
    // (IndexWriter.CheckCommit): the batch then stands somewhere the ledger did not hash it for.
    if (revision !== expectedRevision + count) {
      throw new StoreIntegrityError(
        stream,
        `the server placed the batch at revision ${revision - count + 1}, not ${expectedRevision + 1}: the stream was deleted or truncated outside the ledger`,
      );
    }
    // The server answers with the position of the batch's last event, the original one on an
    // idempotent replay; a server that sends none is asked for the event itself.
    const position = result.position
      ? toPortPosition(result.position.commit, stream)
      : await this.positionAt(stream, revision);
    return { revision, position };
  }

  private async positionAt(stream: string, revision: number): Promise<number> {
    const [event] = await this.onLeader(() =>
      this.collect(
        this.client.readStream(stream, {
          fromRevision: BigInt(revision),
          direction: BACKWARDS,
          maxCount: 1,
          requiresLeader: true,
        }),
        `read of ${stream}@${revision}`,
      ),
    );
    if (!event) throw new Error(`${stream}@${revision} not found right after it was appended`);
    return toStoredEvent(event).position;
  }

  async readStream(stream: string): Promise<StoredEvent[]> {
    if (this.closed) throw new StoreUnavailableError('store closed', this.retryAfterSeconds);
    try {
      const read = () =>
        this.collect(
          this.client.readStream(stream, { fromRevision: START, direction: FORWARDS, requiresLeader: true }),
          `read of ${stream}`,
        );
      const events = await this.onLeader(read).catch((error: unknown) => {
        if (isStreamNotFound(error)) return [];
        throw error;
      });
      if (events.length === 0) {
        await this.refuseRemovedHistory(stream);
        return [];
      }
      const stored = events.map(toStoredEvent);
      stored.forEach((event, index) => {
        if (event.revision !== index) {
          throw new StoreIntegrityError(
            stream,
            `the server returns the stream from revision ${stored[0].revision} (event ${index} is at ${event.revision}): its first events were truncated or it was deleted and written again`,
          );
        }
      });
      return stored;
    } catch (error) {
      throw toPortError(error, { stream, retryAfterSeconds: this.retryAfterSeconds });
    }
  }

  /**
   * A stream that reads as empty may have been soft-deleted (the server answers StreamNotFound and
   * would take a `no_stream` append at the old revision) or truncated away: its metastream says so.
   * The default ACL lets every user read stream metadata (`$mr`).
   */
  private async refuseRemovedHistory(stream: string): Promise<void> {
    const metastream = `$$${stream}`;
    const read = () =>
      this.collect(
        this.client.readStream(metastream, {
          fromRevision: END,
          direction: BACKWARDS,
          maxCount: 1,
          requiresLeader: true,
        }),
        `read of ${metastream}`,
      );
    const [last] = await this.onLeader(read).catch((error: unknown) => {
      if (isStreamNotFound(error)) return [];
      throw error;
    });
    const metadata = last?.event?.isJson ? (last.event.data as Record<string, unknown>) : undefined;
    if (!metadata || typeof metadata !== 'object') return;
    const removal = (['$tb', '$maxCount', '$maxAge'] as const).filter(
      (key) => metadata[key] !== undefined && metadata[key] !== null,
    );
    if (removal.length === 0) return;
    const tb = metadata.$tb;
    // EventNumber.DeletedStream (long.MaxValue) is what a soft delete writes.
    const softDeleted = typeof tb === 'number' && tb >= Number.MAX_SAFE_INTEGER;
    throw new StoreIntegrityError(
      stream,
      softDeleted
        ? 'the stream was soft-deleted on the server (its metadata has $tb at the deleted mark)'
        : `the stream reads as empty but its metadata removes events (${removal.join(', ')})`,
    );
  }

  /**
   * Runs a call that asks for the leader; when a follower answered NotLeader, the client has moved
   * its channel to the leader it named (after a turn of the event loop), so the call goes once more.
   * Safe for appends: a follower that answers NotLeader has not written anything.
   */
  private async onLeader<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      if (!isNotLeader(error) || this.closed) throw error;
      await nextTurn();
      return call();
    }
  }

  /**
   * Client 6.x sends every `$all` read with no server-side filter, so pages are filtered here:
   * system records and other prefixes are skipped until `limit` events are found or the log ends.
   */
  async readAll({ after, limit, streamPrefix }: ReadAllOptions): Promise<StoredEvent[]> {
    if (this.closed) throw new StoreUnavailableError('store closed', this.retryAfterSeconds);
    checkPosition(after);
    const found: StoredEvent[] = [];
    if (limit <= 0) return found;
    const pageSize = Math.min(Math.max(limit, 32), 4096);
    // Reading forwards from a position includes the event at it; `after` excludes it.
    let cursor = BigInt(after);
    let from: ReadPosition = toReadPosition(after);
    try {
      for (;;) {
        const page = await this.collect(
          this.client.readAll({ fromPosition: from, direction: FORWARDS, maxCount: pageSize }),
          'read of $all',
        );
        for (const resolved of page) {
          const position = allPositionOf(resolved);
          if (position === undefined || position <= cursor) continue;
          cursor = position;
          if (!isLedgerEvent(resolved, streamPrefix)) continue;
          found.push(toStoredEvent(resolved));
          if (found.length === limit) return found;
        }
        if (page.length < pageSize) return found;
        from = { commit: cursor, prepare: cursor };
      }
    } catch (error) {
      throw toPortError(error, { retryAfterSeconds: this.retryAfterSeconds });
    }
  }

  subscribe(options: SubscribeOptions, handlers: SubscriptionHandlers): Subscription {
    checkPosition(options.after);
    if (this.closed) {
      queueMicrotask(() => handlers.onError?.(new StoreUnavailableError('store closed', this.retryAfterSeconds)));
      return { close: async () => undefined };
    }
    const subscription: ResilientAllSubscription = new ResilientAllSubscription({
      id: this.nextSubscriptionId++,
      client: () => this.client,
      after: options.after,
      streamPrefix: options.streamPrefix,
      handlers,
      backoff: this.backoff,
      maxBatchSize: this.maxBatchSize,
      onStatus: (status) => {
        if (status.state === 'reconnecting') this.resubscriptions += 1;
        if (status.state === 'stopped') this.subscriptions.delete(subscription);
        this.onStatusChange?.(status);
      },
    });
    this.subscriptions.add(subscription);
    return {
      close: async () => {
        this.subscriptions.delete(subscription);
        await subscription.close();
      },
    };
  }

  /** The last non-system event of `$all`; system records (stats every few seconds) are stepped over. */
  /**
   * EventStoreDB appends one stream at a time, so no head or log anchor can be committed with the
   * events: this adapter keeps none, and says so (docs/eventstoredb.md). Chains are still checked
   * on every read a decision makes, and the server itself refuses an append at a wrong revision.
   */
  readonly keepsAnchors = false;

  /** Positions are `$all` commit positions: byte offsets, shared with system records and other streams. */
  readonly densePositions = false;

  async anchoredHead(): Promise<undefined> {
    return undefined;
  }

  async readStreamAnchored(stream: string): Promise<AnchoredStream> {
    return { events: await this.readStream(stream), head: undefined };
  }

  /**
   * No snapshots: a server append cannot carry a row beside the stream in the same transaction, so
   * a fold here reads the stream whole from revision 0 (docs/eventstoredb.md, "Snapshots").
   */
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
    if (eventIds.length === 0) return [];
    const ids = new Set(eventIds);
    return (await this.readStream(stream)).filter((event) => ids.has(event.event_id));
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

  async headPosition(): Promise<number> {
    if (this.closed) throw new StoreUnavailableError('store closed', this.retryAfterSeconds);
    const pageSize = 32;
    let from: ReadPosition = END;
    try {
      for (;;) {
        const page = await this.collect(
          this.client.readAll({ fromPosition: from, direction: BACKWARDS, maxCount: pageSize }),
          'read of $all',
        );
        for (const resolved of page) {
          if (isLedgerEvent(resolved)) return toStoredEvent(resolved).position;
        }
        const last = page.length > 0 ? allPositionOf(page[page.length - 1]) : undefined;
        if (page.length < pageSize || last === undefined) return 0;
        // Backwards from a position excludes the event at it.
        from = { commit: last, prepare: last };
      }
    } catch (error) {
      throw toPortError(error, { retryAfterSeconds: this.retryAfterSeconds });
    }
  }

  /** Not ok while any subscription is re-subscribing, or when the server does not answer a one-event read. */
  async health(): Promise<StoreHealth> {
    if (this.closed) return { ok: false, detail: 'store closed' };
    for (const subscription of this.subscriptions) {
      if (subscription.isDown) return { ok: false, detail: subscription.status.detail };
    }
    try {
      await this.collect(
        this.client.readAll({ fromPosition: END, direction: BACKWARDS, maxCount: 1 }),
        'health probe',
        this.healthTimeoutMs,
      );
      return { ok: true };
    } catch (error) {
      return { ok: false, detail: toPortError(error, { retryAfterSeconds: this.retryAfterSeconds }).message };
    }
  }

  stats(): EventStoreDbStats {
    let down = 0;
    for (const subscription of this.subscriptions) if (subscription.isDown) down += 1;
    return { subscriptions: this.subscriptions.size, subscriptionsDown: down, resubscriptions: this.resubscriptions };
  }

  /** Appends already sent get their answer (or their deadline) before the client goes. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.allSettled([...this.inFlight]);
    await Promise.all([...this.subscriptions].map((subscription) => subscription.close()));
    this.subscriptions.clear();
    if (this.ownsClient) await this.client.dispose();
  }

  private track<T>(call: Promise<T>): Promise<T> {
    this.inFlight.add(call);
    const forget = () => this.inFlight.delete(call);
    call.then(forget, forget);
    return call;
  }

  /** Drains a read within a deadline; the client opens reads with none. */
  private collect(
    read: StreamingRead<ResolvedEvent>,
    operation: string,
    timeoutMs = this.readTimeoutMs,
  ): Promise<ResolvedEvent[]> {
    const events: ResolvedEvent[] = [];
    const drained = new Promise<ResolvedEvent[]>((resolve, reject) => {
      read.on('data', (event: ResolvedEvent) => events.push(event));
      read.on('end', () => resolve(events));
      // `on`, not `once`: a second error from a failing call must not go unhandled.
      read.on('error', reject);
    });
    return withDeadline(drained, timeoutMs, operation, () => {
      read.cancel().catch(() => undefined);
    });
  }
}

function checkPosition(after: number): void {
  if (!Number.isSafeInteger(after) || after < 0)
    throw new RangeError(`position must be a non-negative safe integer, got ${after}`);
}
