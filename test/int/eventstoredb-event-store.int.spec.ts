/**
 * The shared event-store contract on the EventStoreDB adapter: against the in-process protocol
 * double on both append paths the client can take (Append, BatchAppend), with a client of the
 * store's own and one passed in, and against a real server when EVENTSTORE_CONNECTION_STRING is
 * set. Then what only this adapter has to get right.
 */
import { randomUUID } from 'node:crypto';
import { BACKWARDS, END, EventStoreDBClient, FORWARDS } from '@eventstore/db-client';
import {
  NO_STREAM,
  RevisionConflictError,
  StoreUnavailableError,
  type EventStore,
} from '../../src/store/event-store.port';
import { InvalidEventError } from '../../src/adapters/eventstoredb/eventstoredb-event-codec';
import { EventStoreDbEventStore } from '../../src/adapters/eventstoredb/eventstoredb-event-store.adapter';
import { newEvent, testEventStore, type StoreFaults } from '../contract/event-store.contract';
import {
  DEFAULT_SERVER_VERSION,
  EventStoreDbProtocolCluster,
  EventStoreDbProtocolDouble,
  defaultMaxAppendSize,
} from '../support/eventstoredb-protocol-double';

const REAL_SERVER = process.env.EVENTSTORE_CONNECTION_STRING;

/** Deletes and truncates through a client of its own, as an operator or another program would. */
function operatorFaults(connectionString: string, outage?: StoreFaults['outage']): StoreFaults {
  const withClient = async (work: (client: EventStoreDBClient) => Promise<unknown>) => {
    const client = EventStoreDBClient.connectionString(connectionString);
    try {
      await work(client);
    } finally {
      await client.dispose();
    }
  };
  return {
    softDelete: (stream) => withClient((client) => client.deleteStream(stream)),
    truncateBefore: (stream, revision) =>
      withClient((client) => client.setStreamMetadata(stream, { truncateBefore: revision })),
    tombstone: (stream) => withClient((client) => client.tombstoneStream(stream)),
    outage:
      outage ??
      (() => {
        throw new Error('no outage can be caused on this store');
      }),
  };
}

interface DoubleVariant {
  label: string;
  /** Whether the double lists BatchAppend among its supported methods, as servers since 21.10 do. */
  serverOffersBatchAppend: boolean;
  store(connectionString: string): { store: EventStoreDbEventStore; cleanup(): Promise<void> };
  expectedPath: 'Append' | 'BatchAppend';
}

const VARIANTS: DoubleVariant[] = [
  {
    label: "the store's own client (Append)",
    serverOffersBatchAppend: true,
    store: (connectionString) => {
      const store = new EventStoreDbEventStore({ connectionString, appendTimeoutMs: 5_000 });
      return { store, cleanup: () => store.close() };
    },
    expectedPath: 'Append',
  },
  {
    label: 'batchAppend opted in (BatchAppend)',
    serverOffersBatchAppend: true,
    store: (connectionString) => {
      const store = new EventStoreDbEventStore({ connectionString, appendTimeoutMs: 5_000, batchAppend: true });
      return { store, cleanup: () => store.close() };
    },
    expectedPath: 'BatchAppend',
  },
  {
    label: 'a client passed in, server without BatchAppend (Append)',
    serverOffersBatchAppend: false,
    store: (connectionString) => {
      const client = EventStoreDBClient.connectionString(connectionString);
      const store = new EventStoreDbEventStore({ client, appendTimeoutMs: 5_000 });
      return {
        store,
        cleanup: async () => {
          await store.close();
          await client.dispose();
        },
      };
    },
    expectedPath: 'Append',
  },
];

for (const variant of VARIANTS) {
  describe(`EventStoreDB adapter on the protocol double: ${variant.label}`, () => {
    let double: EventStoreDbProtocolDouble;
    beforeAll(async () => {
      double = await EventStoreDbProtocolDouble.start({ batchAppend: variant.serverOffersBatchAppend });
    });
    afterAll(async () => {
      await double.stop();
    });

    testEventStore(
      `eventstoredb via ${variant.label} on the protocol double`,
      async () => ({
        ...variant.store(double.connectionString),
        faults: operatorFaults(double.connectionString, async () => {
          double.setUnavailable(true);
          return async () => double.setUnavailable(false);
        }),
      }),
      { faults: ['softDelete', 'truncateBefore', 'tombstone', 'outage'] },
    );

    it(`sent its appends through ${variant.expectedPath} only`, () => {
      // The store's appends only: the faults' own client writes stream metadata its own way.
      const paths = new Set(
        double.appends.filter((append) => !append.stream.startsWith('$$')).map((append) => append.method),
      );
      expect([...paths]).toEqual([variant.expectedPath]);
    });
  });
}

