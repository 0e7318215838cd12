/**
 * The PostgreSQL store of the shared read models (docs/postgres.md, "Read models"), with two
 * stores standing for two instances: one projector at a time, elected by an advisory lock that
 * drops with its session; publications numbered in commit order and read back whole after any
 * number; a reset empties a projection for every copy; a projector whose session ended publishes
 * nothing more.
 */
import { Client } from 'pg';
import { PostgresSharedReadModelStore } from '../../src/adapters/postgres/postgres-read-model.adapter';
import { mergeChanges } from '../../src/projection-engine/projector-election';
import type { ProjectorLease, ReadModelChanges } from '../../src/store/shared-read-model.port';
import { describeWithPostgres } from '../support/postgres';
import { untilValue } from '../support/until';

const none: ReadModelChanges = { resets: [], docs: [], links: [], checkpoints: [] };

describeWithPostgres('the shared read models on PostgreSQL', (database) => {
  const stores: PostgresSharedReadModelStore[] = [];
  const leases: ProjectorLease[] = [];
  const open = () => {
    const store = new PostgresSharedReadModelStore({ connectionString: database().url });
    stores.push(store);
    return store;
  };
  afterEach(async () => {
    for (const lease of leases.splice(0)) await lease.release();
  });
  afterAll(async () => {
    for (const store of stores.splice(0)) await store.close();
  });

  it('elects one projector at a time and another once the first gives the election up', async () => {
    const [a, b] = [open(), open()];
    const first = await a.tryLead();
    expect(first).toBeDefined();
    leases.push(first as ProjectorLease);
    expect(await b.tryLead()).toBeUndefined();
    await (first as ProjectorLease).release();
    const second = await b.tryLead();
    expect(second).toBeDefined();
    leases.push(second as ProjectorLease);
  });

  it('lets another instance lead when the projector’s session is ended by the server, and refuses its publications', async () => {
    const [a, b] = [open(), open()];
    const lease = (await a.tryLead()) as ProjectorLease;
    leases.push(lease);
    const lost = new Promise<Error>((resolve) => lease.onLost(resolve));
    // What a kill -9 or a cut leaves the server to do: end the session that holds the lock.
    const admin = new Client({ connectionString: database().url });
    await admin.connect();
    try {
      await admin.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'recovery-ledger-projector'",
      );
    } finally {
      await admin.end();
    }
    await lost;
    await expect(lease.publish({ ...none, docs: [{ projection: 'p', key: 'k', doc: '{}' }] })).rejects.toThrow();
    const next = await untilValue('another instance to be elected', () => b.tryLead());
    leases.push(next);
  });

  it('reads back every publication after a change number, rows at their last value, resets for every copy', async () => {
    const [projector, copy] = [open(), open()];
    const lease = (await projector.tryLead()) as ProjectorLease;
    leases.push(lease);
    const start = (await copy.pull(0)).change;
    const one = await lease.publish({
      resets: [],
      docs: [
        { projection: 'p', key: 'a', doc: '{"n":1}' },
        { projection: 'p', key: 'b', doc: '{"n":1}' },
      ],
      links: [{ projection: 'p', stream: 's', link: 'a' }],
      checkpoints: [{ projection: 'p', version: 3, position: 10, recordedAt: '2026-01-01T00:00:00.000Z' }],
    });
    const two = await lease.publish({
      ...none,
      docs: [{ projection: 'p', key: 'a', doc: '{"n":2}' }],
      checkpoints: [{ projection: 'p', version: 3, position: 20, recordedAt: null }],
    });
    expect(two).toBe(one + 1);

    const all = await copy.pull(start);
    expect(all.change).toBe(two);
    expect(all.docs.map((row) => [row.key, row.doc]).sort()).toEqual([
      ['a', '{"n":2}'],
      ['b', '{"n":1}'],
    ]);
    expect(all.links).toEqual([{ projection: 'p', stream: 's', link: 'a' }]);
    expect(all.checkpoints).toEqual([{ projection: 'p', version: 3, position: 20, recordedAt: null }]);
    expect(await lease.versions()).toMatchObject({ p: 3 });

    const after = await copy.pull(one);
    expect(after.docs.map((row) => row.key)).toEqual(['a']);
    expect(after.links).toEqual([]);
    expect((await copy.pull(two)).docs).toEqual([]);

    const resetCount = all.resetCounts.p ?? 0;
    const three = await lease.publish({ ...none, resets: ['p'], docs: [{ projection: 'p', key: 'c', doc: '{}' }] });
    const reset = await copy.pull(two);
    expect(reset.change).toBe(three);
    expect(reset.resetCounts.p).toBe(resetCount + 1);
    expect((await copy.pull(0)).docs.filter((row) => row.projection === 'p').map((row) => row.key)).toEqual(['c']);
  });

  it('wakes the other instances when a publication commits', async () => {
    const [projector, copy] = [open(), open()];
    let woken = 0;
    const stop = copy.onPublished(() => woken++);
    try {
      // The listener connects in the background; publications are made until one is heard.
      const lease = (await projector.tryLead()) as ProjectorLease;
      leases.push(lease);
      await untilValue('a notification of a publication', async () => {
        await lease.publish({ ...none, docs: [{ projection: 'q', key: 'k', doc: '{}' }] });
        return woken > 0;
      });
    } finally {
      stop();
    }
  });
});

describe('publications merged', () => {
  it('keeps the last row of each key and drops what a later reset emptied', () => {
    const merged = mergeChanges([
      {
        resets: [],
        docs: [
          { projection: 'p', key: 'a', doc: '1' },
          { projection: 'q', key: 'a', doc: '1' },
        ],
        links: [{ projection: 'p', stream: 's', link: 'a' }],
        checkpoints: [{ projection: 'p', version: 1, position: 5, recordedAt: null }],
      },
      { ...none, docs: [{ projection: 'q', key: 'a', doc: '2' }] },
      { ...none, resets: ['p'], docs: [{ projection: 'p', key: 'b', doc: '1' }] },
    ]);
    expect(merged).toEqual({
      resets: ['p'],
      docs: [
        { projection: 'q', key: 'a', doc: '2' },
        { projection: 'p', key: 'b', doc: '1' },
      ],
      links: [],
      checkpoints: [],
    });
  });
});
