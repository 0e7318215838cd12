/**
 * The projection engine in its own worker thread on the embedded SQLite store (the default there):
 * the worker opens its own connections to the log and the read-model file, this thread reads the
 * documents through its own, and a wait for a position resolves only once that position is
 * committed and visible here. A worker thread that ends is started again from the stored
 * checkpoints and applies nothing twice.
 */
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Worker } from 'node:worker_threads';
import { scopedKey } from '@recovery-ledger/projections';
import { LEDGER_PROJECTIONS } from '@recovery-ledger/projections';
import type { RunSummaryDoc } from '@recovery-ledger/projections';
import { WorkerProjectionRunner } from '../../src/projection-engine/projection-worker-client';
import { SqliteReadModel } from '../../src/adapters/sqlite/sqlite-read-model.store';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { envelopes, LedgerScenario } from '../unit/projections/support/ledger-scenario';
import { expectedSnapshot, snapshot } from '../unit/projections/support/read-model-snapshot';

async function workload(scenario: LedgerScenario, operations: number, prefix: string): Promise<number> {
  for (let n = 0; n < operations; n++) {
    const ref = `run_${n % 3}/${prefix}_${n}`;
    await scenario.plan(ref, { run_id: `run_${n % 3}`, tool: n % 2 === 0 ? 'create_invoice' : 'send_email' });
    await scenario.dispatch(ref, 1);
    scenario.clock.advance(1_000);
    await scenario.envelope(ref, 1, n % 4 === 0 ? envelopes.committed(ref) : envelopes.unknown(ref));
    scenario.clock.advance(31_000);
    if (n % 4 !== 0) await scenario.verify(ref, n % 4 === 1 ? 'found_committed' : 'not_found', `ev_${n}`);
    await scenario.dispatch(ref, 2);
  }
  return scenario.store.headPosition();
}

/** The thread the runner started: the test ends it the way a crash inside it would. */
const threadOf = (runner: WorkerProjectionRunner) => runner['worker'] as Worker | undefined;

