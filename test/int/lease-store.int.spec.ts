/**
 * The lease contract on every adapter: SQLite with two connections to one file (as two service
 * processes sharing it), EventStoreDB with two clients of the in-process protocol double, and
 * PostgreSQL with two pools on one database (test/support/postgres.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventStoreDbLeaseStore } from '../../src/adapters/eventstoredb/eventstoredb-lease-store.adapter';
import { SqliteLeaseStore } from '../../src/adapters/sqlite/sqlite-lease-store.adapter';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { testLeaseStore } from '../contract/lease-store.contract';
import { EventStoreDbProtocolDouble } from '../support/eventstoredb-protocol-double';
import { PostgresLeaseStore } from '../../src/adapters/postgres/postgres-lease-store.adapter';
import { describeWithPostgres } from '../support/postgres';

testLeaseStore('sqlite (two connections to one file, beside the log)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-leases-'));
  const file = join(dir, 'events.sqlite');
  // The log's own connection is open too, as in the service.
  const events = SqliteEventStore.open({ file });
  const stores: [SqliteLeaseStore, SqliteLeaseStore] = [
    SqliteLeaseStore.open({ file }),
    SqliteLeaseStore.open({ file }),
  ];
  return {
    stores,
    cleanup: async () => {
      await Promise.all(stores.map((store) => store.close()));
      await events.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

describe('EventStoreDB leases on the protocol double', () => {
  let double: EventStoreDbProtocolDouble;
  beforeAll(async () => {
    double = await EventStoreDbProtocolDouble.start();
  });
  afterAll(async () => {
    await double.stop();
  });

  testLeaseStore('eventstoredb (two clients, optimistic concurrency on a lease stream)', async () => {
    const stores: [EventStoreDbLeaseStore, EventStoreDbLeaseStore] = [
      new EventStoreDbLeaseStore({ connectionString: double.connectionString }),
      new EventStoreDbLeaseStore({ connectionString: double.connectionString }),
    ];
    return { stores, cleanup: async () => void (await Promise.all(stores.map((store) => store.close()))) };
  });
});

describeWithPostgres('PostgreSQL leases', (database) => {
  testLeaseStore('postgres (two pools on one database, an advisory lock per item)', async () => {
    const stores: [PostgresLeaseStore, PostgresLeaseStore] = [
      new PostgresLeaseStore({ connectionString: database().url }),
      new PostgresLeaseStore({ connectionString: database().url }),
    ];
    return { stores, cleanup: async () => void (await Promise.all(stores.map((store) => store.close()))) };
  });
});
