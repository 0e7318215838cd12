import { LRUCache } from 'lru-cache';
import { fold, type StepState } from '@recovery-ledger/core/domain/decider';
import type { RecordedEvent } from '@recovery-ledger/core/domain/events';
import {
  NO_STREAM,
  StoreIntegrityError,
  type AppendResult,
  type EventStore,
  type StoredEvent,
} from '../store/event-store.port';
import { sealEvents, verifyChain } from '../store/hash-chain';
import { stepIndexEntry } from './step-index';
import { toRecorded, type UnsealedEvent } from './stored-events';

/** Streams a whole-log audit found broken: refused before the store is even asked. */
export interface BrokenStreams {
  reasonFor(stream: string): string | undefined;
  /** Why no write may be decided at all now (a rolled-back log), if so. */
  writeRefusal?(): Error | undefined;
}

/** A stream as the ledger believes it: its stored events, the same decoded, and the state they fold to. */
export interface StreamSnapshot {
  stream: string;
  events: StoredEvent[];
  /** `events` decoded for folding, index for index: a prefix is folded from here, never decoded again. */
  recorded: RecordedEvent[];
  state: StepState;
  revision: number;
}

/**
 * A stream read only as the history the ledger wrote, and appended to only sealed into its hash
 * chain, filed in the store's index with the state the append leaves.
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
   * ledger wrote: its chain holds, its last event is the anchored head, and no whole-log audit has
   * found it broken. Otherwise nothing is decided or answered on it (HISTORY_INTEGRITY_FAILED).
   * The stored events are folded here, once.
   */
  async read(stream: string): Promise<StreamSnapshot> {
    const known = this.broken.reasonFor(stream);
    if (known) throw new StoreIntegrityError(stream, known);
    const { events, head } = await this.store.readStreamAnchored(stream);
    const found = verifyChain(events, this.verifiedHeads.get(stream));
    if (found)
      throw new StoreIntegrityError(stream, `the hash chain breaks at revision ${found.revision} (${found.reason})`);
    const last = events[events.length - 1];
    if (this.store.keepsAnchors && (head?.revision !== last?.revision || head?.hash !== last?.metadata.hash)) {
      throw new StoreIntegrityError(
        stream,
        `the stream ends at revision ${last?.revision ?? 'none'}, its anchored head is ${head?.revision ?? 'none'}`,
      );
    }
    if (last) this.verifiedHeads.set(stream, { revision: last.revision, hash: last.metadata.hash });
    const recorded = events.map(toRecorded);
    return {
      stream,
      events,
      recorded,
      state: fold(recorded),
      revision: last === undefined ? NO_STREAM : last.revision,
    };
  }

  /** Seals `events` after the snapshot's last event and appends them at its revision, filed as `after`. */
  append(snapshot: StreamSnapshot, events: UnsealedEvent[], after: StepState): Promise<AppendResult> {
    const last = snapshot.events[snapshot.events.length - 1];
    const sealed = sealEvents(
      snapshot.stream,
      last ? { revision: last.revision, hash: last.metadata.hash } : undefined,
      events,
    );
    const index = stepIndexEntry(after);
    return this.store.append(snapshot.stream, snapshot.revision, sealed, index ? { index } : {});
  }
}

/** The state the stream stood in after its first `count` events: the snapshot's own when that is all of them. */
export function stateAfter(snapshot: StreamSnapshot, count: number): StepState {
  return count === snapshot.recorded.length ? snapshot.state : fold(snapshot.recorded.slice(0, count));
}
