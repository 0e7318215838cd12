/**
 * The time base contract on every adapter: SQLite with connections to one file (as service
 * processes sharing it), EventStoreDB with clients of the in-process protocol double, and
 * PostgreSQL with pools on one database (a fresh database per test: the base is the store's). Instances
 * "on other hosts" are instances given other boot ids and wall clocks: one test process has one
 * monotonic clock, so what two real hosts' clocks do is stood in for, not shown (docs/eventstoredb.md).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventStoreDbTimeBaseStore } from '../../src/adapters/eventstoredb/eventstoredb-time-base.adapter';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { SqliteTimeBaseStore } from '../../src/adapters/sqlite/sqlite-time-base.adapter';
import type { TimeBaseStore } from '../../src/store/time-base.port';
import { testTimeBaseStore } from '../contract/time-base.contract';
import { EventStoreDbProtocolDouble } from '../support/eventstoredb-protocol-double';
import { PostgresTimeBaseStore } from '../../src/adapters/postgres/postgres-time-base.adapter';
import { describeWithPostgres } from '../support/postgres';
import { Client } from 'pg';

testTimeBaseStore('sqlite (connections to one file, beside the log)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-time-base-'));
  const file = join(dir, 'events.sqlite');
  const events = SqliteEventStore.open({ file });
  const opened: TimeBaseStore[] = [];
  const open = () => {
    const store = SqliteTimeBaseStore.open({ file });
    opened.push(store);
    return store;
  };
  return {
    stores: [open(), open()],
    open,
    cleanup: async () => {
      await Promise.all(opened.map((store) => store.close()));
      await events.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

describe('EventStoreDB time base on the protocol double', () => {
  let double: EventStoreDbProtocolDouble;
  // One server per test: the base and heartbeat streams are the store's, so tests must not share them.
  beforeEach(async () => {
    double = await EventStoreDbProtocolDouble.start();
  });
  afterEach(async () => {
    await double.stop();
  });

  testTimeBaseStore('eventstoredb (clients of one server, optimistic concurrency on the base stream)', async () => {
    const opened: TimeBaseStore[] = [];
    const open = () => {
      const store = new EventStoreDbTimeBaseStore({ connectionString: double.connectionString });
      opened.push(store);
      return store;
    };
    return {
      stores: [open(), open()],
      open,
      cleanup: async () => void (await Promise.all(opened.map((store) => store.close()))),
    };
  });
});

describeWithPostgres('PostgreSQL time base', (database) => {
  testTimeBaseStore('postgres (pools on one database, an advisory lock around each change)', async () => {
    // The base and heartbeats are the database's: each test starts from empty tables.
    const client = new Client({ connectionString: database().url });
    await client.connect();
    await client.query('DROP TABLE IF EXISTS ledger_clock_bases, ledger_clock_heartbeats');
    await client.end();
    const opened: TimeBaseStore[] = [];
    const open = () => {
      const store = new PostgresTimeBaseStore({ connectionString: database().url });
      opened.push(store);
      return store;
    };
    return {
      stores: [open(), open()],
      open,
      cleanup: async () => void (await Promise.all(opened.map((store) => store.close()))),
    };
  });
});
