import fc from 'fast-check';
import { LEDGER_PROJECTIONS } from '@recovery-ledger/projections';
import { ProjectionEngine } from '../../src/projection-engine/projection-engine';
import { SqliteReadModel } from '../../src/adapters/sqlite/sqlite-read-model.store';
import { LedgerScenario } from '../unit/projections/support/ledger-scenario';
import { MemoryEventStore } from '../unit/projections/support/memory-event-store';
import { historyCommands, runHistory } from '../unit/projections/support/random-history';
import { expectedSnapshot, snapshot } from '../unit/projections/support/read-model-snapshot';

describe('rebuild equals live, for random valid histories', () => {
  it('a read model built live, batch by batch while the log grows, has the same bytes as one rebuilt from zero', async () => {
    await fc.assert(
      fc.asyncProperty(
        historyCommands,
        historyCommands,
        fc.integer({ min: 1, max: 9 }),
        fc.integer({ min: 1, max: 500 }),
        fc.integer({ min: 1, max: 4 }),
        // A rebuild commits every so many events or held documents: from every batch to once at the end.
        fc.integer({ min: 1, max: 200 }),
        fc.integer({ min: 1, max: 50 }),
        async (before, during, liveBatch, rebuildBatch, feedBatch, rebuildCommitEvents, rebuildMaxDocs) => {
          const store = new MemoryEventStore({ batchSize: feedBatch, positionStride: 2 });
          const scenario = new LedgerScenario(store);
          await runHistory(before, scenario);
          const liveModel = SqliteReadModel.open({ file: ':memory:' });
          const live = new ProjectionEngine({
            store,
            readModel: liveModel,
            projections: LEDGER_PROJECTIONS,
            batchSize: liveBatch,
            restartDelayMs: null,
          });
          live.start();
          // Appends race the engine: it catches up and follows while the history is still being written.
          await runHistory(during, scenario);
          expect(await live.waitForPosition(await store.headPosition(), 10_000)).toBe(true);
          await live.stop();

          const rebuiltModel = SqliteReadModel.open({ file: ':memory:' });
          await new ProjectionEngine({
            store,
            readModel: rebuiltModel,
            projections: LEDGER_PROJECTIONS,
            batchSize: rebuildBatch,
            rebuildCommitEvents,
            rebuildMaxDocs,
          }).rebuild();

          const liveRows = snapshot(liveModel, LEDGER_PROJECTIONS);
          expect(snapshot(rebuiltModel, LEDGER_PROJECTIONS)).toEqual(liveRows);
          expect(liveRows).toEqual(expectedSnapshot(LEDGER_PROJECTIONS, await scenario.log()));
          liveModel.close();
          rebuiltModel.close();
        },
      ),
      { numRuns: 60 },
    );
  });
});
