/**
 * The one contract every event-store adapter passes (docs/contract.md §6). Revisions and positions mean the
 * same through the port on every adapter: no per-adapter offsets here.
 */
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { GENESIS_HASH, nextLogHash, sealEvents } from '../../src/integrity/hash-chain';
import {
  NO_STREAM,
  RevisionConflictError,
  StoreIntegrityError,
  StoreUnavailableError,
  type EventStore,
  type NewEvent,
  type StoredEvent,
} from '../../src/store/event-store.port';

export interface EventStoreUnderTest {
  store: EventStore;
  cleanup(): Promise<void>;
  /** What can happen to the store outside the ledger, for the adapters whose store allows it. */
  faults?: StoreFaults;
}

/**
 * Things done to the store by someone other than the ledger (an operator, another client, the
 * cluster itself). The ledger never deletes or truncates; when someone does, the adapter must say
 * so (StoreIntegrityError), never read the rest as the whole history or continue it as new.
 */
export interface StoreFaults {
  /** A soft delete: reads find nothing, and the store would take a `no_stream` append at the old revision. */
  softDelete(stream: string): Promise<void>;
  /** Hides every event before `revision` from reads (`$tb` on EventStoreDB; `$maxCount`/`$maxAge` do the same). */
  truncateBefore(stream: string, revision: number): Promise<void>;
  /** A hard delete: the stream can be neither read nor written again. */
  tombstone(stream: string): Promise<void>;
  /** The store stops taking requests (no leader, nothing discoverable); resolves to the undo. */
  outage(): Promise<() => Promise<void>>;
}

export interface ContractOptions {
  /** The faults the factory's store can be put through; the matching tests run only for those. */
  faults?: Array<keyof StoreFaults>;
}

let streamCounter = 0;
/** Unique per test run, so the suite also runs against a long-lived real server. */
const freshStream = (label = 's') =>
  `op-contract:${label}-${Date.now().toString(36)}-${++streamCounter}-${randomUUID().slice(0, 8)}`;

export function newEvent(type = 'TestHappened', data: Record<string, unknown> = {}): NewEvent {
  return {
    event_id: randomUUID(),
    type,
    data: data as NewEvent['data'],
    metadata: {
      schema_version: 1,
      recorded_at: new Date().toISOString(),
      actor: 'contract',
      tenant: 'contract',
      operation_ref: 'contract',
      prev_hash: '0'.repeat(64),
      hash: '0'.repeat(64),
    },
  };
}

async function collect(store: EventStore, after: number, prefix: string, until: (events: StoredEvent[]) => boolean) {
  const seen: StoredEvent[] = [];
  let resolveDone!: () => void;
  const done = new Promise<void>((resolve) => (resolveDone = resolve));
  const subscription = store.subscribe(
    { after, streamPrefix: prefix },
    {
      onEvents: (events) => {
        seen.push(...events);
        if (until(seen)) resolveDone();
      },
    },
  );
  return { seen, done, subscription };
}