describe('EventStoreDB adapter on a three-node cluster of protocol doubles (gossip discovery)', () => {
  let cluster: EventStoreDbProtocolCluster;
  beforeAll(async () => {
    cluster = await EventStoreDbProtocolCluster.start();
  });
  afterAll(async () => {
    await cluster.stop();
  });

  testEventStore(
    'eventstoredb on a cluster connection string (protocol doubles)',
    async () => {
      cluster.electLeader(0);
      const store = new EventStoreDbEventStore({ connectionString: cluster.connectionString, appendTimeoutMs: 5_000 });
      return {
        store,
        cleanup: () => store.close(),
        // An election: every node refuses, gossip names no usable member, discovery fails.
        faults: operatorFaults(cluster.connectionString, async () => {
          cluster.startElection();
          return async () => cluster.electLeader(0);
        }),
      };
    },
    { faults: ['softDelete', 'truncateBefore', 'tombstone', 'outage'] },
  );
});

if (REAL_SERVER) {
  testEventStore(
    'eventstoredb at EVENTSTORE_CONNECTION_STRING',
    async () => {
      const store = new EventStoreDbEventStore({ connectionString: REAL_SERVER });
      return { store, cleanup: () => store.close(), faults: operatorFaults(REAL_SERVER) };
    },
    { faults: ['softDelete', 'truncateBefore', 'tombstone'] },
  );
} else {
  const reason =
    'EVENTSTORE_CONNECTION_STRING is not set, so the event-store contract did not run against a real EventStoreDB ' +
    '(docker compose up -d eventstore, then EVENTSTORE_CONNECTION_STRING=esdb://localhost:2113?tls=false npm test)';
  describe('event store contract: eventstoredb at EVENTSTORE_CONNECTION_STRING', () => {
    it(`skipped: ${reason}`, () => {
      console.warn(`[eventstoredb contract] ${reason}`);
      expect(REAL_SERVER).toBeUndefined();
    });
  });
}

