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
  if (options.connectionString) {
    const client = EventStoreDBClient.connectionString(options.connectionString);
    preferAppendPath(client);
    return { client, ownsClient: true };
  }
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

const BATCH_APPEND_PATH = '/event_store.client.streams.streams/batchappend';

/**
 * The client appends through BatchAppend whenever the server lists it. That path multiplexes all
 * appends over one long-lived stream and settles them through a promise map shared by every client
 * in the process: when an older stream fails (one left open on a channel the client has since
 * replaced), it rejects appends pending on the newer stream too, whose answers then throw inside
 * the client's 'data' listener, an uncaught exception. It also has no client-side deadline. Append,
 * one call per append, has neither problem, so every client an adapter creates (the event store's,
 * the lease store's, the time base's) answers "not supported" for BatchAppend. `supports` is a
 * protected instance member of the client; only this instance changes.
 */
export function preferAppendPath(client: EventStoreDBClient): void {
  type Supports = (method: { path: string }, feature?: string) => Promise<boolean>;
  const internals = client as unknown as { supports: Supports };
  const supports = internals.supports;
  internals.supports = (method, feature) =>
    method.path.toLowerCase() === BATCH_APPEND_PATH ? Promise.resolve(false) : supports(method, feature);
}