export function testEventStore(
  name: string,
  factory: () => Promise<EventStoreUnderTest>,
  options: ContractOptions = {},
): void {
  // A fault case (soft delete, truncate, tombstone, outage) runs only on a store whose runner can
  // cause that fault (EventStoreDB through the protocol double or a real server); SQLite and the
  // memory store have no such operation, so there the case is skipped rather than faked.
  const withFault = (fault: keyof StoreFaults) => (options.faults?.includes(fault) ? it : it.skip);
  describe(`event store contract: ${name}`, () => {
    let subject: EventStoreUnderTest;
    let store: EventStore;

    beforeEach(async () => {
      subject = await factory();
      store = subject.store;
    });
    afterEach(async () => {
      await subject.cleanup();
    });

    it('reads a stream that does not exist as empty', async () => {
      expect(await store.readStream(freshStream())).toEqual([]);
    });

    it('appends to a new stream at NO_STREAM with revisions from 0', async () => {
      const stream = freshStream();
      const events = [newEvent('A', { n: 1 }), newEvent('B', { n: 2 }), newEvent('C', { n: 3 })];
      const result = await store.append(stream, NO_STREAM, events);
      expect(result.revision).toBe(2);
      const read = await store.readStream(stream);
      expect(read.map((e) => e.revision)).toEqual([0, 1, 2]);
      expect(read.map((e) => e.type)).toEqual(['A', 'B', 'C']);
      expect(read.map((e) => e.event_id)).toEqual(events.map((e) => e.event_id));
      expect(read[2].position).toBe(result.position);
      expect(read[0].position).toBeLessThan(read[1].position);
      expect(read[1].position).toBeLessThan(read[2].position);
      expect(read.every((e) => e.stream === stream)).toBe(true);
    });

    it('round-trips data and metadata exactly', async () => {
      const stream = freshStream();
      const data = {
        text: 'ünïcødé ✓ "quoted" \n line',
        nested: { list: [1, 'two', null, true], empty: {} },
        amount: '12.50',
      };
      const event = newEvent('Rich', data);
      event.metadata.traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
      await store.append(stream, NO_STREAM, [event]);
      const [read] = await store.readStream(stream);
      expect(read.data).toEqual(data);
      expect(read.metadata).toEqual(event.metadata);
    });

    it('continues a stream at its revision and refuses a stale expected revision', async () => {
      const stream = freshStream();
      await store.append(stream, NO_STREAM, [newEvent()]);
      await expect(store.append(stream, 0, [newEvent()])).resolves.toMatchObject({ revision: 1 });
      await expect(store.append(stream, 0, [newEvent()])).rejects.toBeInstanceOf(RevisionConflictError);
      await expect(store.append(stream, NO_STREAM, [newEvent()])).rejects.toBeInstanceOf(RevisionConflictError);
      await expect(store.append(stream, 5, [newEvent()])).rejects.toBeInstanceOf(RevisionConflictError);
      expect((await store.readStream(stream)).length).toBe(2);
    });

    it('answers a re-append of the same event ids at the same revision with the original result', async () => {
      const stream = freshStream();
      const batch = [newEvent('A'), newEvent('B')];
      const first = await store.append(stream, NO_STREAM, batch);
      const again = await store.append(stream, NO_STREAM, batch);
      expect(again).toEqual(first);
      expect((await store.readStream(stream)).length).toBe(2);
    });

    it('lets exactly one of many concurrent appends at one expected revision win', async () => {
      const stream = freshStream();
      await store.append(stream, NO_STREAM, [newEvent()]);
      const outcomes = await Promise.allSettled(
        Array.from({ length: 20 }, () => store.append(stream, 0, [newEvent('Racer'), newEvent('Racer')])),
      );
      const won = outcomes.filter((o) => o.status === 'fulfilled');
      const lost = outcomes.filter((o) => o.status === 'rejected') as PromiseRejectedResult[];
      expect(won).toHaveLength(1);
      expect(lost.every((o) => o.reason instanceof RevisionConflictError)).toBe(true);
      expect((await store.readStream(stream)).map((e) => e.revision)).toEqual([0, 1, 2]);
    });

    it('keeps concurrent appends to different streams all, each atomic', async () => {
      const streams = Array.from({ length: 10 }, () => freshStream('par'));
      await Promise.all(streams.map((stream) => store.append(stream, NO_STREAM, [newEvent(), newEvent(), newEvent()])));
      for (const stream of streams) {
        expect((await store.readStream(stream)).map((e) => e.revision)).toEqual([0, 1, 2]);
      }
    });

    it('reads the global log after a position, exclusive, in order, filtered by prefix', async () => {
      const label = `g${randomUUID().slice(0, 6)}`;
      const prefix = `op-contract:${label}`;
      const start = await store.headPosition();
      const a = `${prefix}-a`;
      const b = `${prefix}-b`;
      await store.append(a, NO_STREAM, [newEvent('A0')]);
      await store.append(`other-${label}`, NO_STREAM, [newEvent('Other')]);
      await store.append(b, NO_STREAM, [newEvent('B0'), newEvent('B1')]);
      await store.append(a, 0, [newEvent('A1')]);
      const all = await store.readAll({ after: start, limit: 100, streamPrefix: prefix });
      expect(all.map((e) => e.type)).toEqual(['A0', 'B0', 'B1', 'A1']);
      for (let i = 1; i < all.length; i++) expect(all[i].position).toBeGreaterThan(all[i - 1].position);
      const afterFirst = await store.readAll({ after: all[0].position, limit: 2, streamPrefix: prefix });
      expect(afterFirst.map((e) => e.type)).toEqual(['B0', 'B1']);
      const unfiltered = await store.readAll({ after: start, limit: 100 });
      expect(unfiltered.map((e) => e.type)).toEqual(expect.arrayContaining(['A0', 'Other', 'B0', 'B1', 'A1']));
      expect(await store.headPosition()).toBeGreaterThanOrEqual(all[3].position);
    });

    it('numbers the log 1, 2, 3… with no gap where it says its positions are dense, refused appends taking no number', async () => {
      if (!store.densePositions) return;
      const stream = freshStream('dense');
      await store.append(stream, NO_STREAM, [newEvent(), newEvent()]);
      await expect(store.append(stream, NO_STREAM, [newEvent()])).rejects.toBeInstanceOf(RevisionConflictError);
      await Promise.allSettled(Array.from({ length: 5 }, () => store.append(stream, 1, [newEvent(), newEvent()])));
      await store.append(freshStream('dense'), NO_STREAM, [newEvent()]);
      const all = await store.readAll({ after: 0, limit: 100_000 });
      expect(all.map((event) => event.position)).toEqual(all.map((_, index) => index + 1));
      expect(await store.headPosition()).toBe(all.length);
    });

    it('subscribes from a position (exclusive): catches up, then follows live, in order', async () => {
      const prefix = `op-contract:sub${randomUUID().slice(0, 6)}`;
      const stream = `${prefix}-x`;
      await store.append(stream, NO_STREAM, [newEvent('E0'), newEvent('E1')]);
      const [e0] = await store.readStream(stream);
      const { seen, done, subscription } = await collect(store, e0.position, prefix, (events) => events.length >= 3);
      await store.append(stream, 1, [newEvent('E2')]);
      await store.append(stream, 2, [newEvent('E3')]);
      await done;
      await subscription.close();
      expect(seen.map((e) => e.type)).toEqual(['E1', 'E2', 'E3']);
    });

    it("keeps each stream's anchored head and the log anchor with every append (where the store keeps anchors)", async () => {
      const stream = freshStream('anchor');
      const first = sealEvents(stream, undefined, [newEvent('A'), newEvent('B')]);
      await store.append(stream, NO_STREAM, first);
      const second = sealEvents(stream, { revision: 1, hash: first[1].metadata.hash }, [newEvent('C')]);
      const result = await store.append(stream, 1, second);
      if (!store.keepsAnchors) {
        expect(await store.anchoredHead(stream)).toBeUndefined();
        expect(await store.logAnchor()).toBeUndefined();
        return;
      }
      expect(await store.anchoredHead(stream)).toEqual({
        stream,
        revision: 2,
        hash: second[0].metadata.hash,
        position: result.position,
      });
      expect((await store.anchoredHeads(stream)).map((head) => head.stream)).toEqual([stream]);
      const anchor = await store.logAnchor();
      expect(anchor?.position).toBe(await store.headPosition());
      let logHash = GENESIS_HASH;
      const all = await store.readAll({ after: 0, limit: 100_000 });
      for (const event of all)
        logHash = nextLogHash(logHash, { stream: event.stream, revision: event.revision, hash: event.metadata.hash });
      expect(anchor).toMatchObject({ events: all.length, log_hash: logHash });
    });

    it('reads a stream with its anchored head in one answer, the head undefined where the store keeps none', async () => {
      const stream = freshStream('anchored-read');
      expect(await store.readStreamAnchored(stream)).toEqual({ events: [], head: undefined });
      const sealed = sealEvents(stream, undefined, [newEvent('A'), newEvent('B')]);
      await store.append(stream, NO_STREAM, sealed);
      const { events, head } = await store.readStreamAnchored(stream);
      expect(events).toEqual(await store.readStream(stream));
      expect(head).toEqual(await store.anchoredHead(stream));
      if (store.keepsAnchors) expect(head).toMatchObject({ revision: 1, hash: sealed[1].metadata.hash });
    });

    it('refuses a batch that does not chain from the anchored head (where the store keeps anchors)', async () => {
      if (!store.keepsAnchors) return;
      const stream = freshStream('chain');
      const first = sealEvents(stream, undefined, [newEvent('A')]);
      await store.append(stream, NO_STREAM, first);
      const unchained = sealEvents(stream, { revision: 0, hash: 'f'.repeat(64) }, [newEvent('B')]);
      await expect(store.append(stream, 0, unchained)).rejects.toBeInstanceOf(StoreIntegrityError);
      expect((await store.readStream(stream)).length).toBe(1);
    });

    it('files a stream in its index atomically with the append, and finds it by key (where the store keeps an index)', async () => {
      const prefix = `op-contract:idx${randomUUID().slice(0, 6)}-`;
      const a = `${prefix}a`;
      const b = `${prefix}b`;
      await store.append(a, NO_STREAM, sealEvents(a, undefined, [newEvent('A')]), {
        index: { key: 'verifying', data: { tool: 't1' } },
      });
      await store.append(b, NO_STREAM, sealEvents(b, undefined, [newEvent('B')]), {
        index: { key: 'succeeded', data: { tool: 't2' } },
      });
      const found = await store.indexedStreams(prefix, ['verifying', 'dispatched']);
      if (found === undefined) return;
      expect(found.map((entry) => [entry.stream, entry.key, entry.data])).toEqual([[a, 'verifying', { tool: 't1' }]]);
      const refused = store.append(a, 5, sealEvents(a, { revision: 5, hash: GENESIS_HASH }, [newEvent('X')]), {
        index: { key: 'dispatched', data: {} },
      });
      await expect(refused).rejects.toBeInstanceOf(RevisionConflictError);
      expect((await store.indexedStreams(prefix, ['dispatched'])) ?? []).toEqual([]);
    });

    it('reads a range of a stream from a revision, and its events by id', async () => {
      const stream = freshStream('range');
      const events = sealEvents(
        stream,
        undefined,
        Array.from({ length: 6 }, (_, n) => newEvent('N', { n })),
      );
      await store.append(stream, NO_STREAM, events);
      expect((await store.readStreamRange(stream, 2, 3)).map((e) => e.revision)).toEqual([2, 3, 4]);
      expect((await store.readStreamRange(stream, 4, 10)).map((e) => e.revision)).toEqual([4, 5]);
      expect(await store.readStreamRange(stream, 6, 10)).toEqual([]);
      const byId = await store.readEventsById(stream, [events[4].event_id, events[1].event_id, randomUUID()]);
      expect(byId.map((e) => e.revision)).toEqual([1, 4]);
      expect(await store.readEventsById(stream, [])).toEqual([]);
      expect(await store.readEventsById(freshStream(), [events[0].event_id])).toEqual([]);
    });

    it('keeps a snapshot with its append and folds from it, per fold version (where the store keeps snapshots)', async () => {
      const stream = freshStream('snap');
      const first = sealEvents(stream, undefined, [newEvent('A'), newEvent('B'), newEvent('C')]);
      await store.append(stream, NO_STREAM, first, { snapshot: { fold_version: 'v1', state: { folded: 3 } } });
      const more = sealEvents(stream, { revision: 2, hash: first[2].metadata.hash }, [newEvent('D'), newEvent('E')]);
      await store.append(stream, 2, more);
      const start = await store.readFoldStart(stream, { foldVersion: 'v1' });
      if (!store.keepsSnapshots) {
        // No snapshot: the whole stream, from revision 0.
        expect(start.snapshot).toBeUndefined();
        expect(start.events.map((e) => e.revision)).toEqual([0, 1, 2, 3, 4]);
        return;
      }
      expect(start.snapshot).toEqual({
        fold_version: 'v1',
        revision: 2,
        hash: first[2].metadata.hash,
        state: { folded: 3 },
      });
      // From the snapshot's own event (so its hash can be checked) to the end, and the head with them.
      expect(start.events.map((e) => e.revision)).toEqual([2, 3, 4]);
      expect(start.head?.revision).toBe(4);
      // Another fold version has no snapshot: every event.
      const other = await store.readFoldStart(stream, { foldVersion: 'v2' });
      expect(other.snapshot).toBeUndefined();
      expect(other.events.map((e) => e.revision)).toEqual([0, 1, 2, 3, 4]);
      // Up to a revision before the snapshot: none of it, the events up to there.
      const earlier = await store.readFoldStart(stream, { foldVersion: 'v1', upTo: 1 });
      expect(earlier.snapshot).toBeUndefined();
      expect(earlier.events.map((e) => e.revision)).toEqual([0, 1]);
      // A reader's snapshot is kept while its hash is the stored event's at its revision, not otherwise.
      await store.keepSnapshot(stream, {
        fold_version: 'v3',
        revision: 4,
        hash: more[1].metadata.hash,
        state: { n: 5 },
      });
      await store.keepSnapshot(stream, { fold_version: 'v4', revision: 4, hash: 'f'.repeat(64), state: { n: 5 } });
      expect((await store.readFoldStart(stream, { foldVersion: 'v3' })).snapshot?.state).toEqual({ n: 5 });
      expect((await store.readFoldStart(stream, { foldVersion: 'v4' })).snapshot).toBeUndefined();
      // A refused append keeps no snapshot.
      const stale = sealEvents(stream, { revision: 2, hash: first[2].metadata.hash }, [newEvent('X')]);
      await expect(
        store.append(stream, 2, stale, { snapshot: { fold_version: 'v1', state: { folded: 'stale' } } }),
      ).rejects.toBeInstanceOf(RevisionConflictError);
      expect((await store.readFoldStart(stream, { foldVersion: 'v1' })).snapshot?.revision).toBe(2);
    });

    const faults = () => {
      if (!subject.faults) throw new Error('this store was declared with faults but its factory gave none');
      return subject.faults;
    };

    withFault('softDelete')(
      'refuses a soft-deleted stream: neither read as new nor continued at its old revision',
      async () => {
        const stream = freshStream('deleted');
        await store.append(stream, NO_STREAM, [newEvent('A'), newEvent('B')]);
        await faults().softDelete(stream);
        await expect(store.readStream(stream)).rejects.toBeInstanceOf(StoreIntegrityError);
        // What a ledger that believed the stream new would send; the store takes it at revision 2.
        await expect(store.append(stream, NO_STREAM, [newEvent('C')])).rejects.toBeInstanceOf(StoreIntegrityError);
        await expect(store.readStream(stream)).rejects.toBeInstanceOf(StoreIntegrityError);
      },
    );

    withFault('truncateBefore')(
      'refuses a stream whose first events are gone, and one that reads empty because all are',
      async () => {
        const partly = freshStream('truncated');
        await store.append(partly, NO_STREAM, [newEvent('A'), newEvent('B'), newEvent('C')]);
        await faults().truncateBefore(partly, 2);
        await expect(store.readStream(partly)).rejects.toMatchObject({ name: 'StoreIntegrityError', stream: partly });
        const wholly = freshStream('truncated');
        await store.append(wholly, NO_STREAM, [newEvent('A'), newEvent('B')]);
        await faults().truncateBefore(wholly, 5);
        await expect(store.readStream(wholly)).rejects.toMatchObject({ name: 'StoreIntegrityError', stream: wholly });
      },
    );

    withFault('tombstone')('refuses a hard-deleted stream on read and on append', async () => {
      const stream = freshStream('tombstoned');
      await store.append(stream, NO_STREAM, [newEvent('A')]);
      await faults().tombstone(stream);
      await expect(store.readStream(stream)).rejects.toBeInstanceOf(StoreIntegrityError);
      await expect(store.append(stream, 0, [newEvent('B')])).rejects.toBeInstanceOf(StoreIntegrityError);
    });

    withFault('outage')(
      'answers an outage with StoreUnavailableError and a retry delay, then works again',
      async () => {
        const stream = freshStream('outage');
        await store.append(stream, NO_STREAM, [newEvent('A')]);
        const restore = await faults().outage();
        try {
          for (let attempt = 0; attempt < 2; attempt++) {
            const refused = await store.append(stream, 0, [newEvent('B')]).catch((error: unknown) => error);
            expect(refused).toBeInstanceOf(StoreUnavailableError);
            expect((refused as StoreUnavailableError).retryAfterSeconds).toBeGreaterThan(0);
            await expect(store.readStream(stream)).rejects.toBeInstanceOf(StoreUnavailableError);
          }
        } finally {
          await restore();
        }
        const batch = [newEvent('B')];
        // An append refused in the outage may still have landed: the same ids at the same revision tell.
        await expect(store.append(stream, 0, batch)).resolves.toMatchObject({ revision: 1 });
        expect((await store.readStream(stream)).map((e) => e.type)).toEqual(['A', 'B']);
      },
    );

    it('behaves like a simple model under random appends and reads', async () => {
      type Model = Map<string, string[]>;
      const streams = Array.from({ length: 3 }, () => freshStream('model'));
      class Append implements fc.AsyncCommand<Model, EventStore> {
        constructor(
          readonly index: number,
          readonly count: number,
          readonly stale: boolean,
        ) {}
        check = () => true;
        async run(model: Model, real: EventStore) {
          const stream = streams[this.index];
          const ids = model.get(stream) ?? [];
          const expected = ids.length - 1 + (this.stale ? 1 : 0);
          const events = Array.from({ length: this.count }, () => newEvent('M'));
          if (this.stale) {
            await expect(real.append(stream, expected, events)).rejects.toBeInstanceOf(RevisionConflictError);
            return;
          }
          const result = await real.append(stream, expected, events);
          model.set(stream, [...ids, ...events.map((e) => e.event_id)]);
          expect(result.revision).toBe(ids.length + this.count - 1);
        }
        toString = () => `append(${this.index}, ${this.count}, stale=${this.stale})`;
      }
      class Read implements fc.AsyncCommand<Model, EventStore> {
        constructor(readonly index: number) {}
        check = () => true;
        async run(model: Model, real: EventStore) {
          const stream = streams[this.index];
          const read = await real.readStream(stream);
          expect(read.map((e) => e.event_id)).toEqual(model.get(stream) ?? []);
          expect(read.map((e) => e.revision)).toEqual(read.map((_, i) => i));
        }
        toString = () => `read(${this.index})`;
      }
      const commands = [
        fc.tuple(fc.nat(2), fc.integer({ min: 1, max: 3 }), fc.boolean()).map(([i, n, s]) => new Append(i, n, s)),
        fc.nat(2).map((i) => new Read(i)),
      ];
      await fc.assert(
        fc.asyncProperty(fc.commands(commands, { size: '-1' }), async (cmds) => {
          const model: Model = new Map();
          for (const stream of streams) {
            const existing = await store.readStream(stream);
            model.set(
              stream,
              existing.map((e) => e.event_id),
            );
          }
          await fc.asyncModelRun(() => ({ model, real: store }), cmds);
        }),
        { numRuns: 15, seed: 20261202 },
      );
    });
  });
}