describe('EventStoreDB adapter specifics (protocol double)', () => {
  let double: EventStoreDbProtocolDouble;
  let store: EventStoreDbEventStore;
  const stream = () => `op-specific:${randomUUID()}`;

  beforeAll(async () => {
    double = await EventStoreDbProtocolDouble.start();
  });
  beforeEach(() => {
    store = new EventStoreDbEventStore({ connectionString: double.connectionString, appendTimeoutMs: 3_000 });
  });
  afterEach(async () => {
    await store.close();
  });
  afterAll(async () => {
    await double.stop();
  });

  it('reports $all commit positions as numbers, beyond 32 bits, with gaps', async () => {
    const name = stream();
    const result = await store.append(name, NO_STREAM, [newEvent('A'), newEvent('B')]);
    const [a, b] = await store.readStream(name);
    expect(a.position).toBeGreaterThan(2 ** 32);
    expect(b.position).toBe(result.position);
    expect(b.position - a.position).toBeGreaterThan(1);
  });

  it('leaves system records out of readAll, headPosition and subscriptions', async () => {
    const start = await store.headPosition();
    const name = stream();
    const { position } = await store.append(name, NO_STREAM, [newEvent('Visible')]);
    double.appendSystemEvent();
    double.appendSystemEvent('$$op-specific', '$metadata');
    expect(await store.headPosition()).toBe(position);
    const all = await store.readAll({ after: start, limit: 100 });
    expect(all.map((event) => event.type)).toEqual(['Visible']);

    const seen: string[] = [];
    let done!: () => void;
    const delivered = new Promise<void>((resolve) => (done = resolve));
    const subscription = store.subscribe(
      { after: start },
      {
        onEvents: (events) => {
          seen.push(...events.map((event) => event.type));
          if (seen.includes('Later')) done();
        },
      },
    );
    double.appendSystemEvent();
    await store.append(name, 0, [newEvent('Later')]);
    await delivered;
    await subscription.close();
    expect(seen).toEqual(['Visible', 'Later']);
  });

  it('steps over more system records than one page to find the head', async () => {
    const { position } = await store.append(stream(), NO_STREAM, [newEvent('Last')]);
    for (let i = 0; i < 70; i++) double.appendSystemEvent();
    expect(await store.headPosition()).toBe(position);
  });

  it('answers headPosition 0 on a log that holds only system records', async () => {
    const empty = await EventStoreDbProtocolDouble.start();
    const fresh = new EventStoreDbEventStore({ connectionString: empty.connectionString });
    try {
      expect(await fresh.headPosition()).toBe(0);
      expect(await fresh.readAll({ after: 0, limit: 10 })).toEqual([]);
    } finally {
      await fresh.close();
      await empty.stop();
    }
  });

  it('treats a partly matching re-append as a conflict, as the server does', async () => {
    const name = stream();
    const first = newEvent('First');
    await store.append(name, NO_STREAM, [first, newEvent('Second')]);
    await expect(store.append(name, NO_STREAM, [first, newEvent('Other')])).rejects.toBeInstanceOf(
      RevisionConflictError,
    );
    await expect(store.append(name, NO_STREAM, [first])).resolves.toMatchObject({ revision: 0 });
    expect((await store.readStream(name)).map((event) => event.type)).toEqual(['First', 'Second']);
  });

  it('carries the actual revision in a conflict', async () => {
    const name = stream();
    await store.append(name, NO_STREAM, [newEvent(), newEvent()]);
    const conflict = await store.append(name, 7, [newEvent()]).catch((error: unknown) => error);
    expect(conflict).toBeInstanceOf(RevisionConflictError);
    expect(conflict).toMatchObject({ stream: name, expectedRevision: 7, actualRevision: 1 });
    const missing = await store.append(stream(), 0, [newEvent()]).catch((error: unknown) => error);
    expect(missing).toMatchObject({ expectedRevision: 0, actualRevision: NO_STREAM });
  });

  it('refuses what would not come back as it was appended, before anything is sent', async () => {
    const name = stream();
    const appendsBefore = double.callCounts.BatchAppend + double.callCounts.Append;
    const upper = { ...newEvent(), event_id: randomUUID().toUpperCase() };
    await expect(store.append(name, NO_STREAM, [upper])).rejects.toBeInstanceOf(InvalidEventError);
    await expect(store.append(name, NO_STREAM, [newEvent('X', { when: new Date() })])).rejects.toThrow(
      /events\[0\]\.data\.when: a Date object/,
    );
    await expect(store.append(name, NO_STREAM, [newEvent('X', { ratio: Number.NaN })])).rejects.toBeInstanceOf(
      InvalidEventError,
    );
    await expect(store.append(name, NO_STREAM, [newEvent('$system')])).rejects.toBeInstanceOf(InvalidEventError);
    await expect(store.append('$settings', NO_STREAM, [newEvent()])).rejects.toBeInstanceOf(InvalidEventError);
    await expect(store.append(name, NO_STREAM, [])).rejects.toThrow(/at least one event/);
    expect(double.callCounts.BatchAppend + double.callCounts.Append).toBe(appendsBefore);
    expect(await store.readStream(name)).toEqual([]);
  });

  it('refuses a batch over the server maximum append size with a typed error', async () => {
    const small = await EventStoreDbProtocolDouble.start({ maxAppendSize: 2048 });
    const limited = new EventStoreDbEventStore({ connectionString: small.connectionString });
    try {
      const name = stream();
      await expect(
        limited.append(name, NO_STREAM, [newEvent('Big', { blob: 'x'.repeat(4096) })]),
      ).rejects.toBeInstanceOf(InvalidEventError);
      expect(await limited.readStream(name)).toEqual([]);
    } finally {
      await limited.close();
      await small.stop();
    }
  });

  it('refuses a client configured with throwOnAppendFailure=false', () => {
    expect(
      () => new EventStoreDbEventStore({ connectionString: `${double.connectionString}&throwOnAppendFailure=false` }),
    ).toThrow(/throwOnAppendFailure/);
  });

  it('reads only what it appended through the port back as port events', async () => {
    const stores: EventStore[] = [store];
    const name = stream();
    await stores[0].append(name, NO_STREAM, [newEvent('Typed', { nested: { list: [1, 'a', null] } })]);
    const [event] = await stores[0].readStream(name);
    expect(event).toMatchObject({
      stream: name,
      revision: 0,
      type: 'Typed',
      data: { nested: { list: [1, 'a', null] } },
    });
    expect(Object.keys(event).sort()).toEqual([
      'data',
      'event_id',
      'metadata',
      'position',
      'revision',
      'stream',
      'type',
    ]);
  });
});

