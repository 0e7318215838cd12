/**
 * The store an end-to-end suite runs the built service on, so one scenario file runs unchanged on
 * every adapter (docs/contract.md §6): the embedded SQLite default; EventStoreDB through the protocol double,
 * which this jest process starts on loopback and the spawned service reaches over real gRPC with
 * `LEDGER_STORE=eventstoredb` and `EVENTSTORE_CONNECTION_STRING`; or PostgreSQL, a database of the
 * test file's own (test/support/postgres.ts), reached with `LEDGER_STORE=postgres` and `DATABASE_URL`.
 *
 * A suite reads the whole log the service wrote through `log()` / `dumpLog()`: on SQLite the
 * events table itself (read-only, byte for byte), on EventStoreDB `$all` read through the
 * event-store port, on PostgreSQL the `ledger_events` table on a connection of the test's own;
 * never through the ledger's HTTP answers. Either way an equal dump means the log is unchanged, so
 * "nothing was stored" is checked equally strongly on every store.
 *
 * A scenario takes its store as an argument, so one file runs it on each: the contract table in
 * test/e2e/seed-contract-and-eventstoredb.e2e.spec.ts is called with `sqliteStore()`, then with
 * `eventStoreDbStore()`, then with `postgresStore()`.
 */
import type { StoredEvent } from '../../src/store/event-store.port';
import { EventStoreDbEventStore } from '../../src/adapters/eventstoredb/eventstoredb-event-store.adapter';
import { OPERATION_STREAM_PREFIX } from '../../src/store/stream-names';
import { EventStoreDbProtocolDouble } from './eventstoredb-protocol-double';
import type { LedgerProcess } from './ledger-process';
import type { TestDatabase } from './postgres';
import { dumpEvents, readEventRows, toStoredEvent, type EventRow } from './scenario';
import { Client } from 'pg';

export type StoreKind = 'sqlite' | 'eventstoredb' | 'postgres';

export interface StoreSetup {
  readonly kind: StoreKind;
  /** Starts what the store needs outside the service (the double); once, before any startLedger. */
  start(): Promise<void>;
  /** The environment the service is started with for this store. */
  env(): Record<string, string>;
  /** Every event of the log the given service writes to, in log order. */
  log(ledger: Pick<LedgerProcess, 'dataDir'>): Promise<StoredEvent[]>;
  /** The log as one string: equal dumps mean an unchanged log. */
  dumpLog(ledger: Pick<LedgerProcess, 'dataDir'>): Promise<string>;
  stop(): Promise<void>;
}

export function sqliteStore(): StoreSetup {
  return {
    kind: 'sqlite',
    start: async () => undefined,
    env: () => ({ LEDGER_STORE: 'sqlite' }),
    log: async (ledger) => readEventRows(ledger.dataDir).map(toStoredEvent),
    dumpLog: async (ledger) => dumpEvents(ledger.dataDir),
    stop: async () => undefined,
  };
}

export interface EventStoreDbSetup extends StoreSetup {
  readonly kind: 'eventstoredb';
  /** The running double, for fault injection (dropConnections, setUnavailable, stop/start, hooks). */
  readonly double: EventStoreDbProtocolDouble;
  /** The test process's own client of the double, through the port. */
  readonly store: EventStoreDbEventStore;
}

export function eventStoreDbStore(): EventStoreDbSetup {
  let double: EventStoreDbProtocolDouble | undefined;
  let store: EventStoreDbEventStore | undefined;
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('eventStoreDbStore(): call start() first');
    return value;
  };
  const readLog = async (): Promise<StoredEvent[]> =>
    started(store).readAll({ after: 0, limit: Number.MAX_SAFE_INTEGER, streamPrefix: OPERATION_STREAM_PREFIX });
  return {
    kind: 'eventstoredb',
    get double() {
      return started(double);
    },
    get store() {
      return started(store);
    },
    async start() {
      double = await EventStoreDbProtocolDouble.start();
      store = new EventStoreDbEventStore({ connectionString: double.connectionString });
    },
    env: () => ({ LEDGER_STORE: 'eventstoredb', EVENTSTORE_CONNECTION_STRING: started(double).connectionString }),
    // Every service on this double shares one log, whatever its data directory.
    log: () => readLog(),
    dumpLog: async () => JSON.stringify(await readLog()),
    async stop() {
      await store?.close();
      await double?.stop();
      store = undefined;
      double = undefined;
    },
  };
}

export interface PostgresSetup extends StoreSetup {
  readonly kind: 'postgres';
}

/**
 * PostgreSQL: the database `database()` answers (started by describeWithPostgres's beforeAll, so
 * before the suite's own). Every service on it shares one log, whatever its data directory; the
 * log is read from `ledger_events` as stored (the text the ledger wrote, byte for byte), every
 * row, not only those below the followers' high-water mark.
 */
export function postgresStore(database: () => TestDatabase): PostgresSetup {
  const readRows = async (): Promise<EventRow[]> => {
    const client = new Client({ connectionString: database().url });
    await client.connect();
    try {
      const { rows } = await client.query<EventRow & { position: string }>(
        'SELECT position, stream, revision, event_id, type, data, metadata FROM ledger_events ORDER BY position',
      );
      return rows.map((row) => ({ ...row, position: Number(row.position) }));
    } finally {
      await client.end();
    }
  };
  return {
    kind: 'postgres',
    start: async () => undefined,
    env: () => ({ LEDGER_STORE: 'postgres', DATABASE_URL: database().url }),
    log: async () => (await readRows()).map(toStoredEvent),
    dumpLog: async () => JSON.stringify(await readRows()),
    stop: async () => undefined,
  };
}
