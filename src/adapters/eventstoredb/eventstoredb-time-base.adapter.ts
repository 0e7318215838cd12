import { adapterClient, readLatest } from './eventstoredb-client';
import { ANY, EventStoreDBClient, NO_STREAM as ESDB_NO_STREAM, jsonEvent } from '@eventstore/db-client';
import { randomUUID } from 'node:crypto';
import { RevisionConflictError, StoreUnavailableError } from '../../store/event-store.port';
import {
  BASES_KEPT,
  heartbeatCutMs,
  latestBaseMs,
  raisedBase,
  type InstanceHeartbeat,
  type TimeBase,
  type TimeBaseStore,
} from '../../store/time-base.port';
import { withDeadline } from './call-deadline';
import { isStreamNotFound, toPortError } from './eventstoredb-errors';

export interface EventStoreDbTimeBaseStoreOptions {
  client?: EventStoreDBClient;
  connectionString?: string;
  timeoutMs?: number;
  /** How many of the latest heartbeats a read looks at: enough for this many instances, several beats each. */
  heartbeatsRead?: number;
}

/** Outside the `op-` category the ledger reads, like the lease streams. */
export const TIME_BASE_STREAM = 'ledger-clock-bases';
export const HEARTBEAT_STREAM = 'ledger-clock-heartbeats';
const BASE_EVENT = 'TimeBaseWritten';
const HEARTBEAT_EVENT = 'InstanceHeartbeat';
const LEFT_EVENT = 'InstanceLeft';

/**
 * The time base and heartbeats on EventStoreDB / KurrentDB. Bases are events of one stream, one
 * per boot, appended at the revision read, so two instances of a new boot racing to write one
 * decide it by optimistic concurrency, as the leases do. Heartbeats are appended to one stream at
 * any revision; the latest event of each instance is its heartbeat (a leave event removes it).
 */
export class EventStoreDbTimeBaseStore implements TimeBaseStore {
  private readonly client: EventStoreDBClient;
  private readonly ownsClient: boolean;
  private readonly timeoutMs: number;
  private readonly heartbeatsRead: number;
  private capped = false;
  private closed = false;

  constructor(options: EventStoreDbTimeBaseStoreOptions) {
    ({ client: this.client, ownsClient: this.ownsClient } = adapterClient(options, 'EventStoreDbTimeBaseStore'));
    this.timeoutMs = options.timeoutMs ?? 5_000;
    this.heartbeatsRead = options.heartbeatsRead ?? 256;
  }

  /** The latest `count` events of a stream, newest first, with the stream's last revision. */
  private async readBack(
    stream: string,
    count: number,
  ): Promise<{ events: Array<{ type: string; data: unknown }>; revision?: bigint }> {
    if (this.closed) throw new StoreUnavailableError('time base store closed');
    try {
      const recorded = await readLatest(this.client, stream, count, this.timeoutMs);
      return {
        events: recorded.map((event) => ({ type: event.type, data: event.data })),
        revision: recorded[0]?.revision,
      };
    } catch (error) {
      if (isStreamNotFound(error)) return { events: [] };
      throw toPortError(error, { stream, retryAfterSeconds: 1 });
    }
  }

  private async append(
    stream: string,
    type: string,
    data: unknown,
    expectedRevision: bigint | typeof ESDB_NO_STREAM | typeof ANY,
  ): Promise<void> {
    if (this.closed) throw new StoreUnavailableError('time base store closed');
    try {
      await withDeadline(
        this.client.appendToStream(stream, jsonEvent({ id: randomUUID(), type, data: data as never }), {
          expectedRevision,
          deadline: this.timeoutMs,
        }),
        this.timeoutMs,
        `append to ${stream}`,
      );
    } catch (error) {
      throw toPortError(error, { stream, retryAfterSeconds: 1 });
    }
  }

  /** Best effort, as for the lease streams: only the latest events matter. */
  private async cap(stream: string, maxCount: number): Promise<void> {
    try {
      await withDeadline(this.client.setStreamMetadata(stream, { maxCount }), this.timeoutMs, `metadata of ${stream}`);
    } catch {
      /* a server that refuses metadata keeps more events, nothing else */
    }
  }

  private latestHeartbeats(events: Array<{ type: string; data: unknown }>): InstanceHeartbeat[] {
    const seen = new Set<string>();
    const latest: InstanceHeartbeat[] = [];
    for (const event of events) {
      const data = event.data as InstanceHeartbeat | { instance_id: string };
      if (seen.has(data.instance_id)) continue;
      seen.add(data.instance_id);
      if (event.type === HEARTBEAT_EVENT) latest.push(data as InstanceHeartbeat);
    }
    if (latest.length === 0) return latest;
    const cut = heartbeatCutMs(latest.map((heartbeat) => heartbeat.ledger_ms));
    return latest
      .filter((heartbeat) => heartbeat.ledger_ms >= cut)
      .sort((a, b) => a.instance_id.localeCompare(b.instance_id));
  }

  async adoptBase(proposed: TimeBase): Promise<TimeBase> {
    for (let attempt = 0; ; attempt++) {
      const { events, revision } = await this.readBack(TIME_BASE_STREAM, BASES_KEPT);
      const bases = events.filter((event) => event.type === BASE_EVENT).map((event) => event.data as TimeBase);
      const stored = bases.find((base) => base.boot_id === proposed.boot_id);
      if (stored) return stored;
      const base = raisedBase(proposed, latestBaseMs(bases));
      try {
        await this.append(TIME_BASE_STREAM, BASE_EVENT, base, revision === undefined ? ESDB_NO_STREAM : revision);
        if (revision === undefined) await this.cap(TIME_BASE_STREAM, BASES_KEPT);
        return base;
      } catch (error) {
        // Another instance wrote a base in between: read again (it may be this boot's).
        if (!(error instanceof RevisionConflictError) || attempt >= 10) throw error;
      }
    }
  }

  async beat(heartbeat: InstanceHeartbeat): Promise<InstanceHeartbeat[]> {
    await this.append(HEARTBEAT_STREAM, HEARTBEAT_EVENT, heartbeat, ANY);
    if (!this.capped) {
      this.capped = true;
      await this.cap(HEARTBEAT_STREAM, this.heartbeatsRead * 2);
    }
    return this.latestHeartbeats((await this.readBack(HEARTBEAT_STREAM, this.heartbeatsRead)).events);
  }

  async leave(instanceId: string): Promise<void> {
    await this.append(HEARTBEAT_STREAM, LEFT_EVENT, { instance_id: instanceId }, ANY);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.ownsClient) await this.client.dispose();
  }
}
