import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LEDGER_PROJECTIONS } from '@recovery-ledger/projections';
import type { Projection } from '@recovery-ledger/projections';
import { stepStateProjection } from '@recovery-ledger/projections';
import { ProjectionEngine, type ProjectionEngineOptions } from '../../src/projection-engine/projection-engine';
import { SqliteReadModel } from '../../src/adapters/sqlite/sqlite-read-model.store';
import type { EventStore } from '../../src/store/event-store.port';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { envelopes, LedgerScenario } from '../unit/projections/support/ledger-scenario';
import { MemoryEventStore } from '../unit/projections/support/memory-event-store';
import { withEngineFaults } from '../support/engine-faults';
import { expectedSnapshot, snapshot } from '../unit/projections/support/read-model-snapshot';

/** A few operations through their whole lives: enough events for several batches of 7. */
async function workload(scenario: LedgerScenario, operations: number, prefix = 'op'): Promise<number> {
  let last = 0;
  for (let n = 0; n < operations; n++) {
    const ref = `run_${n % 3}/${prefix}_${n}`;
    await scenario.plan(ref, { run_id: `run_${n % 3}`, tool: n % 2 === 0 ? 'create_invoice' : 'send_email' });
    await scenario.dispatch(ref, 1);
    scenario.clock.advance(1_000);
    await scenario.envelope(ref, 1, n % 4 === 0 ? envelopes.committed(ref) : envelopes.unknown(ref));
    scenario.clock.advance(31_000);
    if (n % 4 !== 0) {
      const outcome = n % 4 === 1 ? 'found_committed' : n % 4 === 2 ? 'not_found' : 'lookup_unavailable';
      const answer = await scenario.verify(ref, outcome, `ev_${n}`);
      if (answer.ok) last = answer.answer.position;
    }
    const replay = await scenario.dispatch(ref, 2);
    if (replay.ok) last = Math.max(last, replay.answer.position);
  }
  return Math.max(last, await scenario.store.headPosition());
}

