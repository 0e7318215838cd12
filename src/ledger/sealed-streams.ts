import { LRUCache } from 'lru-cache';
import { fold, FOLD_VERSION, initialState, type StepState } from '@recovery-ledger/core';
import {
  NO_STREAM,
  StoreIntegrityError,
  type AppendOptions,
  type AppendResult,
  type EventStore,
  type JsonObject,
  type StoredEvent,
} from '../store/event-store.port';
import { sealEvents, verifyChain } from '../integrity/hash-chain';
import { stepIndexEntry } from './step-index';
import { toRecorded, type UnsealedEvent } from './stored-events';

/** Streams a whole-log audit found broken: refused before the store is even asked. */
export interface BrokenStreams {
  reasonFor(stream: string): string | undefined;
  /** Why no write may be decided at all now (a rolled-back log), if so. */
  writeRefusal?(): Error | undefined;
}

/**
 * A step's state is kept beside its stream every this many events (docs/architecture.md, "Reading a
 * stream"): a read folds at most this many events (and one batch) after the last one kept, however
 * long the stream.
 */
export const SNAPSHOT_EVERY = 64;

/** A stream as the ledger believes it: the state its events fold to, at its revision. */
export interface StreamSnapshot {
  stream: string;
  /** The stream's last event; undefined when it has none. */
  last: StoredEvent | undefined;
  state: StepState;
  revision: number;
  /** The revision of the kept state this read folded from (NO_STREAM: it folded the whole stream). */
  keptAt: number;
  /** Every event of the stream, when the read folded them all (no kept state): nothing to read again. */
  whole?: StoredEvent[];
}

/**
 * A stream read only as the history the ledger wrote, and appended to only sealed into its hash
 * chain, filed in the store's index with the state the append leaves and, every SNAPSHOT_EVERY
 * events, with that state kept beside it.
 */
export class SealedStreams {
  /**
   * The last head each stream's chain was re-hashed up to, so a decision re-hashes only the events
   * it has not seen. The whole-log audit (at start, on demand) re-hashes everything.
   */
  private readonly verifiedHeads = new LRUCache<string, { revision: number; hash: string }>({ max: 10_000 });

  constructor(
    private readonly store: EventStore,
    private readonly broken: BrokenStreams,
  ) {}

  /**
   * Reads a stream for a decision or an answer, and believes it only once it is the history the
   * ledger wrote: the kept state's head hash is the stored event's at its revision, the chain holds
   * from there, its last event is the anchored head, and no whole-log audit has found it broken.
   * Otherwise nothing is decided or answered on it (HISTORY_INTEGRITY_FAILED). Only the events
   * after the kept state are read, checked and folded.
   */
  async read(stream: string): Promise<StreamSnapshot> {
    const { events, state, keptAt, head } = await this.foldTo(stream, undefined);
    const last = events[events.length - 1];
    if (this.store.keepsAnchors && (head?.revision !== last?.revision || head?.hash !== last?.metadata.hash)) {
      throw new StoreIntegrityError(
        stream,
        `the stream ends at revision ${last?.revision ?? 'none'}, its anchored head is ${head?.revision ?? 'none'}`,
      );
    }
    if (last) this.noteVerified(stream, last);
    // Folded far past any kept state (none of this fold version, or a stream not appended to since):
    // keep one now, so the next read does not fold all of it again.
    if (last && this.store.keepsSnapshots && last.revision - keptAt >= SNAPSHOT_EVERY) {
      void this.store.keepSnapshot(stream, {
        fold_version: FOLD_VERSION,
        revision: last.revision,
        hash: last.metadata.hash,
        state: state as unknown as JsonObject,
      });
    }
    return {
      stream,
      last,
      state,
      revision: last === undefined ? NO_STREAM : last.revision,
      keptAt,
      ...(keptAt === NO_STREAM ? { whole: events } : {}),
    };
  }

