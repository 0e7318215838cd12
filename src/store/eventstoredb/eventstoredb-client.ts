import { EventStoreDBClient } from '@eventstore/db-client';

/** How an EventStoreDB adapter is given its server: a client it shares, or a connection string it owns. */
export interface EventStoreDbClientOptions {
  client?: EventStoreDBClient;
  connectionString?: string;
}

/**
 * The adapter's client, and whether the adapter owns it (and so closes it): a shared client stays
 * open for the others that hold it.
 */
export function adapterClient(options: EventStoreDbClientOptions, adapter: string): { client: EventStoreDBClient; ownsClient: boolean } {
  if (options.client) return { client: options.client, ownsClient: false };
  if (options.connectionString) return { client: EventStoreDBClient.connectionString(options.connectionString), ownsClient: true };
  throw new Error(`${adapter} needs a client or a connection string`);
}