/** The double checked against the server's read semantics, through the real client. */
describe('the protocol double answers reads as the server does', () => {
  let double: EventStoreDbProtocolDouble;
  let client: EventStoreDBClient;
  const name = `op-reads:${randomUUID()}`;
  const drain = async <T>(read: AsyncIterable<T>): Promise<T[]> => {
    const items: T[] = [];
    for await (const item of read) items.push(item);
    return items;
  };

  beforeAll(async () => {
    double = await EventStoreDbProtocolDouble.start();
    client = EventStoreDBClient.connectionString(double.connectionString);
    const store = new EventStoreDbEventStore({ client });
    await store.append(name, NO_STREAM, [newEvent('R0'), newEvent('R1'), newEvent('R2')]);
    await store.close();
  });
  afterAll(async () => {
    await client.dispose();
    await double.stop();
  });

  it('reads a stream backwards from the end, and from a revision inclusive', async () => {
    const fromEnd = await drain(client.readStream(name, { direction: BACKWARDS, fromRevision: END }));
    expect(fromEnd.map((e) => e.event?.type)).toEqual(['R2', 'R1', 'R0']);
    const fromOne = await drain(client.readStream(name, { direction: BACKWARDS, fromRevision: 1n, maxCount: 5 }));
    expect(fromOne.map((e) => e.event?.type)).toEqual(['R1', 'R0']);
    const forwardFromOne = await drain(client.readStream(name, { direction: FORWARDS, fromRevision: 1n }));
    expect(forwardFromOne.map((e) => e.event?.type)).toEqual(['R1', 'R2']);
  });

  it('reads $all forwards from a position inclusive and backwards from it exclusive', async () => {
    const [, middle] = await drain(client.readStream(name));
    const at = middle.event?.position as { commit: bigint; prepare: bigint };
    const forwards = await drain(client.readAll({ fromPosition: at, direction: FORWARDS, maxCount: 10 }));
    expect(forwards.map((e) => e.event?.type)).toEqual(['R1', 'R2']);
    const backwards = await drain(client.readAll({ fromPosition: at, direction: BACKWARDS, maxCount: 1 }));
    expect(backwards.map((e) => e.event?.type)).toEqual(['R0']);
  });

  it('answers StreamNotFound for a stream that was never written', async () => {
    await expect(drain(client.readStream(`op-reads:${randomUUID()}`))).rejects.toMatchObject({
      type: 'stream-not-found',
    });
  });
});