  /**
   * The state the stream stood in at `revision` (its last event at or before it): folded from the
   * latest state kept at or before it, the events between checked like `read`'s.
   */
  async stateAt(stream: string, revision: number): Promise<{ state: StepState; revision: number }> {
    if (revision < 0) return { state: initialState(), revision: NO_STREAM };
    const { events, state } = await this.foldTo(stream, revision);
    const last = events[events.length - 1];
    return { state, revision: last === undefined ? NO_STREAM : last.revision };
  }

  private async foldTo(stream: string, upTo: number | undefined) {
    const known = this.broken.reasonFor(stream);
    if (known) throw new StoreIntegrityError(stream, known);
    const {
      snapshot: kept,
      events,
      head,
    } = await this.store.readFoldStart(stream, {
      foldVersion: FOLD_VERSION,
      ...(upTo === undefined ? {} : { upTo }),
    });
    let from = initialState();
    if (kept) {
      const at = events[0];
      // The kept state answers for the log only while it names the stored event it was folded to.
      if (at?.revision !== kept.revision || at.metadata.hash !== kept.hash) {
        throw new StoreIntegrityError(
          stream,
          `the kept state at revision ${kept.revision} does not match the log (its head hash is not the stored event's)`,
        );
      }
      from = kept.state as unknown as StepState;
    }
    const startAt = kept?.revision ?? 0;
    const found = verifyChain(events, this.verifiedHeads.get(stream), startAt);
    if (found)
      throw new StoreIntegrityError(stream, `the hash chain breaks at revision ${found.revision} (${found.reason})`);
    const after = kept ? events.slice(1) : events;
    return { events, head, keptAt: kept?.revision ?? NO_STREAM, state: fold(after.map(toRecorded), from) };
  }

  private noteVerified(stream: string, last: StoredEvent): void {
    const known = this.verifiedHeads.get(stream);
    if (known === undefined || known.revision < last.revision)
      this.verifiedHeads.set(stream, { revision: last.revision, hash: last.metadata.hash });
  }

  /** Up to `limit` events from revision `from`, each re-hashed and chained to the one before it. */
  async readRange(stream: string, from: number, limit: number): Promise<StoredEvent[]> {
    const known = this.broken.reasonFor(stream);
    if (known) throw new StoreIntegrityError(stream, known);
    const events = await this.store.readStreamRange(stream, Math.max(0, from), limit);
    if (events.length > 0 && events[0].revision !== Math.max(0, from))
      throw new StoreIntegrityError(stream, `the stream has no event at revision ${Math.max(0, from)}`);
    const found = verifyChain(events, undefined, Math.max(0, from));
    if (found)
      throw new StoreIntegrityError(stream, `the hash chain breaks at revision ${found.revision} (${found.reason})`);
    return events;
  }

  /** The stream's events with these ids (a resubmission's), in revision order. */
  readByIds(stream: string, eventIds: readonly string[]): Promise<StoredEvent[]> {
    return this.store.readEventsById(stream, eventIds);
  }

  /** The same for a stream just read: from its events when the read had them all, else from the store. */
  async storedOf(snapshot: StreamSnapshot, eventIds: readonly string[]): Promise<StoredEvent[]> {
    if (!snapshot.whole) return this.store.readEventsById(snapshot.stream, eventIds);
    const ids = new Set(eventIds);
    return snapshot.whole.filter((event) => ids.has(event.event_id));
  }

  /** Seals `events` after the snapshot's last event and appends them at its revision, filed as `after`. */
  append(snapshot: StreamSnapshot, events: UnsealedEvent[], after: StepState): Promise<AppendResult> {
    const last = snapshot.last;
    const sealed = sealEvents(
      snapshot.stream,
      last ? { revision: last.revision, hash: last.metadata.hash } : undefined,
      events,
    );
    const index = stepIndexEntry(after);
    const options: AppendOptions = index ? { index } : {};
    const reached = snapshot.revision + sealed.length;
    if (this.store.keepsSnapshots && reached - snapshot.keptAt >= SNAPSHOT_EVERY)
      options.snapshot = { fold_version: FOLD_VERSION, state: after as unknown as JsonObject };
    return this.store.append(snapshot.stream, snapshot.revision, sealed, options);
  }
}
