import type { LedgerConfig } from '../config/ledger-config';
import type { EventStore, StreamIndexer } from '../store/event-store.port';
import type { LeaseStore } from '../store/lease-store.port';
import { SqliteEventStore } from './sqlite/sqlite-event-store.adapter';
import { SqliteLeaseStore } from './sqlite/sqlite-lease-store.adapter';
import { SqliteTimeBaseStore } from './sqlite/sqlite-time-base.adapter';
import { SqliteReadModel } from './sqlite/sqlite-read-model.store';
import { SqliteWebhookStore, type SecretsAtRest, type SqliteWebhookStoreOptions } from './sqlite/sqlite-webhook.store';
import type { WebhookStore } from '../webhooks/webhook-store.port';
import type { ReadModel, ReadModelOptions } from '../store/read-model.port';
import type { TimeBaseStore } from '../store/time-base.port';
import type { IdempotencyKeyStore } from '../store/idempotency-key-store.port';
import type { SharedReadModelStore } from '../store/shared-read-model.port';
import type { PostgresOptions } from './postgres/postgres-database';

export interface StoreHooks {
  /** A log written before anchors existed was anchored as it stands (said loudly by the caller). */
  onLogAdopted?: (events: number) => void;
  /** How the application files a stream in the index, for a log anchored after it was written. */
  indexer?: StreamIndexer;
  onGroupCommitted?: (appends: number, events: number) => void;
  /** A subscription to the log changed state (connecting, live, reconnecting, stopped): for metrics. */
  onSubscriptionStatus?: (subscription: number, state: string) => void;
}

/** Every PostgreSQL adapter's connection settings, from the configuration (docs/postgres.md, "Faults"). */
function postgresOptions(config: LedgerConfig): PostgresOptions {
  return { connectionString: config.databaseUrl as string, queryTimeoutMs: config.postgresQueryTimeoutMs };
}

/** The configured adapter behind the port; nothing else knows which one runs. */
export async function openEventStore(config: LedgerConfig, hooks: StoreHooks = {}): Promise<EventStore> {
  if (config.store === 'eventstoredb') {
    // Loaded only when chosen, so the embedded default never pays for the gRPC client.
    const { EventStoreDbEventStore } = await import('./eventstoredb/eventstoredb-event-store.adapter');
    return new EventStoreDbEventStore({
      connectionString: config.eventStoreConnectionString as string,
      onStatusChange: (status) => hooks.onSubscriptionStatus?.(status.subscription, status.state),
    });
  }
  if (config.store === 'postgres') {
    const { PostgresEventStore } = await import('./postgres/postgres-event-store.adapter');
    return new PostgresEventStore({ ...postgresOptions(config), anchorKey: config.anchorKey });
  }
  return SqliteEventStore.open({
    file: config.eventsFile,
    groupCommit: config.groupCommit,
    busyTimeoutMs: config.sqliteBusyTimeoutMs,
    anchorKey: config.anchorKey,
    onLogAdopted: hooks.onLogAdopted,
    indexer: hooks.indexer,
    onGroupCommitted: hooks.onGroupCommitted,
  });
}

/**
 * The work feed's leases, in the same store as the log: a table of the SQLite file or of the
 * PostgreSQL database, or lease streams on the same EventStoreDB. Instances that share the log therefore share the leases.
 */
export async function openLeaseStore(config: LedgerConfig, _events: EventStore): Promise<LeaseStore> {
  if (config.store === 'eventstoredb') {
    const { EventStoreDbLeaseStore } = await import('./eventstoredb/eventstoredb-lease-store.adapter');
    return new EventStoreDbLeaseStore({ connectionString: config.eventStoreConnectionString as string });
  }
  if (config.store === 'postgres') {
    const { PostgresLeaseStore } = await import('./postgres/postgres-lease-store.adapter');
    return new PostgresLeaseStore(postgresOptions(config));
  }
  return SqliteLeaseStore.open({ file: config.eventsFile, busyTimeoutMs: config.sqliteBusyTimeoutMs });
}

/**
 * The ledger clock's shared base and the instances' heartbeats, in the same store as the log, so
 * every instance sharing the log reads one (docs/reliability.md, "Instances agree on time").
 */
