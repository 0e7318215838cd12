/**
 * A decision costs the same on a step's 10th event and its 10,000th (docs/architecture.md, "Reading
 * a stream"): it folds from the state kept beside the stream every SNAPSHOT_EVERY events
 * (`stream_snapshots`, checked against the stored event's hash) and reads only the events after it.
 * Counted on a real SQLite store (`eventsRead`, every event it decoded), never timed.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_ENVELOPE_LIMITS, DEFAULT_POLICY, type SubmittedEvent } from '@recovery-ledger/core';
import Database from 'better-sqlite3';
import { READ_EVENTS_BY_ID_SQL, SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { LedgerService } from '../../src/ledger/ledger.service';
import { SNAPSHOT_EVERY } from '../../src/ledger/sealed-streams';
import { systemClock } from '../../src/shared/clock';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';

const REF = 'run_cost/step_1';
const ev = (type: SubmittedEvent['type'], data: Record<string, unknown>): SubmittedEvent => ({
  event_id: randomUUID(),
  type,
  data: data as SubmittedEvent['data'],
});

describe("a decision's cost against its step's history", () => {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-decision-cost-'));
  const store = SqliteEventStore.open({ file: join(dir, 'events.sqlite') });
  const ledger = new LedgerService(store, systemClock, {
    envelopeLimits: DEFAULT_ENVELOPE_LIMITS,
    defaultPolicy: DEFAULT_POLICY,
    maxConflictRetries: 5,
  });
  const context = { tenant: 'acme', actor: 'runtime-1', operationRef: REF };

  afterAll(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Events decoded by one dispatch on the succeeded step (answered as a prevented duplicate, recorded). */
  async function oneDecision(): Promise<{ read: number; revision: number }> {
    const before = store.eventsRead;
    const answer = await ledger.submit(context, {
      events: [ev('AttemptDispatched', { attempt: 2, input_hash: 'h1' })],
    });
    return { read: store.eventsRead - before, revision: answer.revision };
  }

  async function growTo(revision: number, from: number): Promise<void> {
    for (let at = from; at < revision;) {
      const count = Math.min(100, revision - at);
      const answer = await ledger.submit(context, {
        events: Array.from({ length: count }, () => ev('AttemptDispatched', { attempt: 2, input_hash: 'h1' })),
      });
      at = answer.revision;
    }
  }

  it("looks a submit's event ids up by the (stream, event_id) index, not by walking the stream", () => {
    const reader = new Database(join(dir, 'events.sqlite'), { readonly: true });
    try {
      const plan = reader
        .prepare(`EXPLAIN QUERY PLAN ${READ_EVENTS_BY_ID_SQL}`)
        .all(REF, '[]')
        .map((row) => (row as { detail: string }).detail);
      expect(plan.some((step) => /^SEARCH events USING INDEX \S+ \(stream=\? AND event_id=\?\)$/.test(step))).toBe(
        true,
      );
    } finally {
      reader.close();
    }
  });

  it('reads no more on the 10,000th event than on the 10th', async () => {
    await ledger.submit(context, {
      events: [
        ev('StepPlanned', { run_id: 'run_cost', tool: 'create_invoice', side_effect: 'write', input_hash: 'h1' }),
      ],
    });
    await ledger.submit(context, { events: [ev('AttemptDispatched', { attempt: 1, input_hash: 'h1' })] });
    const succeeded = await ledger.submit(context, {
      events: [ev('EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.success(REF, 'inv_1') })],
    });
    expect(succeeded.state.status).toBe('succeeded');
    await growTo(8, succeeded.revision);

    const early = await oneDecision();
    expect(early.revision).toBeGreaterThanOrEqual(9);
    await growTo(9_998, early.revision);
    const late = await oneDecision();
    expect(late.revision).toBeGreaterThanOrEqual(9_999);

    // At most the events since the last kept state (fewer than SNAPSHOT_EVERY), and the stored
    // event the state was kept at, on both; never the stream's length.
    expect(late.read).toBeLessThanOrEqual(SNAPSHOT_EVERY + 1);
    expect(late.read).toBeLessThanOrEqual(Math.max(early.read, SNAPSHOT_EVERY + 1));
  }, 300_000);
});
