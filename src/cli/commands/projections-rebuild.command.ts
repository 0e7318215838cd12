import { SingleBar } from 'cli-progress';
import { join } from 'node:path';
import { LEDGER_PROJECTIONS } from '../../../projections/projection-catalog';
import { ProjectionEngine } from '../../projection-engine/projection-engine';
import { READ_MODEL_FILE } from '../../projection-engine/projections.module';
import { SqliteReadModel } from '../../projection-engine/sqlite-read-model.store';
import type { AppendResult, EventStore, NewEvent, ReadAllOptions, StoreHealth, StoredEvent, SubscribeOptions, Subscription, SubscriptionHandlers } from '../../store/event-store.port';
import { usageError } from '../cli-errors';
import { requireLocal, withLocalStore, type GlobalOptions } from '../ledger-source';
import { formatDuration, renderTable } from '../text-format';

export type ProgressMode = 'auto' | 'always' | 'never';

export interface RebuildOptions {
  progress: ProgressMode;
}

export interface RebuildSummary {
  projections: Array<{ name: string; version: number; documents: number; checkpoint: number }>;
  events: number;
  ms: number;
}

/**
 * The engine reads the log through this, so the bar moves as the rebuild lane reads, without the
 * engine knowing a bar exists. Everything else passes straight through to the store.
 */
class ReadProgressStore implements EventStore {
  constructor(
    private readonly store: EventStore,
    private readonly onRead: (events: StoredEvent[]) => void,
  ) {}

  append(stream: string, expectedRevision: number, events: NewEvent[]): Promise<AppendResult> {
    return this.store.append(stream, expectedRevision, events);
  }
  readStream(stream: string): Promise<StoredEvent[]> {
    return this.store.readStream(stream);
  }
  async readAll(options: ReadAllOptions): Promise<StoredEvent[]> {
    const events = await this.store.readAll(options);
    this.onRead(events);
    return events;
  }
  subscribe(options: SubscribeOptions, handlers: SubscriptionHandlers): Subscription {
    return this.store.subscribe(options, handlers);
  }
  headPosition(): Promise<number> {
    return this.store.headPosition();
  }
  health(): Promise<StoreHealth> {
    return this.store.health();
  }
  close(): Promise<void> {
    return this.store.close();
  }
}

/** `evidence-trail` and `evidence_trail` both name the projection `evidence_trail`. */
export function projectionNames(name: string | undefined): string[] {
  const known = LEDGER_PROJECTIONS.map((projection) => projection.name);
  if (name === undefined) return known;
  const wanted = name.replace(/-/g, '_');
  if (!known.includes(wanted)) throw usageError(`no projection "${name}"; the projections are ${known.join(', ')}`);
  return [wanted];
}

/**
 * Rebuilds projections from zero with the service's own engine, on the data directory's read model.
 * The service must be stopped: two engines rebuilding and following one read model would each skip
 * what the other's checkpoint claims.
 */
export async function rebuildCommand(global: GlobalOptions, name: string | undefined, options: RebuildOptions): Promise<RebuildSummary> {
  requireLocal(global, 'projections rebuild');
  const names = projectionNames(name);
  return withLocalStore(global, async ({ store, config }) => {
    const readModel = SqliteReadModel.open({ file: join(config.dataDir, READ_MODEL_FILE) });
    try {
      const head = await store.headPosition();
      const started = Date.now();
      let events = 0;
      const bar =
        options.progress === 'never'
          ? undefined
          : new SingleBar({
              stream: process.stderr,
              format: `rebuilding ${names.join(', ')} [{bar}] {percentage}% | {events} events | {rate} events/s | ETA {eta_formatted}`,
              noTTYOutput: options.progress === 'always',
              notTTYSchedule: 500,
              etaBuffer: 20,
              hideCursor: true,
            });
      // The bar runs on log positions (what the engine reads by); the count is of events read.
      const rate = () => Math.round(events / Math.max(0.001, (Date.now() - started) / 1000));
      bar?.start(Math.max(head, 1), 0, { events: 0, rate: 0 });
      const engine = new ProjectionEngine({
        store: new ReadProgressStore(store, (batch) => {
          if (batch.length === 0) return;
          events += batch.length;
          bar?.update(Math.min(batch[batch.length - 1].position, head), { events, rate: rate() });
        }),
        readModel,
        projections: LEDGER_PROJECTIONS,
        restartDelayMs: null,
      });
      await engine.rebuild(names);
      bar?.update(Math.max(head, 1), { events, rate: rate() });
      bar?.stop();
      const ms = Date.now() - started;
      const summary: RebuildSummary = {
        projections: names.map((projectionName) => {
          const projection = LEDGER_PROJECTIONS.find((candidate) => candidate.name === projectionName);
          return {
            name: projectionName,
            version: projection?.version ?? 0,
            documents: readModel.dump(projectionName).docs.length,
            checkpoint: engine.checkpoint(projectionName),
          };
        }),
        events,
        ms,
      };
      process.stdout.write(
        `rebuilt ${names.length} projection${names.length === 1 ? '' : 's'} from ${events} events in ${formatDuration(ms)} (${rate()} events/s)\n`,
      );
      process.stdout.write(
        renderTable(
          ['PROJECTION', 'VERSION', 'DOCUMENTS', 'CHECKPOINT'],
          summary.projections.map((entry) => [entry.name, String(entry.version), String(entry.documents), String(entry.checkpoint)]),
        ),
      );
      return summary;
    } finally {
      readModel.close();
    }
  });
}