export async function openTimeBaseStore(config: LedgerConfig): Promise<TimeBaseStore> {
  if (config.store === 'eventstoredb') {
    const { EventStoreDbTimeBaseStore } = await import('./eventstoredb/eventstoredb-time-base.adapter');
    return new EventStoreDbTimeBaseStore({ connectionString: config.eventStoreConnectionString as string });
  }
  if (config.store === 'postgres') {
    const { PostgresTimeBaseStore } = await import('./postgres/postgres-time-base.adapter');
    // Judged on the database's clock: one clock for every host on the database (docs/postgres.md).
    return new PostgresTimeBaseStore({ ...postgresOptions(config), wallClock: 'database' });
  }
  return SqliteTimeBaseStore.open({ file: config.eventsFile, busyTimeoutMs: config.sqliteBusyTimeoutMs });
}

/**
 * What a thread needs to follow the embedded log itself: the file, when `store` is the SQLite
 * adapter on a file (undefined for EventStoreDB and for a store held in memory, which only its
 * own connection can read).
 */
export function embeddedLogFile(store: EventStore): string | undefined {
  return store instanceof SqliteEventStore && store.file !== ':memory:' ? store.file : undefined;
}

/** Calls `listener` after each commit of this process's embedded store; a no-op elsewhere. */
export function onEmbeddedAppend(store: EventStore, listener: (position?: number) => void): () => void {
  return store instanceof SqliteEventStore ? store.onAppended(listener) : () => undefined;
}

/**
 * A second connection to the embedded log, for a thread that only reads and follows it (the
 * projection worker). `announce` wakes its subscriptions when the writer says it has committed.
 */
export function openEmbeddedLogReader(file: string, busyTimeoutMs: number): { store: EventStore; announce(): void } {
  const store = SqliteEventStore.open({ file, busyTimeoutMs });
  return { store, announce: () => store.announceAppended() };
}

/**
 * The Idempotency-Key answers in the PostgreSQL database, shared by the instances on it; undefined
 * for the other stores, whose instances keep them in a SQLite file of their data directory.
 */
export async function openSharedIdempotencyKeyStore(config: LedgerConfig): Promise<IdempotencyKeyStore | undefined> {
  if (config.store !== 'postgres') return undefined;
  const { PostgresIdempotencyKeyStore } = await import('./postgres/postgres-idempotency-key-store.adapter');
  return new PostgresIdempotencyKeyStore(postgresOptions(config));
}

/** The read model: a SQLite file beside the data whatever holds the log, since it is rebuilt from it. */
export function openReadModel(options: ReadModelOptions): ReadModel {
  return SqliteReadModel.open(options);
}

/**
 * The webhook subscriptions and outbox in the PostgreSQL database, shared by the instances on it
 * (docs/postgres.md, "Webhooks"); undefined for the other stores, whose instances keep them in a
 * SQLite file of their data directory (openWebhookFile).
 */
export async function openSharedWebhookStore(
  config: LedgerConfig,
  options: { secretKey?: Buffer },
): Promise<(WebhookStore & { readonly secretsAtRest: SecretsAtRest }) | undefined> {
  if (config.store !== 'postgres') return undefined;
  const { PostgresWebhookStore } = await import('./postgres/postgres-webhook-store.adapter');
  return PostgresWebhookStore.open({ ...postgresOptions(config), ...options });
}

/** The webhook subscriptions and outbox, a SQLite file beside the data (docs/webhooks.md). */
export function openWebhookFile(
  file: string,
  options: SqliteWebhookStoreOptions,
): WebhookStore & { readonly secretsAtRest: SecretsAtRest } {
  return new SqliteWebhookStore(file, options);
}

/**
 * The read models shared by the instances on the PostgreSQL database (docs/postgres.md, "Read
 * models"); undefined for the other stores, where each instance projects its own.
 */
export async function openSharedReadModelStore(config: LedgerConfig): Promise<SharedReadModelStore | undefined> {
  if (config.store !== 'postgres') return undefined;
  const { PostgresSharedReadModelStore } = await import('./postgres/postgres-read-model.adapter');
  return new PostgresSharedReadModelStore(postgresOptions(config));
}