describe('projection engine (SQLite event store, SQLite read model)', () => {
  let dir: string;
  let store: SqliteEventStore;
  let scenario: LedgerScenario;
  const engines: ProjectionEngine[] = [];
  const readModels: SqliteReadModel[] = [];

  function openReadModel(name = 'read-models.sqlite'): SqliteReadModel {
    const readModel = SqliteReadModel.open({ file: join(dir, name) });
    readModels.push(readModel);
    return readModel;
  }

  function engineFor(
    readModel: SqliteReadModel,
    options: Partial<ProjectionEngineOptions> = {},
    eventStore: EventStore = store,
  ): ProjectionEngine {
    const engine = new ProjectionEngine({
      store: eventStore,
      readModel,
      projections: LEDGER_PROJECTIONS,
      batchSize: 7,
      restartDelayMs: null,
      ...options,
    });
    engines.push(engine);
    return engine;
  }

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'ledger-projections-'));
    store = SqliteEventStore.open({ file: join(dir, 'events.sqlite'), pollIntervalMs: 20 });
    scenario = new LedgerScenario(store);
  });

  afterEach(async () => {
    for (const engine of engines.splice(0)) await engine.stop();
    for (const readModel of readModels.splice(0)) readModel.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('catches up from the log, follows it live, and holds exactly the reference fold', async () => {
    await workload(scenario, 6, 'before');
    const readModel = openReadModel();
    const engine = engineFor(readModel);
    engine.start();
    expect(await engine.waitForPosition(await store.headPosition(), 5_000)).toBe(true);

    const head = await workload(scenario, 6, 'after');
    expect(await engine.waitForPosition(head, 5_000)).toBe(true);

    expect(engine.status().state).toBe('live');
    expect(snapshot(readModel, LEDGER_PROJECTIONS)).toEqual(expectedSnapshot(LEDGER_PROJECTIONS, await scenario.log()));
  });

  it('resumes from its checkpoints after a restart instead of reading from zero', async () => {
    await workload(scenario, 5);
    const first = engineFor(openReadModel());
    first.start();
    expect(await first.waitForPosition(await store.headPosition(), 5_000)).toBe(true);
    await first.stop();
    const checkpoint = first.position();
    const head = await workload(scenario, 3, 'later');

    const reads: number[] = [];
    const spied: EventStore = Object.assign(Object.create(store), {
      readAll: (options: Parameters<EventStore['readAll']>[0]) => {
        reads.push(options.after);
        return store.readAll(options);
      },
    });
    const readModel = openReadModel();
    const second = engineFor(readModel, {}, spied);
    second.start();
    expect(await second.waitForPosition(head, 5_000)).toBe(true);

    expect(reads[0]).toBe(checkpoint);
    expect(Math.min(...reads)).toBe(checkpoint);
    expect(snapshot(readModel, LEDGER_PROJECTIONS)).toEqual(expectedSnapshot(LEDGER_PROJECTIONS, await scenario.log()));
  });

  it('rebuilds from zero to exactly the stored JSON it had built live, while appends go on', async () => {
    await workload(scenario, 8);
    const readModel = openReadModel();
    const engine = engineFor(readModel);
    engine.start();
    expect(await engine.waitForPosition(await store.headPosition(), 5_000)).toBe(true);
    const live = snapshot(readModel, LEDGER_PROJECTIONS);

    const rebuilding = engine.rebuild(['evidence_trail', 'trust_metrics']);
    expect(engine.status().projections.find((p) => p.name === 'evidence_trail')?.mode).toBe('rebuilding');
    // Built beside: readers keep the live tables, whole, until the swap.
    expect(snapshot(readModel, LEDGER_PROJECTIONS)).toEqual(live);
    const head = await workload(scenario, 4, 'during');
    await rebuilding;
    expect(await engine.waitForPosition(head, 5_000)).toBe(true);

    const after = snapshot(readModel, LEDGER_PROJECTIONS);
    expect(after).toEqual(expectedSnapshot(LEDGER_PROJECTIONS, await scenario.log()));
    // Operations untouched since the rebuild began have, byte for byte, the trail built live.
    const rebuiltTrails = new Map(after.evidence_trail.docs.map((row) => [row.key, row.doc]));
    expect(live.evidence_trail.docs.length).toBe(8);
    for (const row of live.evidence_trail.docs) expect(rebuiltTrails.get(row.key)).toBe(row.doc);
    expect(engine.status().projections.every((p) => p.mode === 'live')).toBe(true);
  });

  it('a rebuild offline, into a fresh file, gives the same bytes as the live read model', async () => {
    const head = await workload(scenario, 10);
    const liveModel = openReadModel('live.sqlite');
    const live = engineFor(liveModel, { batchSize: 3 });
    live.start();
    expect(await live.waitForPosition(head, 5_000)).toBe(true);

    const rebuiltModel = openReadModel('rebuilt.sqlite');
    await engineFor(rebuiltModel, { batchSize: 1000 }).rebuild();

    expect(snapshot(rebuiltModel, LEDGER_PROJECTIONS)).toEqual(snapshot(liveModel, LEDGER_PROJECTIONS));
  });

  it("a rebuild yields to the event loop between its batches, so other tenants' requests are served while it runs", async () => {
    const head = await workload(scenario, 20);
    const readModel = openReadModel();
    // One commit for the whole log: before, nothing between two commits let a request in.
    const engine = engineFor(readModel, { batchSize: 1000, rebuildBatchSize: 10, rebuildCommitEvents: 1_000_000 });
    let turns = 0;
    const count = () => {
      turns += 1;
      if (!done) setImmediate(count);
    };
    let done = false;
    setImmediate(count);
    const started = turns;
    await engine.rebuild();
    done = true;
    // The log is read in batches of 10, each followed by a turn of the event loop.
    expect(turns - started).toBeGreaterThanOrEqual(Math.floor(head / 10) - 1);
    expect(snapshot(readModel, LEDGER_PROJECTIONS)).toEqual(expectedSnapshot(LEDGER_PROJECTIONS, await scenario.log()));
  });

  it('a rebuild folds many batches into one commit, every rebuildCommitEvents events, and ends exact', async () => {
    const head = await workload(scenario, 10);
    const commits: Array<{ from: number; to: number; events: number }> = [];
    const readModel = openReadModel();
    const faulty = withEngineFaults(store, readModel, {
      afterCommit: ({ from, to, events }) => void commits.push({ from, to, events }),
    });
    await engineFor(faulty.readModel, { batchSize: 7, rebuildCommitEvents: 30 }, faulty.store).rebuild();

    const batches = Math.ceil(head / 7);
    expect(commits.length).toBe(Math.ceil(batches / Math.ceil(30 / 7)));
    for (const commit of commits.slice(0, -1)) expect(commit.events).toBe(35);
    expect(commits.map((commit) => commit.from)).toEqual(
      commits.map((_, index) => (index === 0 ? 1 : commits[index - 1].to + 1)),
    );
    expect(commits[commits.length - 1].to).toBe(head);
    expect(snapshot(readModel, LEDGER_PROJECTIONS)).toEqual(expectedSnapshot(LEDGER_PROJECTIONS, await scenario.log()));
  });

  it('a rebuild beside the live tables, which another engine on the file moves meanwhile, never moves a checkpoint back', async () => {
    const head = await workload(scenario, 10);
    const file = 'shared.sqlite';
    const rebuilding = openReadModel(file);
    const other = openReadModel(file);
    let moved = false;
    const checkpointsAfterTheMove: number[] = [];
    const faulty = withEngineFaults(store, rebuilding, {
      afterCommit: async () => {
        if (moved) {
          checkpointsAfterTheMove.push(...rebuilding.checkpoints().map((checkpoint) => checkpoint.position));
          return;
        }
        moved = true;
        // Another instance follows the same read model to the head between two of the rebuild's commits.
        const follower = engineFor(other);
        follower.start();
        expect(await follower.waitForPosition(head, 5_000)).toBe(true);
        await follower.stop();
      },
    });
    await engineFor(faulty.readModel, { batchSize: 7, rebuildCommitEvents: 20 }, faulty.store).rebuild();

    expect(moved).toBe(true);
    // The follower's newer work stood in the live tables until the swap, which came at the head.
    expect(checkpointsAfterTheMove.length).toBeGreaterThan(0);
    expect(checkpointsAfterTheMove.every((position) => position === head)).toBe(true);
    expect(snapshot(rebuilding, LEDGER_PROJECTIONS)).toEqual(
      expectedSnapshot(LEDGER_PROJECTIONS, await scenario.log()),
    );
    expect(rebuilding.checkpoints().every((checkpoint) => checkpoint.position === head)).toBe(true);
  });

  it('answers a wait that cannot be met in time with false, and reports lag in events and milliseconds', async () => {
    await workload(scenario, 2);
    const head = await store.headPosition();
    const now = scenario.clock.ms + 60_000;
    const engine = engineFor(openReadModel(), { now: () => now });

    expect(await engine.waitForPosition(head, 50)).toBe(false);
    const [oldest] = await store.readAll({ after: 0, limit: 1 });
    expect(await engine.lag()).toEqual(
      LEDGER_PROJECTIONS.map((projection) => ({
        projection: projection.name,
        checkpoint: 0,
        head,
        events_behind: head,
        ms_behind: now - Date.parse(oldest.metadata.recorded_at),
      })),
    );

    engine.start();
    expect(await engine.waitForPosition(head, 5_000)).toBe(true);
    expect((await engine.lag()).every((lag) => lag.events_behind === 0 && lag.ms_behind === 0)).toBe(true);
  });

  it('builds a projection whose version changes beside its rows, which are served until the swap', async () => {
    const head = await workload(scenario, 3);
    const readModel = openReadModel();
    const engine = engineFor(readModel);
    engine.start();
    expect(await engine.waitForPosition(head, 5_000)).toBe(true);
    await engine.stop();
    readModel.close();

    const v2: Projection<{ count: number; position: number }> = {
      name: 'step_state',
      version: stepStateProjection.version + 1,
      // The same columns (left empty): a changed column set starts the tables again instead.
      columns: stepStateProjection.columns,
      indexes: stepStateProjection.indexes,
      keyOf: (event) => event.metadata.tenant,
      evolve: (doc, event) =>
        doc && event.position <= doc.position ? doc : { count: (doc?.count ?? 0) + 1, position: event.position },
    };
    const reopened = openReadModel();
    const upgraded = engineFor(reopened, { projections: [v2] });
    const before = reopened.dump('step_state').docs.length;
    expect(before).toBeGreaterThan(1);
    // The old version's rows, at the position they reached, until the new one is swapped in.
    expect(upgraded.checkpoint('step_state')).toBe(head);
    expect(upgraded.status().projections[0]).toMatchObject({ mode: 'rebuilding', checkpoint: head });
    expect(reopened.select('step_state')).toHaveLength(before);
    expect(reopened.getDoc('step_state', 'acme')).toBeUndefined();
    upgraded.start();
    // The build started by `start` is the one this joins.
    await upgraded.rebuild(['step_state']);
    expect(upgraded.status().projections[0]).toMatchObject({ mode: 'live', version: v2.version });
    expect(reopened.checkpoint('step_state')).toMatchObject({ position: head, version: v2.version });
    expect(reopened.getDoc('step_state', 'acme')).toEqual({ count: (await scenario.log()).length, position: head });
    expect(reopened.select('step_state')).toHaveLength(1);
  });
});

