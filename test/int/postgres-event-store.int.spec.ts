/**
 * The shared event-store contract on the PostgreSQL adapter, then what only it has to get right:
 * a follower reading "after position N" never passes an append that commits late (the high-water
 * mark, src/adapters/postgres/postgres-event-store.adapter.ts), and every instance's followers see
 * what another instance appends.
 */
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { NO_STREAM, type StoredEvent } from '../../src/store/event-store.port';
import {
  announceAppends,
  PostgresEventStore,
  writeAppend,
} from '../../src/adapters/postgres/postgres-event-store.adapter';
import { openPool } from '../../src/adapters/postgres/postgres-database';
import { Notifier } from '../../src/adapters/postgres/postgres-notifier';
import { newEvent, testEventStore } from '../contract/event-store.contract';
import { describeWithPostgres } from '../support/postgres';
import { until } from '../support/until';

describeWithPostgres('PostgreSQL event store', (database) => {
  // The outage case stops the whole server as a crash would and starts it again: on a throwaway
  // cluster only (a shared DATABASE_URL server is not this test's to stop).
  const crashable = !process.env.DATABASE_URL;
  testEventStore(
    'postgres (pg pool, one transaction per append)',
    async () => {
      const store = new PostgresEventStore({ connectionString: database().url });
      const crash = database().crash;
      return {
        store,
        cleanup: () => store.close(),
        faults: {
          outage: async () => {
            if (!crash) throw new Error('no outage can be caused on a server at DATABASE_URL');
            const start = crash();
            return async () => start();
          },
          softDelete: () => Promise.reject(new Error('the ledger never deletes; no such fault here')),
          truncateBefore: () => Promise.reject(new Error('the ledger never truncates; no such fault here')),
          tombstone: () => Promise.reject(new Error('the ledger never deletes; no such fault here')),
        },
      };
    },
    { faults: crashable ? ['outage'] : [] },
  );

  describe('an append that commits after a later one', () => {
    let store: PostgresEventStore;
    let unguarded: PostgresEventStore;
    let held: Client;
    beforeEach(async () => {
      store = new PostgresEventStore({ connectionString: database().url });
      unguarded = new PostgresEventStore({ connectionString: database().url, unsafeIgnoreHighWaterMark: true });
      held = new Client({ connectionString: database().url });
      await held.connect();
      // The tables exist before the held transaction starts, so it takes no lock a writer waits on.
      await store.headPosition();
    });
    afterEach(async () => {
      await held.end();
      await Promise.all([store.close(), unguarded.close()]);
    });

    /** Starts an append on a connection of its own and leaves it uncommitted; answers its position. */
    async function holdAppend(stream: string, type: string): Promise<number> {
      await held.query('BEGIN');
      const position = await writeAppend(held, stream, NO_STREAM, [newEvent(type)]);
      if (position === undefined) throw new Error('the held append was refused');
      return position;
    }

    const ours = (prefix: string) => (events: StoredEvent[]) => events.filter((e) => e.stream.startsWith(prefix));

    it('is not passed by a reader: it waits below the lower position, then reads both in order', async () => {
      const prefix = `race-${randomUUID().slice(0, 8)}`;
      const start = await store.headPosition();
      const low = await holdAppend(`${prefix}-low`, 'Low');
      const high = await store.append(`${prefix}-high`, NO_STREAM, [newEvent('High')]);
      expect(high.position).toBeGreaterThan(low);
      // Committed, readable by its stream, yet not in the log a follower reads: a row below it is open.
      expect((await store.readStream(`${prefix}-high`)).map((e) => e.type)).toEqual(['High']);
      const whileHeld = await store.readAll({ after: start, limit: 1000 });
      expect(whileHeld.filter((event) => event.position >= low)).toEqual([]);

      await held.query('COMMIT');
      const both = await until(
        () => store.readAll({ after: start, limit: 1000, streamPrefix: prefix }),
        (events) => events.length === 2,
        'both appends readable once the lower one committed',
      );
      expect(both.map((e) => [e.type, e.position])).toEqual([
        ['Low', low],
        ['High', high.position],
      ]);
    });

    it('is delivered to a live subscription that started while it was held, in log order', async () => {
      const prefix = `race-sub-${randomUUID().slice(0, 8)}`;
      const seen: StoredEvent[] = [];
      // Counts the follower's finished reads of the log, to know it has looked while the lower one was held.
      let reads = 0;
      const readAll = store.readAll.bind(store);
      jest.spyOn(store, 'readAll').mockImplementation(async (options) => {
        const events = await readAll(options);
        reads++;
        return events;
      });
      const subscription = store.subscribe(
        { after: await store.headPosition(), streamPrefix: prefix },
        { onEvents: (events) => void seen.push(...events) },
      );
      try {
        await holdAppend(`${prefix}-low`, 'Low');
        await store.append(`${prefix}-high`, NO_STREAM, [newEvent('High')]);
        const readsBefore = reads;
        await until(
          async () => reads,
          (count) => count >= readsBefore + 2,
          'the subscription to read the log twice while the lower append is held',
        );
        // What the store's own append does after its COMMIT.
        await held.query('COMMIT');
        await announceAppends(held);
        await until(
          async () => seen.length,
          (count) => count >= 2,
          'the subscription to deliver both',
        );
      } finally {
        await subscription.close();
      }
      expect(seen.map((e) => e.type)).toEqual(['Low', 'High']);
    });

    it('would be skipped for ever by a reader without the high-water mark (why the mark is there)', async () => {
      const prefix = `race-unguarded-${randomUUID().slice(0, 8)}`;
      const start = await unguarded.headPosition();
      await holdAppend(`${prefix}-low`, 'Low');
      await unguarded.append(`${prefix}-high`, NO_STREAM, [newEvent('High')]);
      const first = ours(prefix)(await unguarded.readAll({ after: start, limit: 1000 }));
      expect(first.map((e) => e.type)).toEqual(['High']);
      await held.query('COMMIT');
      // A follower goes on after what it read: the lower append is behind it now.
      const next = ours(prefix)(await unguarded.readAll({ after: first[0].position, limit: 1000 }));
      expect(next).toEqual([]);
    });
  });

  it('ends a transaction an instance left open mid-append, so followers are not held below it for ever', async () => {
    const store = new PostgresEventStore({ connectionString: database().url });
    // The pool a cut-off instance had: its transaction idles, and the server ends the session.
    const pool = openPool({ connectionString: database().url, idleInTransactionTimeoutMs: 300 });
    pool.on('error', () => undefined);
    const client = await pool.connect();
    client.on('error', () => undefined);
    const prefix = `abandoned-${randomUUID().slice(0, 8)}`;
    try {
      const start = await store.headPosition();
      await client.query('BEGIN');
      await writeAppend(client, `${prefix}-low`, NO_STREAM, [newEvent('Abandoned')]);
      await store.append(`${prefix}-high`, NO_STREAM, [newEvent('High')]);
      const read = await until(
        () => store.readAll({ after: start, limit: 1000, streamPrefix: prefix }),
        (events) => events.length > 0,
        'the follower to pass the abandoned transaction once the server ended it',
      );
      // Rolled back with its session: never in the log, and nothing after it was skipped.
      expect(read.map((e) => e.type)).toEqual(['High']);
    } finally {
      client.release(true);
      await pool.end();
      await store.close();
    }
  });

  it("follows what another instance's store appends (LISTEN/NOTIFY across connections)", async () => {
    const writer = new PostgresEventStore({ connectionString: database().url });
    const follower = new PostgresEventStore({ connectionString: database().url, pollIntervalMs: 60_000 });
    const prefix = `instances-${randomUUID().slice(0, 8)}`;
    const seen: StoredEvent[] = [];
    const subscription = follower.subscribe(
      { after: await follower.headPosition(), streamPrefix: prefix },
      { onEvents: (events) => void seen.push(...events) },
    );
    try {
      // The follower's poll is a minute away: within the wait below only a notification wakes it.
      await writer.append(`${prefix}-a`, NO_STREAM, [newEvent('A0'), newEvent('A1')]);
      await until(
        async () => seen.length,
        (count) => count >= 2,
        'the follower to be woken by the writer',
        20_000,
      );
      expect(seen.map((e) => e.type)).toEqual(['A0', 'A1']);
    } finally {
      await subscription.close();
      await Promise.all([writer.close(), follower.close()]);
    }
  });

  it('keeps a notification that came while a follower was reading for its next wait', async () => {
    const channel = `test_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
    const notifier = new Notifier({ connectionString: database().url }, channel);
    const sender = new Client({ connectionString: database().url });
    await sender.connect();
    try {
      // The first wait opens the LISTEN connection, and is woken once it listens.
      await notifier.wait(60_000, () => false);
      // A follower takes the count, starts its read; a commit's notification arrives meanwhile,
      // with nobody waiting.
      const beforeRead = notifier.heard();
      await sender.query(`SELECT pg_notify('${channel}', '')`);
      await until(
        async () => notifier.heard(),
        (count) => count > beforeRead,
        'the notification to arrive',
      );
      // The follower's wait after that read ends at once: not at its poll, a minute away.
      let woken = false;
      const waited = notifier.wait(60_000, () => false, beforeRead).then(() => (woken = true));
      await new Promise((resolve) => setImmediate(resolve));
      expect(woken).toBe(true);
      await waited;
      // A wait with the count up to date waits for the next notification.
      let early = false;
      const next = notifier.wait(60_000, () => false, notifier.heard()).then(() => (early = true));
      await new Promise((resolve) => setImmediate(resolve));
      expect(early).toBe(false);
      await sender.query(`SELECT pg_notify('${channel}', '')`);
      await next;
    } finally {
      notifier.close();
      await sender.end();
    }
  });

  it('wakes a follower for every burst of appends from two instances, though their notifications are coalesced', async () => {
    // Appends notify after their COMMIT, at most one notification in flight per store: a commit
    // that lands while one is in flight gets one more after it. A follower whose poll is a minute
    // away is woken by notifications alone; if one that its last appends needed were dropped (or
    // arrived while it was reading and were lost to it), a burst would not be delivered within the
    // wait below, and the count would stop short.
    const writers = [
      new PostgresEventStore({ connectionString: database().url }),
      new PostgresEventStore({ connectionString: database().url }),
    ];
    const follower = new PostgresEventStore({ connectionString: database().url, pollIntervalMs: 60_000 });
    const prefix = `bursts-${randomUUID().slice(0, 8)}`;
    const seen: StoredEvent[] = [];
    const subscription = follower.subscribe(
      { after: await follower.headPosition(), streamPrefix: prefix },
      { onEvents: (events) => void seen.push(...events) },
    );
    const bursts = 25;
    const perBurst = 8;
    try {
      for (let burst = 0; burst < bursts; burst++) {
        await Promise.all(
          Array.from({ length: perBurst }, (_, index) =>
            writers[index % 2].append(`${prefix}-${burst}-${index}`, NO_STREAM, [newEvent(`E${burst}`)]),
          ),
        );
        await until(
          async () => seen.length,
          (count) => count >= (burst + 1) * perBurst,
          `the follower to be woken for burst ${burst} by notifications alone`,
          20_000,
        );
      }
      const appended = bursts * perBurst;
      expect(seen).toHaveLength(appended);
      expect(new Set(seen.map((event) => event.stream)).size).toBe(appended);
      const positions = seen.map((event) => event.position);
      expect(positions).toEqual([...positions].sort((a, b) => a - b));
      // Coalesced, never more than one a commit.
      const sent = writers[0].announcements + writers[1].announcements;
      expect(sent).toBeGreaterThan(0);
      expect(sent).toBeLessThanOrEqual(appended);
    } finally {
      await subscription.close();
      await Promise.all([...writers.map((writer) => writer.close()), follower.close()]);
    }
  });
});
