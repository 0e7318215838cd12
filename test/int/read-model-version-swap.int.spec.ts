/**
 * A projection whose version is raised is built beside the rows it already has (docs/reliability.md,
 * "Rebuilding beside"): reads keep answering every one of the old version's rows, at the position
 * they reached, while the new version catches up with the log, then the new version's rows, swapped
 * in one transaction. A process killed in the middle of that build leaves the old rows served and
 * the next start goes on from what the killed build had committed. Real SQLite files, a reader on a
 * connection of its own as the service's request thread has; counted, never timed.
 */
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LEDGER_PROJECTIONS } from '@recovery-ledger/projections';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { SqliteReadModel } from '../../src/adapters/sqlite/sqlite-read-model.store';
import { ProjectionEngine } from '../../src/projection-engine/projection-engine';
import { withEngineFaults } from '../support/engine-faults';
import { counting, runEngineUntilKilled } from '../support/killed-engine';
import { RAISED_PROJECTIONS, raisedStepState } from '../support/raised-version';
import { until } from '../support/until';
import { envelopes, LedgerScenario } from '../unit/projections/support/ledger-scenario';
import { expectedSnapshot, snapshot } from '../unit/projections/support/read-model-snapshot';

const OPERATIONS = 40;
/** A rebuild reads this many events at a time and commits every two reads: many commits to catch up. */
const READ_EVENTS = 10;
const COMMIT_EVENTS = 20;

interface Served {
  rows: number;
  /** Of those, rows the raised version wrote. */
  raised: number;
  position: number;
  version: number;
}

/** What a reader on its own connection is served of step_state now. */
function served(reader: SqliteReadModel): Served {
  const rows = reader.select<{ next_version?: boolean }>('step_state');
  const checkpoint = reader.checkpoint('step_state');
  return {
    rows: rows.length,
    raised: rows.filter((row) => row.doc.next_version === true).length,
    position: checkpoint.position,
    version: checkpoint.version,
  };
}

