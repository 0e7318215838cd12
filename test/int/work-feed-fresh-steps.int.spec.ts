/**
 * The work feed hands out a step a submit has just made due without waiting for the read model
 * (docs/work-feed.md, "A waiting poll looks again when the read model moves"): here the projection
 * engine is built and never started, so the read model never shows the step at all, and a waiting
 * poll still gets it, judged on the step's own stream. Real SQLite log, leases and read model.
 */
import { randomUUID } from 'node:crypto';
import { DEFAULT_ENVELOPE_LIMITS, DEFAULT_POLICY } from '@recovery-ledger/core';
import { LEDGER_PROJECTIONS } from '@recovery-ledger/projections';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { SqliteLeaseStore } from '../../src/adapters/sqlite/sqlite-lease-store.adapter';
import { SqliteReadModel } from '../../src/adapters/sqlite/sqlite-read-model.store';
import type { Caller } from '../../src/auth/caller';
import { systemClock } from '../../src/shared/clock';
import { LedgerService } from '../../src/ledger/ledger.service';
import { ProjectionEngine } from '../../src/projection-engine/projection-engine';
import { DEFAULT_WORK_FEED_SETTINGS, WorkFeed } from '../../src/work/work-feed';

const caller: Caller = { tenant: 'acme', actor: 'key_worker', role: 'runtime' };

describe('a step made due while a poll waits', () => {
  let store: SqliteEventStore;
  let readModel: SqliteReadModel;
  let leases: SqliteLeaseStore;
  let feed: WorkFeed;
  let ledger: LedgerService;

  beforeEach(() => {
    store = SqliteEventStore.open({ file: ':memory:' });
    readModel = SqliteReadModel.open({ file: ':memory:' });
    leases = SqliteLeaseStore.open({ file: ':memory:' });
    const engine = new ProjectionEngine({ store, readModel, projections: LEDGER_PROJECTIONS });
    let made: WorkFeed | undefined;
    ledger = new LedgerService(
      store,
      systemClock,
      { envelopeLimits: DEFAULT_ENVELOPE_LIMITS, defaultPolicy: DEFAULT_POLICY, maxConflictRetries: 5 },
      { onAppended: (_events, tenant, step) => made?.noteChanged(tenant, step.operationRef, step.state) },
    );
    feed = made = new WorkFeed(ledger, readModel, leases, systemClock, {}, DEFAULT_WORK_FEED_SETTINGS, {
      position: () => engine.position(['step_state']),
      waitForPosition: (position, timeoutMs) => engine.waitForPosition(position, timeoutMs, ['step_state']),
    });
  });

  afterEach(async () => {
    feed.stop();
    await leases.close();
    readModel.close();
    await store.close();
  });

  const plan = (ref: string, tool: string, tenant = 'acme') =>
    ledger.submit(
      { tenant, actor: 'key_runtime', operationRef: ref },
      {
        events: [
          {
            event_id: randomUUID(),
            type: 'StepPlanned',
            data: { run_id: 'run_fresh', tool, side_effect: 'write', input_hash: 'h1' },
          },
        ],
      },
    );

  it('is handed to the waiting poll, under a lease, judged on its stream', async () => {
    const waiting = feed.take(caller, {
      tools: ['create_invoice'],
      worker: 'w1',
      limit: 1,
      waitMs: 5_000,
      leaseMs: 30_000,
    });
    await plan('run_fresh/step_1', 'create_invoice');
    const answer = await waiting;
    expect(answer.items).toHaveLength(1);
    expect(answer.items[0]).toMatchObject({
      operation_ref: 'run_fresh/step_1',
      kind: 'dispatch',
      attempt: 1,
      status: 'planned',
      lease: { holder: 'w1' },
    });
    // Handed out once: the next poll finds it held (and the read model still shows nothing).
    const next = await feed.take(caller, { tools: [], worker: 'w2', limit: 5, waitMs: 0, leaseMs: 30_000 });
    expect(next.items).toEqual([]);
  });

  it("never hands a poll another tenant's step or another tool's", async () => {
    const waiting = feed.take(caller, {
      tools: ['create_invoice'],
      worker: 'w1',
      limit: 5,
      waitMs: 600,
      leaseMs: 30_000,
    });
    await plan('run_fresh/other_tenant', 'create_invoice', 'globex');
    await plan('run_fresh/other_tool', 'send_email');
    expect((await waiting).items).toEqual([]);
    // The other tool's step is still there for a poll that serves it.
    const emailer = await feed.take(caller, {
      tools: ['send_email'],
      worker: 'w3',
      limit: 5,
      waitMs: 0,
      leaseMs: 30_000,
    });
    expect(emailer.items.map((item) => item.operation_ref)).toEqual(['run_fresh/other_tool']);
  });
});
