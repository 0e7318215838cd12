import { SingleBar } from 'cli-progress';
import { LEDGER_PROJECTIONS } from '@recovery-ledger/projections';
import { findRollback } from '../../integrity/history-rollback';
import { ProjectionEngine } from '../../projection-engine/projection-engine';
import { readModelFile } from '../../store/read-model.port';
import { openReadModel } from '../../adapters/store.factory';
import type {
  AnchoredStream,
  FoldStart,
  FoldStartOptions,
  KeptSnapshot,
  AppendOptions,
  AppendResult,
  EventStore,
  IndexedStream,
  LogAnchor,
  NewEvent,
  ReadAllOptions,
  StoreHealth,
  StoredEvent,
  StreamHead,
  SubscribeOptions,
  Subscription,
  SubscriptionHandlers,
} from '../../store/event-store.port';
import { CliError, EXIT, usageError } from '../cli-errors';
import { remoteLedger, withLocalStore, type GlobalOptions, type RemoteLedger } from '../ledger-source';
import { readModelInUse } from '../read-model-in-use';
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

  append(stream: string, expectedRevision: number, events: NewEvent[], options?: AppendOptions): Promise<AppendResult> {
    return this.store.append(stream, expectedRevision, events, options);
  }
  get keepsAnchors(): boolean {
    return this.store.keepsAnchors;
  }
  get densePositions(): boolean {
    return this.store.densePositions;
  }
  anchoredHead(stream: string): Promise<StreamHead | undefined> {
    return this.store.anchoredHead(stream);
  }
  readStreamAnchored(stream: string): Promise<AnchoredStream> {
    return this.store.readStreamAnchored(stream);
  }
  get keepsSnapshots(): boolean {
    return this.store.keepsSnapshots;
  }
  readFoldStart(stream: string, options: FoldStartOptions): Promise<FoldStart> {
    return this.store.readFoldStart(stream, options);
  }
  keepSnapshot(stream: string, snapshot: KeptSnapshot): Promise<void> {
    return this.store.keepSnapshot(stream, snapshot);
  }
  readStreamRange(stream: string, from: number, limit: number): Promise<StoredEvent[]> {
    return this.store.readStreamRange(stream, from, limit);
  }
  readEventsById(stream: string, eventIds: readonly string[]): Promise<StoredEvent[]> {
    return this.store.readEventsById(stream, eventIds);
  }
  anchoredHeads(streamPrefix: string): Promise<StreamHead[]> {
    return this.store.anchoredHeads(streamPrefix);
  }
  logAnchor(): Promise<LogAnchor | undefined> {
    return this.store.logAnchor();
  }
  indexedStreams(streamPrefix: string, keys: readonly string[]): Promise<IndexedStream[] | undefined> {
    return this.store.indexedStreams(streamPrefix, keys);
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

function progressBar(names: readonly string[], mode: ProgressMode): SingleBar | undefined {
  if (mode === 'never') return undefined;
  return new SingleBar({
    stream: process.stderr,
    format: `rebuilding ${names.join(', ')} [{bar}] {percentage}% | {events} events | {rate} events/s | ETA {eta_formatted}`,
    noTTYOutput: mode === 'always',
    notTTYSchedule: 500,
    etaBuffer: 20,
    hideCursor: true,
  });
}

interface Readiness {
  /** `events_behind` is null while behind on a store that cannot count events (EventStoreDB). */
  details?: { projections?: { events_behind?: number | null; lag_ms?: number; state?: string; message?: string } };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Against a running service: its admin route starts the rebuild in the service's own engine (no
 * second engine touches the read model), and the bar follows the projections' distance to the
 * head of the log as readiness reports it, until they have caught up.
 */
async function rebuildRemote(remote: RemoteLedger, name: string | undefined, options: RebuildOptions): Promise<void> {
  const wanted = name?.replace(/-/g, '_');
  const started = Date.now();
  const answer = await remote.post<{ rebuilding: string[] }>('/v1/admin/projections/rebuild', { projection: wanted });
  const names = answer.rebuilding;
  const bar = progressBar(names, options.progress);
  let total: number | undefined;
  let behind: number | null = Number.POSITIVE_INFINITY;
  const deadline = Date.now() + 24 * 3600 * 1000;
  while (behind !== 0) {
    const { body } = await remote.probe<Readiness>('/health/ready');
    const projections = body?.details?.projections;
    if (projections?.state === 'failed')
      throw new CliError(
        `the rebuild on ${remote.origin} failed: ${projections.message ?? 'the projection engine failed'}`,
      );
    const reported = projections?.events_behind;
    if (reported !== null && typeof reported !== 'number')
      throw new CliError(`${remote.origin} does not report projection progress on /health/ready`, EXIT.unavailable);
    behind = reported;
    // Null: behind by a number of events the store cannot count; the wait goes on without a bar.
    if (behind !== null) {
      if (total === undefined) {
        total = Math.max(behind, 1);
        bar?.start(total, 0, { events: 0, rate: 0 });
      }
      const done = Math.max(0, total - behind);
      bar?.update(done, { events: done, rate: Math.round(done / Math.max(0.001, (Date.now() - started) / 1000)) });
    }
    if (behind !== 0) {
      if (Date.now() > deadline) throw new CliError('the rebuild did not finish within a day', EXIT.unavailable);
      await sleep(250);
    }
  }
  bar?.stop();
  process.stdout.write(`rebuilt ${names.join(', ')} on ${remote.origin} in ${formatDuration(Date.now() - started)}\n`);
}

/**
 * Rebuilds projections from zero with the service's own engine, on the data directory's read model.
 * The service must be stopped for that: two engines rebuilding and following one read model would
 * each skip what the other's checkpoint claims. A running service rebuilds itself with --url.
 */
export async function rebuildCommand(
  global: GlobalOptions,
  name: string | undefined,
  options: RebuildOptions,
): Promise<RebuildSummary | undefined> {
  const remote = remoteLedger(global);
  if (remote) {
    await rebuildRemote(remote, name, options);
    return undefined;
  }
  const names = projectionNames(name);
  return withLocalStore(global, async ({ store, config }) => {
    const file = readModelFile(config.dataDir);
    if (readModelInUse(file)) {
      throw new CliError(
        `the read model at ${file} is open in another process (a running service?): stop it first, or rebuild through it: --url <its URL>, with an admin --key unless it runs in local mode (no keys)`,
        EXIT.unavailable,
      );
    }
    // A read model ahead of the log is the evidence of a rollback (docs/security.md, "A log rolled
    // back"): rebuilt down to the older log, it would be gone. Only an accepted rollback rebuilds it.
    const rollback = await findRollback(store, {
      dataDir: config.dataDir,
      witnessFile: config.headWitnessFile,
      anchorKey: config.anchorKey,
    });
    if (rollback.findings.length > 0 && !config.acceptRollback) {
      throw new CliError(
        `HISTORY_ROLLED_BACK: the log is behind what the ledger recorded before (${rollback.findings.map((finding) => finding.kind).join(', ')}); the read models are kept as the evidence. Run \`recovery-ledger verify\`; to rebuild on the older log anyway, set LEDGER_ACCEPT_ROLLBACK=1 and LEDGER_ACCEPT_ROLLBACK_REASON`,
      );
    }
    const readModel = openReadModel({ file });
    try {
      const head = await store.headPosition();
      const started = Date.now();
      let events = 0;
      const bar = progressBar(names, options.progress);
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
          summary.projections.map((entry) => [
            entry.name,
            String(entry.version),
            String(entry.documents),
            String(entry.checkpoint),
          ]),
        ),
      );
      return summary;
    } finally {
      readModel.close();
    }
  });
}
