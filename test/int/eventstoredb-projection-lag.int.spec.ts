/**
 * Projection lag on the EventStoreDB adapter, through the in-process protocol double, whose
 * positions are `$all` commit positions (byte offsets, as on a real server): the engine and the
 * lag metrics report it in time, and in events only as far as the adapter can count them, never
 * as a difference of two positions.
 */
import { randomUUID } from 'node:crypto';
import { Registry } from 'prom-client';
import { LEDGER_PROJECTIONS } from '@recovery-ledger/projections';
import { registerProjectionMetrics } from '../../src/observability/projection-metrics';
import { ProjectionEngine } from '../../src/projection-engine/projection-engine';
import { SqliteReadModel } from '../../src/adapters/sqlite/sqlite-read-model.store';
import { NO_STREAM } from '../../src/store/event-store.port';
import { EventStoreDbEventStore } from '../../src/adapters/eventstoredb/eventstoredb-event-store.adapter';
import { newEvent } from '../contract/event-store.contract';
import { EventStoreDbProtocolDouble } from '../support/eventstoredb-protocol-double';
import { LedgerScenario } from '../unit/projections/support/ledger-scenario';

/** The samples of one metric family in an exposition, by their label text. */
function samples(exposition: string, name: string): Map<string, number> {
  const found = new Map<string, number>();
  for (const match of exposition.matchAll(new RegExp(`^${name}(\\{[^}]*\\})? (\\S+)$`, 'gm')))
    found.set(match[1] ?? '', Number(match[2]));
  return found;
}

describe('projection lag on the EventStoreDB adapter (protocol double)', () => {
  let double: EventStoreDbProtocolDouble;
  let store: EventStoreDbEventStore;
  let readModel: SqliteReadModel;
  let engine: ProjectionEngine | undefined;

  beforeAll(async () => {
    double = await EventStoreDbProtocolDouble.start();
  });
  afterAll(async () => {
    await double.stop();
  });
  beforeEach(() => {
    store = new EventStoreDbEventStore({ connectionString: double.connectionString });
    readModel = SqliteReadModel.open({ file: ':memory:' });
  });
  afterEach(async () => {
    await engine?.stop();
    engine = undefined;
    readModel.close();
    await store.close();
  });

  it('is reported in time while behind, with no event count, then as 0 events once caught up, whatever else $all holds after', async () => {
    const scenario = new LedgerScenario(store);
    for (let n = 0; n < 3; n++) {
      const ref = `run_lag/step_${randomUUID().slice(0, 8)}`;
      await scenario.plan(ref);
      await scenario.dispatch(ref, 1);
    }
    const log = await scenario.log();
    const head = await store.headPosition();
    // The premise: on this adapter a position is not the number of events before it.
    expect(store.densePositions).toBe(false);
    expect(head).not.toBe(log.length);

    const now = scenario.clock.ms + 60_000;
    engine = new ProjectionEngine({
      store,
      readModel,
      projections: LEDGER_PROJECTIONS,
      now: () => now,
      restartDelayMs: null,
    });
    const registry = new Registry();
    registerProjectionMetrics(registry, {
      lag: () => engine!.lag(),
      status: () => engine!.status(),
      trustDocs: () => [],
    });

    expect(await engine.lag()).toEqual(
      LEDGER_PROJECTIONS.map((projection) => ({
        projection: projection.name,
        checkpoint: 0,
        head,
        events_behind: null,
        ms_behind: now - Date.parse(log[0].metadata.recorded_at),
      })),
    );
    const behind = await registry.metrics();
    expect(samples(behind, 'ledger_projection_lag_events').size).toBe(0);
    expect([...samples(behind, 'ledger_projection_lag_seconds').values()]).toEqual(LEDGER_PROJECTIONS.map(() => 60));

    engine.start();
    expect(await engine.waitForPosition(head, 5_000)).toBe(true);
    // Another application's event lands after the last operation event: $all moves on, the
    // projections have nothing left to apply. (The lease and clock streams the adapters keep are
    // passed over by every read of the log, the head's too.)
    await store.append(`elsewhere-${randomUUID()}`, NO_STREAM, [newEvent('SomethingElse')]);
    const later = await store.headPosition();
    expect(later).toBeGreaterThan(head);
    expect(
      (await engine.lag()).map(({ checkpoint, events_behind, ms_behind }) => ({
        checkpoint,
        events_behind,
        ms_behind,
      })),
    ).toEqual(LEDGER_PROJECTIONS.map(() => ({ checkpoint: head, events_behind: 0, ms_behind: 0 })));
    // A registry of its own: the first one holds its last scrape's lag for a moment.
    const fresh = new Registry();
    registerProjectionMetrics(fresh, { lag: () => engine!.lag(), status: () => engine!.status(), trustDocs: () => [] });
    expect([...samples(await fresh.metrics(), 'ledger_projection_lag_events').values()]).toEqual(
      LEDGER_PROJECTIONS.map(() => 0),
    );
  });
});
