import { BACKWARDS, END, EventStoreDBClient, type RecordedEvent, type ResolvedEvent } from '@eventstore/db-client';
import { withDeadline } from './call-deadline';

/** How an EventStoreDB adapter is given its server: a client it shares, or a connection string it owns. */
export interface EventStoreDbClientOptions {
  client?: EventStoreDBClient;
  connectionString?: string;
}

/**
 * The adapter's client, and whether the adapter owns it (and so closes it): a shared client stays
 * open for the others that hold it.
 */
export function adapterClient(
  options: EventStoreDbClientOptions,
  adapter: string,
): { client: EventStoreDBClient; ownsClient: boolean } {
  if (options.client) return { client: options.client, ownsClient: false };
  if (options.connectionString)
    return { client: EventStoreDBClient.connectionString(options.connectionString), ownsClient: true };
  throw new Error(`${adapter} needs a client or a connection string`);
}

/**
 * The latest `count` events of a stream, newest first, read backwards from its end within the
 * deadline (the read is cancelled when it passes). Errors are the caller's to translate.
 */
export async function readLatest(
  client: EventStoreDBClient,
  stream: string,
  count: number,
  timeoutMs: number,
): Promise<RecordedEvent[]> {
  const events: ResolvedEvent[] = [];
  const read = client.readStream(stream, { fromRevision: END, direction: BACKWARDS, maxCount: count });
  const drained = new Promise<void>((resolve, reject) => {
    read.on('data', (event: ResolvedEvent) => events.push(event));
    read.on('end', () => resolve());
    read.on('error', reject);
  });
  await withDeadline(drained, timeoutMs, `read of ${stream}`, () => {
    read.cancel().catch(() => undefined);
  });
  return events.flatMap((resolved) => (resolved.event ? [resolved.event] : []));
}
