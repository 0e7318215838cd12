import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LEDGER_PROJECTIONS } from '@recovery-ledger/projections';
import { trustReport, type TrustMetricsDoc } from '@recovery-ledger/projections';
import { ProjectionEngine } from '../../src/projection-engine/projection-engine';
import { SqliteReadModel } from '../../src/adapters/sqlite/sqlite-read-model.store';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { withEngineFaults, type EngineFaults } from '../support/engine-faults';
import { runEngineUntilKilled } from '../support/killed-engine';
import { foldProjection } from '../../projections/test/support/fold-projection';
import { envelopes, LedgerScenario } from '../unit/projections/support/ledger-scenario';
import { expectedSnapshot, snapshot } from '../unit/projections/support/read-model-snapshot';

const BATCH = 10;

/** Operations whose trust figures are easy to check by hand: unknowns, duplicates, identical retries. */
async function workload(scenario: LedgerScenario, operations: number): Promise<void> {
  for (let n = 0; n < operations; n++) {
    const ref = `run_1/step_${n}`;
    await scenario.plan(ref, { tool: n % 2 === 0 ? 'create_invoice' : 'send_email' });
    await scenario.dispatch(ref, 1);
    scenario.clock.advance(2_000);
    await scenario.envelope(ref, 1, n % 3 === 0 ? envelopes.invalidInput(ref) : envelopes.unknown(ref));
    if (n % 3 === 0) {
      await scenario.dispatch(ref, 2, 'h1'); // identical retry: blocked
      continue;
    }
    scenario.clock.advance(5_000);
    await scenario.verify(ref, 'found_committed', `inv_${n}`);
    await scenario.dispatch(ref, 2); // duplicate: prevented
  }
}

class InjectedCrash extends Error {}

