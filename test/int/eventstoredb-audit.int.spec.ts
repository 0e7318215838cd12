/**
 * The whole-log audit on EventStoreDB (over the protocol double): the adapter keeps no anchors, so
 * what the audit sees there is the chains and what the server refuses to read. A soft-deleted or
 * truncated stream whose events the log still lists is reported, never skipped (docs/reliability.md).
 */
import { EventStoreDBClient } from '@eventstore/db-client';
import { randomUUID } from 'node:crypto';
import { EventStoreDbEventStore } from '../../src/adapters/eventstoredb/eventstoredb-event-store.adapter';
import { EventStoreDbLeaseStore } from '../../src/adapters/eventstoredb/eventstoredb-lease-store.adapter';
import { EventStoreDbTimeBaseStore } from '../../src/adapters/eventstoredb/eventstoredb-time-base.adapter';
import { NO_STREAM } from '../../src/store/event-store.port';
import { sealEvents } from '../../src/integrity/hash-chain';
import { auditLog } from '../../src/integrity/log-audit';
import { newEvent } from '../contract/event-store.contract';
import { EventStoreDbProtocolDouble } from '../support/eventstoredb-protocol-double/protocol-double';

describe('the log audit on EventStoreDB', () => {
  let double: EventStoreDbProtocolDouble;
  let store: EventStoreDbEventStore;
  beforeAll(async () => {
    double = await EventStoreDbProtocolDouble.start({});
    store = new EventStoreDbEventStore({ connectionString: double.connectionString, appendTimeoutMs: 5_000 });
  });
  afterAll(async () => {
    await store.close();
    await double.stop();
  });

  it('passes on intact chains, then reports a soft-deleted and a truncated stream', async () => {
    const prefix = `op-audit${randomUUID().slice(0, 6)}:`;
    const names = ['a', 'b', 'c'].map((name) => `${prefix}${name}`);
    for (const stream of names)
      await store.append(stream, NO_STREAM, sealEvents(stream, undefined, [newEvent('A'), newEvent('B')]));
    const clean = await auditLog(store, { streamPrefix: prefix });
    expect(clean).toMatchObject({ ok: true, anchored: false, events: 6 });

    const client = EventStoreDBClient.connectionString(double.connectionString);
    try {
      await client.deleteStream(names[0]);
      await client.setStreamMetadata(names[1], { truncateBefore: 1 });
    } finally {
      await client.dispose();
    }
    const audit = await auditLog(store, { streamPrefix: prefix });
    expect(audit.ok).toBe(false);
    expect(audit.broken_streams).toEqual([names[0], names[1]]);
    expect(audit.findings.map((finding) => finding.kind)).toEqual(['unreadable_stream', 'unreadable_stream']);
  });

  it('reads past the streams the adapters keep beside the log (leases, the clock time base): they are not the log', async () => {
    const prefix = `op-beside${randomUUID().slice(0, 6)}:`;
    const leases = new EventStoreDbLeaseStore({ connectionString: double.connectionString });
    const clock = new EventStoreDbTimeBaseStore({ connectionString: double.connectionString });
    try {
      await leases.acquire({
        key: `default:${randomUUID()}`,
        leaseId: 'l1',
        holder: 'w1',
        nowMs: Date.now(),
        ttlMs: 1000,
      });
      await clock.adoptBase({ boot_id: randomUUID(), wall_ms: Date.now(), monotonic_ms: 1, instance_id: 'i1' });
      await clock.beat({ instance_id: 'i1', boot_id: 'b', ledger_ms: Date.now(), monotonic_ms: 1, seq: 1 });
    } finally {
      await Promise.all([leases.close(), clock.close()]);
    }
    const stream = `${prefix}a`;
    await store.append(stream, NO_STREAM, sealEvents(stream, undefined, [newEvent('A')]));
    expect(await auditLog(store, { streamPrefix: prefix })).toMatchObject({ ok: true, events: expect.any(Number) });
    expect(
      (await store.readAll({ after: 0, limit: 10_000 }))
        .map((event) => event.stream)
        .filter((name) => !name.startsWith('op-')),
    ).toEqual([]);
  });
});
