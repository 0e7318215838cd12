/**
 * A log written before the store kept anchors: opened once, it is anchored as it stands in one pass
 * (the log chain, each stream's head, each stream's index entry), verifies, and lists what is in
 * doubt; a file whose anchors were dropped later is never re-adopted (docs/reliability.md).
 */
import Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_ENVELOPE_LIMITS, DEFAULT_POLICY } from '@recovery-ledger/core';
import { LedgerService } from '../../src/ledger/ledger.service';
import { stepIndexer } from '../../src/ledger/step-index';
import { auditLog } from '../../src/integrity/log-audit';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';

const settings = { envelopeLimits: DEFAULT_ENVELOPE_LIMITS, defaultPolicy: DEFAULT_POLICY, maxConflictRetries: 5 };
const ev = (type: string, data: Record<string, unknown>) => ({ event_id: randomUUID(), type, data }) as never;

describe('a log written before anchors', () => {
  let dir: string;
  let file: string;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ledger-adopt-'));
    file = join(dir, 'events.sqlite');
    const store = SqliteEventStore.open({ file });
    const ledger = new LedgerService(store, { now: () => new Date() }, settings);
    for (const [ref, outcome] of [
      ['run_1/doubt', 'unknown'],
      ['run_1/done', 'success'],
    ] as const) {
      const context = { tenant: 'acme', actor: 'k', operationRef: ref };
      await ledger.submit(context, {
        events: [
          ev('StepPlanned', { run_id: 'run_1', tool: 'create_invoice', side_effect: 'write', input_hash: 'h1' }),
        ],
      });
      await ledger.submit(context, { events: [ev('AttemptDispatched', { attempt: 1, input_hash: 'h1' })] });
      const envelope = outcome === 'unknown' ? seedEnvelopes.outcomeUnknown(ref) : seedEnvelopes.success(ref, 'inv_1');
      await ledger.submit(context, { events: [ev('EnvelopeRecorded', { attempt: 1, envelope })] });
    }
    await store.close();
    // What a file of the earlier format looks like: the events alone.
    const db = new Database(file);
    db.exec('DROP TABLE stream_heads; DROP TABLE log_anchor; PRAGMA user_version = 0;');
    db.close();
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('is anchored and indexed as it stands, verifies, and lists what is in doubt', async () => {
    const adopted: number[] = [];
    const store = SqliteEventStore.open({ file, indexer: stepIndexer, onLogAdopted: (events) => adopted.push(events) });
    try {
      expect(adopted).toEqual([12]);
      expect((await auditLog(store)).ok).toBe(true);
      const inDoubt = await store.indexedStreams('op-acme:', ['dispatched', 'verifying']);
      expect(inDoubt?.map((entry) => [entry.stream, entry.key, entry.data.tool])).toEqual([
        ['op-acme:run_1/doubt', 'verifying', 'create_invoice'],
      ]);
    } finally {
      await store.close();
    }
    // Opened again: nothing is adopted twice.
    const again = SqliteEventStore.open({ file, indexer: stepIndexer, onLogAdopted: (events) => adopted.push(events) });
    await again.close();
    expect(adopted).toEqual([12]);
  });
});