describe('projection engine over a store whose positions have gaps and other streams', () => {
  it('projects only the operation streams and waits by position, not by count', async () => {
    const store = new MemoryEventStore({ positionStride: 5, firstPosition: 100, batchSize: 2 });
    const scenario = new LedgerScenario(store);
    await workload(scenario, 3);
    await store.append('audit-export', -1, [
      {
        event_id: 'e1',
        type: 'ExportStarted',
        data: {},
        metadata: {
          schema_version: 1,
          recorded_at: '2026-03-01T10:00:00.000Z',
          actor: 'admin',
          tenant: 'acme',
          operation_ref: 'x',
          prev_hash: '',
          hash: '',
        },
      },
    ]);
    const readModel = SqliteReadModel.open({ file: ':memory:' });
    const engine = new ProjectionEngine({ store, readModel, projections: LEDGER_PROJECTIONS, batchSize: 4 });
    engine.start();
    const log = (await store.readAll({ after: 0, limit: 10_000, streamPrefix: 'op-' })).filter((event) =>
      event.stream.startsWith('op-'),
    );
    expect(await engine.waitForPosition(log[log.length - 1].position, 5_000)).toBe(true);

    expect(snapshot(readModel, LEDGER_PROJECTIONS)).toEqual(expectedSnapshot(LEDGER_PROJECTIONS, log));
    await engine.stop();
    readModel.close();
  });
});