/** What only a cluster shows: discovery, leaders and followers, failovers. */
describe('EventStoreDB adapter on a cluster of protocol doubles', () => {
  let cluster: EventStoreDbProtocolCluster;
  const stores: EventStoreDbEventStore[] = [];
  const storeAt = (connectionString: string) => {
    const store = new EventStoreDbEventStore({ connectionString, appendTimeoutMs: 5_000, readTimeoutMs: 5_000 });
    stores.push(store);
    return store;
  };
  const stream = () => `op-cluster:${randomUUID()}`;

  beforeEach(async () => {
    cluster = await EventStoreDbProtocolCluster.start();
  });
  afterEach(async () => {
    await Promise.all(stores.splice(0).map((store) => store.close()));
    await cluster.stop();
  });

  it('finds the leader through gossip and appends there', async () => {
    const store = storeAt(cluster.connectionString);
    const name = stream();
    await store.append(name, NO_STREAM, [newEvent('A')]);
    expect(cluster.nodes[0].callCounts.Append).toBe(1);
    expect(cluster.nodes.slice(1).every((node) => node.callCounts.Append === 0)).toBe(true);
  });

  it('answers a discovery failure ("Failed to discover after N attempts") as unavailable, and recovers once a leader is elected', async () => {
    cluster.startElection();
    const store = storeAt(cluster.connectionString);
    const name = stream();
    const refused = await store.append(name, NO_STREAM, [newEvent('A')]).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(StoreUnavailableError);
    expect((refused as StoreUnavailableError).reason).toMatch(/Failed to discover after 3 attempts/);
    expect((refused as StoreUnavailableError).retryAfterSeconds).toBeGreaterThan(0);
    await expect(store.readStream(name)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await store.health()).toMatchObject({ ok: false });
    cluster.electLeader(2);
    await expect(store.append(name, NO_STREAM, [newEvent('A')])).resolves.toMatchObject({ revision: 0 });
    expect(cluster.nodes[2].callCounts.Append).toBe(1);
  });

  it('follows a new leader after a failover without an error reaching the caller', async () => {
    const store = storeAt(cluster.connectionString);
    const name = stream();
    await store.append(name, NO_STREAM, [newEvent('A')]);
    cluster.electLeader(1);
    // The client is still connected to node 0, now a follower: it answers NotLeader, naming node 1.
    await expect(store.append(name, 0, [newEvent('B')])).resolves.toMatchObject({ revision: 1 });
    expect(cluster.nodes[0].leaderRedirects.notLeader).toBe(1);
    expect(cluster.nodes[1].callCounts.Append).toBe(1);
    expect((await store.readStream(name)).map((event) => event.type)).toEqual(['A', 'B']);
  });

  it('asks for the leader on appends: a follower never has to forward them', async () => {
    const follower = cluster.nodes[1];
    const store = storeAt(cluster.connectionStringOf(follower));
    await store.append(stream(), NO_STREAM, [newEvent('A')]);
    expect(follower.leaderRedirects.notLeader).toBe(1);
    expect(follower.leaderRedirects.forwardedAppends).toBe(0);
  });

  it('reads a stream from the leader, not from a follower that has not caught up', async () => {
    const name = stream();
    const writer = storeAt(cluster.connectionStringOf(cluster.nodes[0]));
    await writer.append(name, NO_STREAM, [newEvent('A')]);
    cluster.pauseReplication();
    await writer.append(name, 0, [newEvent('B')]);
    // A client left on a follower (after a failover, or discovery picked one).
    const reader = storeAt(cluster.connectionStringOf(cluster.nodes[2]));
    expect((await reader.readStream(name)).map((event) => event.type)).toEqual(['A', 'B']);
    // And a stream the follower has not seen at all is not taken for a new one.
    const fresh = stream();
    await writer.append(fresh, NO_STREAM, [newEvent('C')]);
    expect((await reader.readStream(fresh)).map((event) => event.type)).toEqual(['C']);
  });
});

/** The double claims a server version and enforces that version's default maximum append size. */
describe('maximum append size by server version (protocol double)', () => {
  const MIB = 1024 * 1024;

  it('is 1 MiB up to 25.0 and 256 MiB from 25.1, as the server defaults are', () => {
    expect(defaultMaxAppendSize('24.10.0')).toBe(MIB);
    expect(defaultMaxAppendSize('25.0.1')).toBe(MIB);
    expect(defaultMaxAppendSize('25.1.4')).toBe(256 * MIB);
    expect(defaultMaxAppendSize(DEFAULT_SERVER_VERSION)).toBe(256 * MIB);
  });

  for (const { version, accepted } of [
    { version: '24.10.0', accepted: false },
    { version: '25.1.4', accepted: true },
  ]) {
    it(`${accepted ? 'takes' : 'refuses with a typed error'} a 1.5 MiB batch on a server claiming ${version}`, async () => {
      const double = await EventStoreDbProtocolDouble.start({ serverVersion: version });
      const store = new EventStoreDbEventStore({ connectionString: double.connectionString });
      try {
        expect(double.maxAppendSize).toBe(defaultMaxAppendSize(version));
        const name = `op-size:${randomUUID()}`;
        const batch = [
          newEvent('Big', { blob: 'x'.repeat(768 * 1024) }),
          newEvent('Big', { blob: 'y'.repeat(768 * 1024) }),
        ];
        if (accepted) {
          await expect(store.append(name, NO_STREAM, batch)).resolves.toMatchObject({ revision: 1 });
          expect(await store.readStream(name)).toHaveLength(2);
        } else {
          await expect(store.append(name, NO_STREAM, batch)).rejects.toBeInstanceOf(InvalidEventError);
          expect(await store.readStream(name)).toEqual([]);
        }
      } finally {
        await store.close();
        await double.stop();
      }
    });
  }
});
