/**
 * Outages, on the EventStoreDB protocol double: connections dropped mid-subscription and
 * mid-append, a node that says it is not ready, a node restarted on the same port, a node that
 * never answers. The consumer must end with every event exactly once, in order; an append must end
 * in a result or a typed StoreUnavailableError, never hang and never be half written.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { NO_STREAM, StoreUnavailableError, type NewEvent, type StoredEvent } from '../../src/store/event-store.port';
import { InvalidEventError } from '../../src/adapters/eventstoredb/eventstoredb-event-codec';
import {
  EventStoreDbEventStore,
  type EventStoreDbTuning,
} from '../../src/adapters/eventstoredb/eventstoredb-event-store.adapter';
import type { SubscriptionStatus } from '../../src/adapters/eventstoredb/eventstoredb-subscription';
import { reconnectDelay } from '../../src/adapters/eventstoredb/reconnect-backoff';
import { newEvent } from '../contract/event-store.contract';
import { EventStoreDbProtocolDouble } from '../support/eventstoredb-protocol-double';

const FAST_RECOVERY: EventStoreDbTuning = {
  appendTimeoutMs: 2_000,
  readTimeoutMs: 2_000,
  healthTimeoutMs: 500,
  resubscribeBackoff: { initialDelayMs: 20, maxDelayMs: 200 },
};

interface Consumer {
  seen: StoredEvent[];
  statuses: SubscriptionStatus[];
  /** Resolves once `count` events have arrived. */
  reach(count: number): Promise<void>;
}

function consumer(): Consumer & {
  onEvents(events: StoredEvent[]): Promise<void>;
  onStatus(status: SubscriptionStatus): void;
} {
  const seen: StoredEvent[] = [];
  const statuses: SubscriptionStatus[] = [];
  const waiters: Array<{ count: number; resolve(): void }> = [];
  return {
    seen,
    statuses,
    async onEvents(events) {
      seen.push(...events);
      // A consumer that takes its time, like a projection writing to SQLite.
      await sleep(1);
      for (const waiter of waiters.filter((w) => seen.length >= w.count)) waiter.resolve();
    },
    onStatus(status) {
      statuses.push(status);
    },
    reach(count) {
      if (seen.length >= count) return Promise.resolve();
      return new Promise((resolve) => waiters.push({ count, resolve }));
    },
  };
}

/**
 * Appends as the ledger does through an outage: a StoreUnavailableError means the outcome is
 * unknown, so the same batch is sent again at the same expected revision until it is answered.
 */
async function appendMany(
  store: EventStoreDbEventStore,
  prefix: string,
  streams: number,
  batches: number,
): Promise<number> {
  const revisions = new Map<string, number>();
  let retries = 0;
  for (let batch = 0; batch < batches; batch++) {
    for (let s = 0; s < streams; s++) {
      const stream = `${prefix}-${s}`;
      const revision = revisions.get(stream) ?? NO_STREAM;
      const events = [newEvent(`E${batch}`), newEvent(`E${batch}`)];
      for (;;) {
        try {
          revisions.set(stream, (await store.append(stream, revision, events)).revision);
          break;
        } catch (error) {
          if (!(error instanceof StoreUnavailableError)) throw error;
          retries += 1;
          await sleep(10);
        }
      }
    }
  }
  return retries;
}

function expectExactlyOnceInOrder(seen: StoredEvent[], expected: StoredEvent[]): void {
  expect(seen.map((event) => event.event_id)).toEqual(expected.map((event) => event.event_id));
  expect(new Set(seen.map((event) => event.event_id)).size).toBe(seen.length);
  for (let index = 1; index < seen.length; index++)
    expect(seen[index].position).toBeGreaterThan(seen[index - 1].position);
}