describe('projection engine under fault injection', () => {
  let dir: string;
  let store: SqliteEventStore;
  let scenario: LedgerScenario;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ledger-faults-'));
    store = SqliteEventStore.open({ file: join(dir, 'events.sqlite'), pollIntervalMs: 20 });
    scenario = new LedgerScenario(store);
    await workload(scenario, 12);
  });

  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function expectExact(readModel: SqliteReadModel): Promise<void> {
    const log = await scenario.log();
    expect(snapshot(readModel, LEDGER_PROJECTIONS)).toEqual(expectedSnapshot(LEDGER_PROJECTIONS, log));
    // The figures a double-counting or skipping engine would get wrong, spelled out.
    const docs = readModel.select<TrustMetricsDoc>('trust_metrics').map((row) => row.doc);
    expect(trustReport(docs)).toMatchObject({
      operations_planned: 12,
      unknown_outcomes: 8,
      verified_found_committed: 8,
      duplicate_writes_prevented: 8,
      identical_retries_blocked: 4,
    });
    expect(trustReport(docs)).toEqual(
      trustReport([...foldProjection(LEDGER_PROJECTIONS[3], log).docs.values()] as TrustMetricsDoc[]),
    );
  }

  async function runUntilCrash(readModel: SqliteReadModel, faults: EngineFaults): Promise<ProjectionEngine> {
    let crashed!: (error: Error) => void;
    const failed = new Promise<Error>((resolveError) => (crashed = resolveError));
    const engine = new ProjectionEngine({
      ...withEngineFaults(store, readModel, faults),
      projections: LEDGER_PROJECTIONS,
      batchSize: BATCH,
      restartDelayMs: null,
      onError: crashed,
    });
    engine.start();
    expect(await failed).toBeInstanceOf(InjectedCrash);
    expect(engine.status().state).toBe('failed');
    await engine.stop();
    return engine;
  }

  it('crashing after a batch committed, then starting again, counts every event exactly once', async () => {
    const file = join(dir, 'read-models.sqlite');
    let batches = 0;
    const readModel = SqliteReadModel.open({ file });
    await runUntilCrash(readModel, {
      afterCommit: () => {
        if (++batches === 3) throw new InjectedCrash('killed between a read-model write and the next batch');
      },
    });
    readModel.close();

    const reopened = SqliteReadModel.open({ file });
    const [first] = await store.readAll({ after: 0, limit: 1 });
    // Three batches are durable, with the checkpoint that covers them and nothing more.
    for (const checkpoint of reopened.checkpoints()) expect(checkpoint.position).toBe(first.position - 1 + 3 * BATCH);
    const engine = new ProjectionEngine({
      store,
      readModel: reopened,
      projections: LEDGER_PROJECTIONS,
      batchSize: BATCH,
    });
    engine.start();
    expect(await engine.waitForPosition(await store.headPosition(), 5_000)).toBe(true);
    await engine.stop();
    await expectExact(reopened);
    reopened.close();
  });

  it('crashing inside a batch rolls the whole batch back, documents and checkpoint together', async () => {
    const file = join(dir, 'read-models.sqlite');
    let batches = 0;
    const readModel = SqliteReadModel.open({ file });
    let beforeFailing: ReturnType<typeof snapshot> | undefined;
    await runUntilCrash(readModel, {
      beforeCommit: () => {
        if (++batches === 2) throw new InjectedCrash('died before COMMIT');
      },
      afterCommit: () => {
        beforeFailing = snapshot(readModel, LEDGER_PROJECTIONS);
      },
    });
    expect(snapshot(readModel, LEDGER_PROJECTIONS)).toEqual(beforeFailing);
    const [first] = await store.readAll({ after: 0, limit: 1 });
    for (const checkpoint of readModel.checkpoints()) expect(checkpoint.position).toBe(first.position - 1 + BATCH);
    readModel.close();

    const reopened = SqliteReadModel.open({ file });
    const engine = new ProjectionEngine({
      store,
      readModel: reopened,
      projections: LEDGER_PROJECTIONS,
      batchSize: BATCH,
    });
    engine.start();
    expect(await engine.waitForPosition(await store.headPosition(), 5_000)).toBe(true);
    await engine.stop();
    await expectExact(reopened);
    reopened.close();
  });

  it('after a failure, the same engine follows again from the durable checkpoints', async () => {
    const readModel = SqliteReadModel.open({ file: join(dir, 'read-models.sqlite') });
    let thrown = 0;
    const errors: Error[] = [];
    const engine = new ProjectionEngine({
      ...withEngineFaults(store, readModel, {
        afterCommit: (batch) => {
          if (batch.to > 25 && thrown < 2) {
            thrown += 1;
            throw new InjectedCrash('transient');
          }
        },
      }),
      projections: LEDGER_PROJECTIONS,
      batchSize: BATCH,
      restartDelayMs: 10,
      onError: (error) => errors.push(error),
    });
    engine.start();
    expect(await engine.waitForPosition(await store.headPosition(), 5_000)).toBe(true);
    await engine.stop();
    expect(errors).toHaveLength(2);
    await expectExact(readModel);
    readModel.close();
  });

  /**
   * The real thing: a separate process running the engine is SIGKILLed from inside its batch loop,
   * either right after a COMMIT or right before one. Nothing gets to clean up.
   */
  it.each(['afterCommit', 'beforeCommit'] as const)(
    'a process SIGKILLed at %s leaves a read model that resumes exactly',
    async (phase) => {
      const file = join(dir, 'read-models.sqlite');
      const killedAt = await runEngineUntilKilled({
        dir,
        eventsFile: join(dir, 'events.sqlite'),
        readModelFile: file,
        phase,
        commit: 3,
        projections: { module: 'projections/src/projection-catalog.ts', name: 'LEDGER_PROJECTIONS' },
        engine: { batchSize: BATCH },
      });
      const readModel = SqliteReadModel.open({ file });
      const durable = phase === 'afterCommit' ? killedAt.to : killedAt.from - 1;
      for (const checkpoint of readModel.checkpoints()) expect(checkpoint.position).toBe(durable);
      const engine = new ProjectionEngine({ store, readModel, projections: LEDGER_PROJECTIONS, batchSize: BATCH });
      engine.start();
      expect(await engine.waitForPosition(await store.headPosition(), 5_000)).toBe(true);
      await engine.stop();
      await expectExact(readModel);
      readModel.close();
    },
  );
});
