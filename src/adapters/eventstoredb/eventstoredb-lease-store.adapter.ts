import { adapterClient, readLatest } from './eventstoredb-client';
import { EventStoreDBClient, NO_STREAM as ESDB_NO_STREAM, jsonEvent } from '@eventstore/db-client';
import { randomUUID } from 'node:crypto';
import { RevisionConflictError, StoreUnavailableError } from '../../store/event-store.port';
import {
  acquireDecision,
  releasedRecord,
  renewedRecord,
  type AcquireRequest,
  type AcquireResult,
  type LeaseRecord,
  type LeaseStore,
} from '../../store/lease-store.port';
import { withDeadline } from './call-deadline';
import { isStreamNotFound, toPortError } from './eventstoredb-errors';

export interface EventStoreDbLeaseStoreOptions {
  /** A client shared with the event store, or a connection string for one of its own. */
  client?: EventStoreDBClient;
  connectionString?: string;
  timeoutMs?: number;
  /** Tries of one change when another instance changed the record in between. */
  maxConflictRetries?: number;
}

/**
 * `lease-` streams sit outside the `op-` category the ledger reads, so no projection, export or
 * integrity check ever sees them.
 */
export const LEASE_STREAM_PREFIX = 'lease-';
const LEASE_EVENT = 'LeaseChanged';
/** Only the last record matters; the server may scavenge the rest. */
const KEEP_EVENTS = 8;

/**
 * Leases on EventStoreDB / KurrentDB: one stream per item, whose last event is the current record.
 * A change reads that event and its revision, decides, and appends at that expected revision, so a
 * concurrent change by another instance fails with a wrong expected version and is decided again
 * on the fresh record: optimistic concurrency gives the compare-and-set.
 */
export class EventStoreDbLeaseStore implements LeaseStore {
  private readonly client: EventStoreDBClient;
  private readonly ownsClient: boolean;
  private readonly timeoutMs: number;
  private readonly maxConflictRetries: number;
  private readonly capped = new Set<string>();
  private closed = false;

  constructor(options: EventStoreDbLeaseStoreOptions) {
    ({ client: this.client, ownsClient: this.ownsClient } = adapterClient(options, 'EventStoreDbLeaseStore'));
    this.timeoutMs = options.timeoutMs ?? 5_000;
    this.maxConflictRetries = options.maxConflictRetries ?? 10;
  }

  private stream(key: string): string {
    return `${LEASE_STREAM_PREFIX}${key}`;
  }

  private async read(key: string): Promise<{ record?: LeaseRecord; revision?: bigint }> {
    const stream = this.stream(key);
    try {
      const [last] = await readLatest(this.client, stream, 1, this.timeoutMs);
      if (!last) return {};
      return { record: last.data as unknown as LeaseRecord, revision: last.revision };
    } catch (error) {
      if (isStreamNotFound(error)) return {};
      throw toPortError(error, { stream, retryAfterSeconds: 1 });
    }
  }

  /** Read, decide, append at the revision read; a lost race is decided again on the fresh record. */
  private async change<T>(
    key: string,
    decide: (current: LeaseRecord | undefined) => { write?: LeaseRecord; answer: T },
  ): Promise<T> {
    if (this.closed) throw new StoreUnavailableError('lease store closed');
    const stream = this.stream(key);
    for (let attempt = 0; ; attempt++) {
      const { record, revision } = await this.read(key);
      const { write, answer } = decide(record);
      if (!write) return answer;
      try {
        await withDeadline(
          this.client.appendToStream(stream, jsonEvent({ id: randomUUID(), type: LEASE_EVENT, data: write as never }), {
            expectedRevision: revision === undefined ? ESDB_NO_STREAM : revision,
            deadline: this.timeoutMs,
          }),
          this.timeoutMs,
          `append to ${stream}`,
        );
        if (revision === undefined) await this.cap(stream);
        return answer;
      } catch (error) {
        const portError = toPortError(error, { stream, retryAfterSeconds: 1 });
        if (!(portError instanceof RevisionConflictError) || attempt >= this.maxConflictRetries) throw portError;
      }
    }
  }

  /** Best effort: a server that refuses stream metadata still keeps leases right, only longer. */
  private async cap(stream: string): Promise<void> {
    if (this.capped.has(stream)) return;
    this.capped.add(stream);
    try {
      await withDeadline(
        this.client.setStreamMetadata(stream, { maxCount: KEEP_EVENTS }),
        this.timeoutMs,
        `metadata of ${stream}`,
      );
    } catch {
      /* see above */
    }
  }

  acquire(request: AcquireRequest): Promise<AcquireResult> {
    return this.change<AcquireResult>(request.key, (current) => acquireDecision(request, current));
  }

  renew(key: string, leaseId: string, nowMs: number, ttlMs: number): Promise<LeaseRecord | undefined> {
    return this.change(key, (current) => {
      const renewed = renewedRecord(current, leaseId, nowMs, ttlMs);
      return { write: renewed, answer: renewed };
    });
  }

  release(key: string, leaseId: string, nowMs: number, holdMs?: number): Promise<boolean> {
    return this.change(key, (current) => {
      const released = releasedRecord(current, leaseId, nowMs, holdMs);
      return { write: released, answer: released !== undefined };
    });
  }

  async getMany(keys: readonly string[]): Promise<Map<string, LeaseRecord>> {
    if (this.closed) throw new StoreUnavailableError('lease store closed');
    const found = new Map<string, LeaseRecord>();
    const records = await Promise.all(keys.map(async (key) => [key, (await this.read(key)).record] as const));
    for (const [key, record] of records) if (record) found.set(key, record);
    return found;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.ownsClient) await this.client.dispose();
  }
}
