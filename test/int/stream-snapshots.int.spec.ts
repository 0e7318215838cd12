/**
 * A step's state kept beside its stream (src/ledger/sealed-streams.ts; docs/architecture.md,
 * "Reading a stream"): the ledger on a real SQLite file. A read folds and checks only the events
 * after the kept state, counted on the store; it answers what folding the whole stream answers; a
 * kept state whose head hash is not the log's is refused as tampering; one of another fold version
 * is not used; a resubmission of an early fact is answered as the first time without the stream.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { DEFAULT_ENVELOPE_LIMITS, DEFAULT_POLICY, fold, type SubmittedEvent } from '@recovery-ledger/core';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { systemClock } from '../../src/shared/clock';
import { LedgerService } from '../../src/ledger/ledger.service';
import { SNAPSHOT_EVERY } from '../../src/ledger/sealed-streams';
import { stateView } from '../../src/ledger/step-views';
import { toRecorded } from '../../src/ledger/stored-events';
import { StoreIntegrityError } from '../../src/store/event-store.port';
import { operationStream } from '../../src/store/stream-names';
import { seedEnvelopes } from '../../packages/core/test/support/seed-envelopes';

const REF = 'run_snap/step_1';
const STREAM = operationStream('acme', REF);
const context = { tenant: 'acme', actor: 'key_test', operationRef: REF };
const settings = { envelopeLimits: DEFAULT_ENVELOPE_LIMITS, defaultPolicy: DEFAULT_POLICY, maxConflictRetries: 5 };
const ev = (type: SubmittedEvent['type'], data: Record<string, unknown>, event_id = randomUUID()): SubmittedEvent => ({
  event_id,
  type,
  data: data as SubmittedEvent['data'],
});

describe('a stream read from the state kept beside it', () => {
  let dir: string;
  let store: SqliteEventStore;
  let ledger: LedgerService;
  const early = randomUUID();
  let earlyAnswer: Awaited<ReturnType<LedgerService['submit']>>;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ledger-snapshots-'));
    store = SqliteEventStore.open({ file: join(dir, 'events.sqlite') });
    ledger = new LedgerService(store, systemClock, settings);
    await ledger.submit(context, {
      events: [
        ev('StepPlanned', { run_id: 'run_snap', tool: 'create_invoice', side_effect: 'write', input_hash: 'h1' }),
      ],
    });
    await ledger.submit(context, { events: [ev('AttemptDispatched', { attempt: 1, input_hash: 'h1' })] });
    await ledger.submit(context, {
      events: [ev('EnvelopeRecorded', { attempt: 1, envelope: seedEnvelopes.success(REF, 'inv_1') })],
    });
    earlyAnswer = await ledger.submit(context, {
      events: [ev('AttemptDispatched', { attempt: 2, input_hash: 'h1' }, early)],
    });
    // 300 more events: dispatches on the succeeded step, each recorded (DUPLICATE_PREVENTED), 30 a submit.
    for (let submit = 0; submit < 10; submit++) {
      await ledger.submit(context, {
        events: Array.from({ length: 30 }, () => ev('AttemptDispatched', { attempt: 2, input_hash: 'h1' })),
      });
    }
  });

  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const wholeFold = async () => {
    const events = await store.readStream(STREAM);
    return stateView(REF, fold(events.map(toRecorded)), events[events.length - 1].revision);
  };

  it('reads only the events after the kept state, and answers what folding the whole stream answers', async () => {
    const before = store.eventsRead;
    const { view, revision } = await ledger.getState('acme', REF);
    const read = store.eventsRead - before;
    expect(revision).toBe(306);
    expect(read).toBeLessThanOrEqual(SNAPSHOT_EVERY + 30);
    expect(view).toEqual(await wholeFold());
    // A state as it stood at an earlier revision, the same way.
    const then = store.eventsRead;
    const { view: at } = await ledger.getState('acme', REF, 100);
    // The head (as above) and the state then: each folded from the state kept last before it.
    expect(store.eventsRead - then).toBeLessThanOrEqual(2 * (SNAPSHOT_EVERY + 30));
    const events = await store.readStream(STREAM);
    expect(at).toEqual(stateView(REF, fold(events.slice(0, 101).map(toRecorded)), 100));
  });

  it('answers a resubmitted early fact as the first time, without reading the stream', async () => {
    const before = store.eventsRead;
    const again = await ledger.submit(context, {
      events: [ev('AttemptDispatched', { attempt: 2, input_hash: 'h1' }, early)],
    });
    expect(store.eventsRead - before).toBeLessThanOrEqual(SNAPSHOT_EVERY + 30 + 2);
    expect(again).toEqual({ ...earlyAnswer, results: [{ event_id: early, status: 'duplicate' }] });
  });

  it('refuses a kept state whose head hash is not the stored event at its revision', async () => {
    const db = new Database(join(dir, 'events.sqlite'));
    db.prepare('UPDATE stream_snapshots SET hash = ? WHERE stream = ?').run('f'.repeat(64), STREAM);
    db.close();
    const refused = await ledger.getState('acme', REF).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(StoreIntegrityError);
    expect((refused as Error).message).toMatch(/does not match the log/);
  });

  it('does not use a state kept by another version of the fold: it folds the whole stream, once', async () => {
    const db = new Database(join(dir, 'events.sqlite'));
    db.prepare("UPDATE stream_snapshots SET fold_version = 'step-state/0', state = '{}' WHERE stream = ?").run(STREAM);
    db.close();
    const before = store.eventsRead;
    const { view } = await ledger.getState('acme', REF);
    expect(store.eventsRead - before).toBe(307);
    expect(view).toEqual(await wholeFold());
    // That read kept the state it folded, with the store's next commit (which a keep that matches
    // nothing waits for): the next read starts from it.
    await store.keepSnapshot(STREAM, { fold_version: 'none', revision: 0, hash: 'none', state: {} });
    const again = store.eventsRead;
    expect((await ledger.getState('acme', REF)).view).toEqual(view);
    expect(store.eventsRead - again).toBe(1);
  });
});
