/**
 * The projector election over the shared read models (docs/postgres.md, "Read models"), with the
 * real engine, event store and copies, and a projection that counts its folds: only the elected
 * instance folds the log, a copy reaches every position from publications alone, a new version
 * empties the projection for every copy, and an instance whose session the server ends while it
 * projects reads the shared read models afresh.
 */
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import type { AnyProjection, ProjectedEvent } from '@recovery-ledger/projections';
import { PostgresEventStore } from '../../src/adapters/postgres/postgres-event-store.adapter';
import { PostgresSharedReadModelStore } from '../../src/adapters/postgres/postgres-read-model.adapter';
import { SqliteReadModel } from '../../src/adapters/sqlite/sqlite-read-model.store';
import { SharedProjectionRunner } from '../../src/projection-engine/projector-election';
import { NO_STREAM } from '../../src/store/event-store.port';
import { newEvent } from '../contract/event-store.contract';
import { describeWithPostgres } from '../support/postgres';
import { until } from '../support/until';

interface CountDoc {
  position: number;
  count: number;
}

/** Counts each stream's events, `version` for each (so a rebuild shows); `folds` counts every call of its fold. */
function counting(version: number, folds: { n: number }): AnyProjection {
  return {
    name: 'event_count',
    version,
    keyOf: (event: ProjectedEvent) => event.stream,
    evolve: (doc: CountDoc | undefined, event: ProjectedEvent): CountDoc => {
      folds.n++;
      if (doc && event.position <= doc.position) return doc;
      return { position: event.position, count: (doc?.count ?? 0) + version };
    },
  };
}

interface Instance {
  runner: SharedProjectionRunner;
  readModel: SqliteReadModel;
  folds: { n: number };
  store: PostgresEventStore;
}

describeWithPostgres('the projector election on PostgreSQL', (database) => {
  const instances: Instance[] = [];
  const start = (version = 1, electionMs = 100): Instance => {
    const folds = { n: 0 };
    const store = new PostgresEventStore({ connectionString: database().url });
    const readModel = SqliteReadModel.open({ file: ':memory:' });
    const runner = new SharedProjectionRunner({
      store,
      shared: new PostgresSharedReadModelStore({ connectionString: database().url }),
      readModel,
      projections: [counting(version, folds)],
      pollMs: 100,
      electionMs,
    });
    runner.start();
    const instance = { runner, readModel, folds, store };
    instances.push(instance);
    return instance;
  };
  const stop = async (instance: Instance) => {
    instances.splice(instances.indexOf(instance), 1);
    await instance.runner.stop();
    instance.readModel.close();
    await instance.store.close();
  };
  afterAll(async () => {
    for (const instance of [...instances]) await stop(instance);
  });

  const streams = Array.from({ length: 4 }, (_, index) => `op-${randomUUID().slice(0, 8)}-${index}`);
  const revisions = new Map<string, number>();
  /** Appends `perStream` events to each stream; answers the last position. */
  const append = async (store: PostgresEventStore, perStream: number): Promise<number> => {
    let position = 0;
    for (const stream of streams) {
      for (let i = 0; i < perStream; i++) {
        const result = await store.append(stream, revisions.get(stream) ?? NO_STREAM, [newEvent('Counted')]);
        revisions.set(stream, result.revision);
        position = Math.max(position, result.position);
      }
    }
    return position;
  };
  const counts = (instance: Instance) =>
    streams.map((stream) => instance.readModel.getDoc<CountDoc>('event_count', stream)?.count);
  const projector = () =>
    until(
      async () => instances.filter((instance) => instance.runner.projecting),
      (elected) => elected.length === 1,
      'one projector',
    ).then(([elected]) => elected);

  it('lets only the projector fold; a copy reaches every position from what was published', async () => {
    const [a, b] = [start(), start()];
    const elected = await projector();
    const copy = elected === a ? b : a;
    const last = await append(a.store, 3);
    expect(await copy.runner.waitForPosition(last, 20_000)).toBe(true);
    expect(await elected.runner.waitForPosition(last, 20_000)).toBe(true);
    expect(counts(copy)).toEqual([3, 3, 3, 3]);
    expect(counts(elected)).toEqual([3, 3, 3, 3]);
    expect(elected.folds.n).toBeGreaterThan(0);
    expect(copy.folds.n).toBe(0);
    expect(copy.runner.status().shared).toEqual({ role: 'copy' });
  });

  it('reads the shared read models afresh when the server ends the projector’s session', async () => {
    const elected = await projector();
    const admin = new Client({ connectionString: database().url });
    await admin.connect();
    try {
      await admin.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'recovery-ledger-projector'",
      );
    } finally {
      await admin.end();
    }
    await until(
      async () => elected.runner.projecting,
      (projecting) => !projecting,
      'the old projector to stop projecting',
    );
    const next = await projector();
    const last = await append(next.store, 2);
    for (const instance of instances) {
      expect(await instance.runner.waitForPosition(last, 20_000)).toBe(true);
      expect(counts(instance)).toEqual([5, 5, 5, 5]);
    }
  });

  it('builds a projection of a changed version beside what every copy serves, and publishes it whole', async () => {
    const elected = await projector();
    const copy = instances.find((instance) => instance !== elected) as Instance;
    await stop(copy);
    // A copy that will not be elected, then the projector of version 1 gives way to one of version 2.
    const follower = start(1, 3_600_000);
    await until(
      async () => follower.runner.status().state,
      (state) => state === 'live',
      'the copy to read the shared read models',
    );
    expect(counts(follower)).toEqual([5, 5, 5, 5]);
    await stop(elected);
    const upgraded = start(2);
    await projector();
    expect(upgraded.runner.projecting).toBe(true);
    // What the copy serves until the new version is published: version 1's counts, never nothing.
    const seen: string[] = [];
    await until(
      async () => {
        const now = counts(follower);
        seen.push(JSON.stringify(now));
        return now;
      },
      (now) => now[0] === 10,
      'the copy to take the new version, folded again at two a piece',
    );
    for (const served of seen) expect(['[5,5,5,5]', '[10,10,10,10]']).toContain(served);
    const last = await append(upgraded.store, 1);
    for (const instance of [upgraded, follower]) {
      expect(await instance.runner.waitForPosition(last, 20_000)).toBe(true);
      // Folded again from the first event at two a piece: 6 events, not 5 of version 1 and one of 2.
      expect(counts(instance)).toEqual([12, 12, 12, 12]);
    }
    expect(follower.folds.n).toBe(0);
  });

  it('publishes a projection the projector rebuilt beside its live tables whole at the swap, so a damaged copy is mended', async () => {
    const elected = await projector();
    const copy = instances.find((instance) => instance !== elected) as Instance;
    const last = await append(elected.store, 1);
    for (const instance of instances) expect(await instance.runner.waitForPosition(last, 20_000)).toBe(true);
    const expected = counts(elected);
    // A row of the copy written by hand, as damage: only a publication of the whole projection mends it.
    copy.readModel.writeDoc('event_count', streams[0], { position: last, count: 999 });
    expect(counts(copy)[0]).toBe(999);
    await elected.runner.rebuild(['event_count']);
    await until(
      async () => counts(copy),
      (seen) => seen[0] !== 999,
      'the copy to take the rebuilt projection',
    );
    expect(counts(copy)).toEqual(expected);
    expect(counts(elected)).toEqual(expected);
    expect(copy.folds.n).toBe(0);
  });
});