describe('EventStoreDB adapter through outages (protocol double)', () => {
  let double: EventStoreDbProtocolDouble;
  let store: EventStoreDbEventStore;
  let events: ReturnType<typeof consumer>;
  let onStatus: (status: SubscriptionStatus) => void;

  beforeEach(async () => {
    double = await EventStoreDbProtocolDouble.start();
    events = consumer();
    onStatus = events.onStatus;
    store = new EventStoreDbEventStore({
      connectionString: double.connectionString,
      ...FAST_RECOVERY,
      maxBatchSize: 16,
      onStatusChange: (status) => onStatus(status),
    });
  });
  afterEach(async () => {
    double.hooks = {};
    double.setUnavailable(false);
    await store.close();
    await double.stop();
  });

  it('re-subscribes after drops mid-catch-up and mid-live; the consumer gets every event once, in order', async () => {
    const prefix = `op-outage:${randomUUID().slice(0, 8)}`;
    await appendMany(store, prefix, 5, 30); // 300 events to catch up on
    const healthDuringOutage: Array<Promise<{ ok: boolean; detail?: string }>> = [];
    onStatus = (status) => {
      events.onStatus(status);
      // What a readiness probe sees while the subscription is down.
      if (status.state === 'reconnecting') healthDuringOutage.push(store.health());
    };

    const subscription = store.subscribe({ after: 0, streamPrefix: prefix }, events);
    await events.reach(60);
    expect(double.dropConnections()).toBeGreaterThan(0); // mid-catch-up
    await events.reach(300);
    const live = appendMany(store, `${prefix}-live`, 2, 25); // 100 more, while the consumer follows live
    await events.reach(340);
    double.dropConnections(); // mid-live, with appends still arriving
    await live;
    await events.reach(400);
    await sleep(50); // nothing more may arrive
    await subscription.close();

    const expected = await store.readAll({ after: 0, limit: 1000, streamPrefix: prefix });
    expect(expected).toHaveLength(400);
    expectExactlyOnceInOrder(events.seen, expected);
    expect(events.statuses.map((status) => status.state)).toEqual(expect.arrayContaining(['live', 'reconnecting']));
    expect(store.stats().resubscriptions).toBeGreaterThanOrEqual(2);
    const health = await Promise.all(healthDuringOutage);
    expect(health.length).toBeGreaterThan(0);
    expect(health.every((h) => !h.ok && /resubscribing from position/.test(h.detail ?? ''))).toBe(true);
    expect(await store.health()).toEqual({ ok: true });
  });

  it('rides out a node restart on the same port: appends are typed 503s meanwhile, the feed resumes exact', async () => {
    const prefix = `op-restart:${randomUUID().slice(0, 8)}`;
    const stream = `${prefix}-s`;
    await store.append(stream, NO_STREAM, [newEvent('Before')]);
    const subscription = store.subscribe({ after: 0, streamPrefix: prefix }, events);
    await events.reach(1);

    await double.stop();
    const started = Date.now();
    const refused = await store.append(stream, 0, [newEvent('During')]).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(StoreUnavailableError);
    expect((refused as StoreUnavailableError).retryAfterSeconds).toBeGreaterThan(0);
    expect(Date.now() - started).toBeLessThan(FAST_RECOVERY.appendTimeoutMs as number);
    await expect(store.readStream(stream)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect((await store.health()).ok).toBe(false);

    await double.start();
    const after = await store.append(stream, 0, [newEvent('After')]);
    expect(after.revision).toBe(1);
    await events.reach(2);
    await subscription.close();
    expect(events.seen.map((event) => event.type)).toEqual(['Before', 'After']);
    expect(double.log.events.filter((event) => event.stream === stream)).toHaveLength(2);
  });

  it('answers StoreUnavailableError, fast, while the node is not ready, and writes nothing', async () => {
    const stream = `op-unready:${randomUUID()}`;
    await store.append(stream, NO_STREAM, [newEvent('First')]);
    const logLength = double.log.events.length;
    double.setUnavailable(true);
    for (let attempt = 0; attempt < 3; attempt++) {
      const started = Date.now();
      const error = await store.append(stream, 0, [newEvent('Refused')]).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect(Date.now() - started).toBeLessThan(1_000);
    }
    await expect(store.readAll({ after: 0, limit: 10 })).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await store.health()).toMatchObject({ ok: false });
    expect(double.log.events.length).toBe(logLength);

    double.setUnavailable(false);
    await expect(store.append(stream, 0, [newEvent('Accepted')])).resolves.toMatchObject({ revision: 1 });
    expect((await store.readStream(stream)).map((event) => event.type)).toEqual(['First', 'Accepted']);
  });

  describe.each([
    ['Append', false],
    ['BatchAppend', true],
  ])('an append in flight over %s', (path, batchAppend) => {
    beforeEach(async () => {
      await store.close();
      store = new EventStoreDbEventStore({ connectionString: double.connectionString, ...FAST_RECOVERY, batchAppend });
    });
    afterEach(() => {
      expect(double.callCounts[path as 'Append' | 'BatchAppend']).toBeGreaterThan(0);
    });

    it('dropped before its commit: typed 503, nothing written, the retry appends it', async () => {
      const stream = `op-drop-before:${randomUUID()}`;
      const batch = [newEvent('A'), newEvent('B')];
      double.hooks = { beforeCommit: () => void double.dropConnections() };
      await expect(store.append(stream, NO_STREAM, batch)).rejects.toBeInstanceOf(StoreUnavailableError);
      double.hooks = {};
      expect(await store.readStream(stream)).toEqual([]);
      await expect(store.append(stream, NO_STREAM, batch)).resolves.toMatchObject({ revision: 1 });
      expect((await store.readStream(stream)).map((event) => event.type)).toEqual(['A', 'B']);
    });

    it('dropped after its commit: typed 503, and the retry with the same ids gets the original result', async () => {
      const stream = `op-drop-after:${randomUUID()}`;
      const batch: NewEvent[] = [newEvent('A'), newEvent('B'), newEvent('C')];
      double.hooks = { afterCommit: () => void double.dropConnections() };
      await expect(store.append(stream, NO_STREAM, batch)).rejects.toBeInstanceOf(StoreUnavailableError);
      double.hooks = {};
      const written = await store.readStream(stream);
      expect(written.map((event) => event.event_id)).toEqual(batch.map((event) => event.event_id));
      const retried = await store.append(stream, NO_STREAM, batch);
      expect(retried).toEqual({ revision: 2, position: written[2].position });
      expect(await store.readStream(stream)).toHaveLength(3);
    });

    it('never answered: the adapter deadline turns it into a typed 503 instead of a hang', async () => {
      const quick = new EventStoreDbEventStore({
        connectionString: double.connectionString,
        ...FAST_RECOVERY,
        appendTimeoutMs: 300,
        batchAppend,
      });
      try {
        const stream = `op-silent:${randomUUID()}`;
        double.hooks = { beforeCommit: () => new Promise<void>(() => undefined) };
        const started = Date.now();
        await expect(quick.append(stream, NO_STREAM, [newEvent()])).rejects.toBeInstanceOf(StoreUnavailableError);
        expect(Date.now() - started).toBeLessThan(1_500);
        double.hooks = {};
        expect(await quick.readStream(stream)).toEqual([]);
        await expect(quick.append(stream, NO_STREAM, [newEvent()])).resolves.toMatchObject({ revision: 0 });
      } finally {
        await quick.close();
      }
    });
  });

  it('refuses a BigInt anywhere in data or metadata at once, with a typed error, sending nothing', async () => {
    const stream = `op-bigint:${randomUUID()}`;
    const sentBefore = double.callCounts.BatchAppend + double.callCounts.Append;
    const inData = newEvent('Paid', { amount: { minor: 1050n } as never });
    const inMetadata = newEvent('Paid');
    (inMetadata.metadata as unknown as Record<string, unknown>).sequence = 7n;
    for (const [event, path] of [
      [inData, 'events[0].data.amount.minor'],
      [inMetadata, 'events[0].metadata.sequence'],
    ] as const) {
      const started = Date.now();
      const error = await store.append(stream, NO_STREAM, [event]).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(InvalidEventError);
      expect((error as InvalidEventError).path).toBe(path);
      expect(Date.now() - started).toBeLessThan(250);
    }
    expect(double.callCounts.BatchAppend + double.callCounts.Append).toBe(sentBefore);
    expect(await store.readStream(stream)).toEqual([]);
  });

  it('stops a subscription whose handler fails and reports it once, without retrying', async () => {
    const prefix = `op-handler:${randomUUID().slice(0, 8)}`;
    await store.append(`${prefix}-s`, NO_STREAM, [newEvent(), newEvent()]);
    const failure = new Error('projection failed');
    let calls = 0;
    const reported = new Promise<Error>((resolve) => {
      store.subscribe(
        { after: 0, streamPrefix: prefix },
        {
          onEvents: () => {
            calls += 1;
            throw failure;
          },
          onError: resolve,
        },
      );
    });
    expect(await reported).toBe(failure);
    await sleep(100);
    expect(calls).toBe(1);
    expect(store.stats().subscriptions).toBe(0);
  });
});

describe('reconnect backoff', () => {
  const policy = { initialDelayMs: 100, maxDelayMs: 5_000 };

  it('starts at the initial delay, doubles its ceiling, and stays within the cap', () => {
    expect(reconnectDelay(1, { ...policy, random: () => 1 })).toBe(100);
    expect(reconnectDelay(2, { ...policy, random: () => 0 })).toBe(100);
    expect(reconnectDelay(2, { ...policy, random: () => 1 })).toBe(200);
    expect(reconnectDelay(4, { ...policy, random: () => 1 })).toBe(800);
    for (let attempt = 1; attempt < 40; attempt++) {
      const delay = reconnectDelay(attempt, policy);
      expect(delay).toBeGreaterThanOrEqual(100);
      expect(delay).toBeLessThanOrEqual(5_000);
    }
    expect(reconnectDelay(30, { ...policy, random: () => 0 })).toBe(2_500);
  });
});
