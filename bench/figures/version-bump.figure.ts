/**
 * Whether a projection's new version is built beside its live rows (docs/reliability.md,
 * "Rebuilding beside"): a read model is built on a generated log (support/large-log.ts), closed, and
 * opened again with one projection's version raised, as a deploy of new projection code does. The
 * engine then builds the new version while a reader on a connection of its own (as the service's
 * request thread has) reads every row the projection had, by key, over and over: how many it is
 * answered each time and by which version, until the swap, and then the same once the new version
 * is served. Built beside, every row answers throughout; dropped and rebuilt in place, none does
 * until the rebuild has passed it.
 */
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { LEDGER_PROJECTIONS, type AnyProjection } from '@recovery-ledger/projections';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';
import { SqliteReadModel } from '../../src/adapters/sqlite/sqlite-read-model.store';
import { ProjectionEngine } from '../../src/projection-engine/projection-engine';
import { writeLargeLog } from '../support/large-log';

export interface VersionBump {
  projection: string;
  /** Events in the log the new version was built from. */
  events: number;
  /** Rows of the projection before the version was raised. */
  rowsBefore: number;
  /** Reads of every row taken while the new version was being built (before the swap). */
  passesDuringBuild: number;
  /** The fewest rows one of those passes was answered, and the versions that answered them. */
  rowsServed: number;
  versionsServedDuringBuild: number[];
  /** The projection's events behind the log, as the engine reported them during the build (most). */
  eventsBehindDuringBuild: number | null;
  /** Once swapped: rows answered, and by which version. */
  rowsServedAfter: number;
  versionAfter: number;
  /** From the engine's start to the swap (measured, never asserted). */
  buildS: number;
}

const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

export async function versionBumpFigure(dir: string, events = 100_000): Promise<VersionBump> {
  const eventsFile = join(dir, 'version-bump-events.sqlite');
  const file = join(dir, 'version-bump-read-models.sqlite');
  const written = await writeLargeLog(eventsFile, events);
  const store = SqliteEventStore.open({ file: eventsFile });
  try {
    const built = SqliteReadModel.open({ file });
    await new ProjectionEngine({ store, readModel: built, projections: LEDGER_PROJECTIONS }).rebuild();
    const projection = LEDGER_PROJECTIONS[0];
    const keys = built.dump(projection.name).docs.map((row) => row.key);
    built.close();

    const raised: AnyProjection = { ...projection, version: projection.version + 1 };
    const projections = LEDGER_PROJECTIONS.map((each) => (each.name === projection.name ? raised : each));
    const reader = SqliteReadModel.open({ file, readCacheBytes: 0 });
    const writer = SqliteReadModel.open({ file });
    for (const each of projections) reader.register(each);
    const engine = new ProjectionEngine({ store, readModel: writer, projections, restartDelayMs: null });
    const pass = () => ({
      rows: keys.filter((key) => reader.getDoc(projection.name, key) !== undefined).length,
      version: reader.checkpoint(projection.name).version,
    });
    const swapped = () => engine.status().projections.find((each) => each.name === projection.name)?.mode === 'live';
    try {
      const started = performance.now();
      engine.start();
      const build = engine.rebuild([projection.name]);
      let done = false;
      let buildS = 0;
      void build.then(() => {
        done = true;
        buildS = (performance.now() - started) / 1000;
      });
      const during: Array<{ rows: number; version: number }> = [];
      let eventsBehind: number | null = 0;
      while (!done) {
        const seen = pass();
        // A pass the swap may have overtaken is not counted as one taken during the build.
        if (!swapped()) during.push(seen);
        const lag = (await engine.lag()).find((each) => each.projection === projection.name);
        if (!swapped() && lag)
          eventsBehind =
            eventsBehind === null || lag.events_behind === null ? null : Math.max(eventsBehind, lag.events_behind);
        await yieldToEventLoop();
      }
      await build;
      const after = pass();
      return {
        projection: projection.name,
        events: written.events,
        rowsBefore: keys.length,
        passesDuringBuild: during.length,
        rowsServed: during.length > 0 ? Math.min(...during.map((seen) => seen.rows)) : 0,
        versionsServedDuringBuild: [...new Set(during.map((seen) => seen.version))].sort(),
        eventsBehindDuringBuild: eventsBehind,
        rowsServedAfter: after.rows,
        versionAfter: after.version,
        buildS,
      };
    } finally {
      await engine.stop();
      writer.close();
      reader.close();
    }
  } finally {
    await store.close();
  }
}