describe('a projection whose version is raised', () => {
  let dir: string;
  let store: SqliteEventStore;
  let scenario: LedgerScenario;
  let head: number;
  let oldRows: number;
  const file = () => join(dir, 'read-models.sqlite');

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ledger-version-swap-'));
    store = SqliteEventStore.open({ file: join(dir, 'events.sqlite'), pollIntervalMs: 20 });
    scenario = new LedgerScenario(store);
    for (let n = 0; n < OPERATIONS; n++) {
      const ref = `run_1/step_${n}`;
      await scenario.plan(ref, { tool: n % 2 === 0 ? 'create_invoice' : 'send_email' });
      await scenario.dispatch(ref, 1);
      scenario.clock.advance(1_000);
      await scenario.envelope(ref, 1, envelopes.unknown(ref));
    }
    head = await store.headPosition();
    // The old version, built and stopped as a deploy finds it.
    const built = SqliteReadModel.open({ file: file() });
    await new ProjectionEngine({ store, readModel: built, projections: LEDGER_PROJECTIONS }).rebuild();
    oldRows = built.select('step_state').length;
    built.close();
    expect(oldRows).toBe(OPERATIONS);
  });

  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Every row answered by the raised version, and the whole read model what the log gives it. */
  async function expectRaisedServed(reader: SqliteReadModel): Promise<void> {
    expect(served(reader)).toEqual({
      rows: oldRows,
      raised: oldRows,
      position: head,
      version: raisedStepState.version,
    });
    expect(snapshot(reader, RAISED_PROJECTIONS)).toEqual(expectedSnapshot(RAISED_PROJECTIONS, await scenario.log()));
  }

  it('serves every row of the old version while the new one is built beside, then the new one', async () => {
    const reader = SqliteReadModel.open({ file: file(), readCacheBytes: 0 });
    for (const projection of RAISED_PROJECTIONS) reader.register(projection);
    const writer = SqliteReadModel.open({ file: file() });
    const during: Array<Served & { mode: string; eventsBehind: number | null }> = [];
    // Its fault hook reads the engine's status: called only once the engine runs.
    const engine: ProjectionEngine = new ProjectionEngine({
      ...withEngineFaults(store, writer, {
        // After each commit of the build beside: what a reader is served, and what the engine says.
        afterCommit: async (batch) => {
          if (!batch.projections.includes('step_state')) return;
          const status = engine.status().projections.find((projection) => projection.name === 'step_state');
          const lag = (await engine.lag()).find((entry) => entry.projection === 'step_state');
          during.push({ ...served(reader), mode: status?.mode ?? '', eventsBehind: lag?.events_behind ?? null });
        },
      }),
      projections: RAISED_PROJECTIONS,
      rebuildBatchSize: READ_EVENTS,
      rebuildCommitEvents: COMMIT_EVENTS,
      restartDelayMs: null,
    });
    // Before the engine starts: the old rows, their position and the version that wrote them.
    expect(served(reader)).toEqual({
      rows: oldRows,
      raised: 0,
      position: head,
      version: LEDGER_PROJECTIONS[0].version,
    });
    engine.start();
    await engine.rebuild(['step_state']);

    // Every commit of the build but the swap left the old version served whole; the last one,
    // with the set built beside caught up, is followed by the swap.
    expect(during.length).toBeGreaterThan(head / COMMIT_EVENTS - 2);
    const beforeSwap = during.slice(0, -1);
    for (const sample of beforeSwap) {
      expect(sample).toEqual({
        rows: oldRows,
        raised: 0,
        position: head,
        version: LEDGER_PROJECTIONS[0].version,
        // Served as the old version was: at its position, nothing behind it on this log.
        mode: 'rebuilding',
        eventsBehind: 0,
      });
    }
    expect(engine.status().projections.every((projection) => projection.mode === 'live')).toBe(true);
    await engine.stop();
    await expectRaisedServed(reader);
    // Nothing is left beside.
    expect(writer.checkpoints().map((checkpoint) => checkpoint.projection)).not.toContain('step_state__next');
    writer.close();
    reader.close();
  });

  /**
   * A separate process builds the raised version and is SIGKILLed after one of the build's commits
   * or inside one: nothing gets to clean up.
   */
  it('tries a failed build again from what it committed, the old rows served meanwhile', async () => {
    const reader = SqliteReadModel.open({ file: file(), readCacheBytes: 0 });
    for (const projection of RAISED_PROJECTIONS) reader.register(projection);
    const writer = SqliteReadModel.open({ file: file() });
    const errors: Error[] = [];
    const failedAt: number[] = [];
    const servedAfterFailure: Served[] = [];
    let commits = 0;
    const { store: faulty, readModel } = withEngineFaults(store, writer, {
      beforeCommit: (batch) => {
        if (!batch.projections.includes('step_state') || ++commits !== 3) return;
        failedAt.push(batch.from - 1);
        throw new Error('injected: the build fails inside its third commit');
      },
    });
    const { store: spied, read } = counting(faulty);
    const engine = new ProjectionEngine({
      store: spied,
      readModel,
      projections: RAISED_PROJECTIONS,
      rebuildBatchSize: READ_EVENTS,
      rebuildCommitEvents: COMMIT_EVENTS,
      restartDelayMs: 10,
      onError: (error) => {
        errors.push(error);
        servedAfterFailure.push(served(reader));
      },
    });
    engine.start();
    await until(
      async () => engine.status().projections.find((projection) => projection.name === 'step_state')?.mode,
      (mode) => mode === 'live',
      'the build to be tried again and swapped in',
    );
    await engine.stop();
    expect(errors.map((error) => error.message)).toEqual(['injected: the build fails inside its third commit']);
    expect(servedAfterFailure).toEqual([
      { rows: oldRows, raised: 0, position: head, version: LEDGER_PROJECTIONS[0].version },
    ]);
    // The log once up to the failed commit's start, then from what was committed beside to the head.
    expect(read()).toBe(failedAt[0] + COMMIT_EVENTS + (head - failedAt[0]));
    await expectRaisedServed(reader);
    writer.close();
    reader.close();
  });

  it.each(['afterCommit', 'beforeCommit'] as const)(
    'killed at %s of the build beside, leaves the old rows served and goes on from what it committed',
    async (phase) => {
      const killedAt = await runEngineUntilKilled({
        dir,
        eventsFile: join(dir, 'events.sqlite'),
        readModelFile: file(),
        phase,
        commit: 3,
        projection: 'step_state',
        projections: { module: 'test/support/raised-version.ts', name: 'RAISED_PROJECTIONS' },
        engine: { rebuildBatchSize: READ_EVENTS, rebuildCommitEvents: COMMIT_EVENTS },
      });
      const durable = phase === 'afterCommit' ? killedAt.to : killedAt.from - 1;

      // What the killed build committed is beside the live rows, never in them.
      const raw = new Database(file(), { readonly: true });
      const beside = raw
        .prepare("SELECT version, position FROM projection_checkpoints WHERE projection = 'step_state__next'")
        .get();
      raw.close();
      expect(beside).toEqual({ version: raisedStepState.version, position: durable });
      expect(durable).toBeGreaterThan(0);
      expect(durable).toBeLessThan(head);

      const reader = SqliteReadModel.open({ file: file(), readCacheBytes: 0 });
      for (const projection of RAISED_PROJECTIONS) reader.register(projection);
      expect(served(reader)).toEqual({
        rows: oldRows,
        raised: 0,
        position: head,
        version: LEDGER_PROJECTIONS[0].version,
      });

      const writer = SqliteReadModel.open({ file: file() });
      const { store: spied, read } = counting(store);
      const engine = new ProjectionEngine({
        store: spied,
        readModel: writer,
        projections: RAISED_PROJECTIONS,
        rebuildBatchSize: READ_EVENTS,
        rebuildCommitEvents: COMMIT_EVENTS,
        restartDelayMs: null,
      });
      engine.start();
      await engine.rebuild(['step_state']);
      await engine.stop();
      // The build went on from what was committed beside: the log after it, not the whole log again.
      expect(read()).toBe(head - durable);
      await expectRaisedServed(reader);
      writer.close();
      reader.close();
    },
  );
});