describe('projection engine in a worker thread (SQLite store)', () => {
  let dir: string;
  let store: SqliteEventStore;
  let readModel: SqliteReadModel;
  let scenario: LedgerScenario;
  const runners: WorkerProjectionRunner[] = [];
  const exits: Error[] = [];

  function runner(): WorkerProjectionRunner {
    const created = new WorkerProjectionRunner({
      eventsFile: join(dir, 'events.sqlite'),
      readModelFile: join(dir, 'read-models.sqlite'),
      busyTimeoutMs: 5000,
      store,
      readModel,
      projections: LEDGER_PROJECTIONS,
      restartDelayMs: 50,
      onWorkerExit: (error) => exits.push(error),
    });
    runners.push(created);
    return created;
  }

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'ledger-projection-worker-'));
    store = SqliteEventStore.open({ file: join(dir, 'events.sqlite') });
    readModel = SqliteReadModel.open({ file: join(dir, 'read-models.sqlite') });
    scenario = new LedgerScenario(store);
    exits.length = 0;
  });

  afterEach(async () => {
    for (const created of runners.splice(0)) await created.stop();
    readModel.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('folds in another thread; a resolved wait means this thread reads that position', async () => {
    await workload(scenario, 5, 'before');
    const engine = runner();
    engine.start();
    expect(await engine.waitForPosition(await store.headPosition(), 10_000)).toBe(true);
    expect(threadOf(engine)?.threadId).toBeGreaterThan(0);
    expect(snapshot(readModel, LEDGER_PROJECTIONS)).toEqual(expectedSnapshot(LEDGER_PROJECTIONS, await scenario.log()));

    // Each append, then at once a wait and a read through this thread's connection, whose cache of
    // parsed documents must not answer the document as it was before the worker's commit.
    for (let n = 0; n < 12; n++) {
      const ref = `run_live/step_${n}`;
      const planned = await scenario.plan(ref, { run_id: 'run_live', tool: 'create_invoice' });
      if (!planned.ok) throw new Error(planned.code);
      expect(await engine.waitForPosition(planned.answer.position, 10_000, ['run_summary'])).toBe(true);
      expect(engine.checkpoint('run_summary')).toBeGreaterThanOrEqual(planned.answer.position);
      const summary = readModel.getDoc<RunSummaryDoc>('run_summary', scopedKey('acme', 'run_live'));
      expect(summary?.total).toBe(n + 1);
    }
    const head = await workload(scenario, 4, 'after');
    expect(await engine.waitForPosition(head, 10_000)).toBe(true);
    expect(snapshot(readModel, LEDGER_PROJECTIONS)).toEqual(expectedSnapshot(LEDGER_PROJECTIONS, await scenario.log()));
    expect(engine.status()).toMatchObject({ state: 'live', worker: { restarts: 0 } });
    const lags = await engine.lag();
    expect(lags.map((lag) => lag.events_behind)).toEqual(LEDGER_PROJECTIONS.map(() => 0));
    expect(exits).toEqual([]);
  });

  it('a worker thread that ends is started again from the stored checkpoints and counts nothing twice', async () => {
    await workload(scenario, 4, 'before');
    const engine = runner();
    engine.start();
    expect(await engine.waitForPosition(await store.headPosition(), 10_000)).toBe(true);

    await threadOf(engine)?.terminate();
    expect(engine.status()).toMatchObject({ state: 'failed', worker: { restarts: 1 } });
    expect(engine.status().error).toMatch(/worker thread ended/);
    expect(exits).toHaveLength(1);

    const head = await workload(scenario, 4, 'after');
    expect(await engine.waitForPosition(head, 10_000)).toBe(true);
    expect(engine.status().state).not.toBe('failed');
    expect(snapshot(readModel, LEDGER_PROJECTIONS)).toEqual(expectedSnapshot(LEDGER_PROJECTIONS, await scenario.log()));
  });

  it('ended in the middle of catching up, again and again, the read model still holds each event once', async () => {
    const head = await workload(scenario, 60, 'bulk');
    const engine = runner();
    engine.start();
    for (let kill = 0; kill < 4; kill++) {
      // Each new thread is ended a little later into its catch-up: before, during or after a commit.
      let thread = threadOf(engine);
      while (!thread) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        thread = threadOf(engine);
      }
      const current = thread;
      await new Promise((resolve) => current.once('message', resolve));
      await new Promise((resolve) => setTimeout(resolve, kill * 15));
      await current.terminate();
    }
    expect(await engine.waitForPosition(head, 20_000)).toBe(true);
    expect(engine.status().worker?.restarts).toBe(4);
    expect(snapshot(readModel, LEDGER_PROJECTIONS)).toEqual(expectedSnapshot(LEDGER_PROJECTIONS, await scenario.log()));
  });

  it('rebuilds in the worker, before and after it starts', async () => {
    await workload(scenario, 4, 'before');
    const engine = runner();
    await engine.rebuild(['trust_metrics']);
    engine.start();
    const head = await workload(scenario, 3, 'after');
    await engine.rebuild(['run_summary', 'trust_metrics']);
    expect(await engine.waitForPosition(head, 10_000)).toBe(true);
    expect(engine.status().projections.every((projection) => projection.mode === 'live')).toBe(true);
    expect(snapshot(readModel, LEDGER_PROJECTIONS)).toEqual(expectedSnapshot(LEDGER_PROJECTIONS, await scenario.log()));
  });

  it('stop ends the thread after it closed its connections', async () => {
    await workload(scenario, 2, 'before');
    const engine = runner();
    engine.start();
    expect(await engine.waitForPosition(await store.headPosition(), 10_000)).toBe(true);
    const thread = threadOf(engine);
    const ended = new Promise<number>((resolve) => thread?.once('exit', resolve));
    await engine.stop();
    await ended;
    expect(threadOf(engine)).toBeUndefined();
    expect(engine.status().state).toBe('stopped');
    expect(exits).toEqual([]);
    // Nothing of the worker's holds the read-model file: another connection takes its write lock at once.
    const other = new Database(join(dir, 'read-models.sqlite'), { timeout: 0 });
    try {
      other.exec('BEGIN IMMEDIATE; COMMIT;');
    } finally {
      other.close();
    }
  });
});
