import type { AnyProjection } from '@recovery-ledger/projections';
import type { EventStore } from '../store/event-store.port';
import type { ReadModel } from '../store/read-model.port';
import type {
  ProjectorLease,
  PublishedChanges,
  ReadModelChanges,
  SharedReadModelStore,
} from '../store/shared-read-model.port';
import { OPERATION_STREAM_PREFIX } from '../store/stream-names';
import { ProjectionEngine } from './projection-engine';
import {
  RunnerCheckpoints,
  type EngineState,
  type ProjectionLag,
  type ProjectionRunner,
  type RunnerStatus,
} from './projection-runner';
import { RecordingReadModel } from './recording-read-model';

export interface SharedProjectionRunnerOptions {
  store: EventStore;
  shared: SharedReadModelStore;
  /** This instance's copy of the shared read models, which its queries read. */
  readModel: ReadModel;
  projections: readonly AnyProjection[];
  /** How often a copy reads what was published without being told (default 500 ms). */
  pollMs?: number;
  /** How often an instance that does not project tries to become the projector (default 1 s). */
  electionMs?: number;
  now?: () => number;
  onError?(error: Error): void;
  /** Told when this instance starts or stops projecting. */
  onRole?(role: 'projector' | 'copy'): void;
}

/**
 * The read models projected once for every instance on a shared store (docs/postgres.md, "Read
 * models"). The instance elected projector runs the projection engine over its copy of the read
 * models and publishes each of its transactions; every other instance copies what was published
 * into its own, without folding the log. Queries read the copy, synchronously, as on the embedded
 * store; read-your-writes holds across instances because a read waits for its copy's checkpoint to
 * reach the position asked, and the copy only reaches a position once the projector has published
 * it (docs/contract.md §5).
 *
 * When the projector's session ends (its process killed, its database session cut), the next
 * instance to try is elected and projects from what was published. An instance that loses the
 * election while projecting drops what it had not published and copies the shared read models
 * afresh, so no instance serves what the shared read models may never hold.
 */
export class SharedProjectionRunner implements ProjectionRunner {
  private readonly names: string[];
  private readonly tracked: RunnerCheckpoints;
  private readonly recording: RecordingReadModel;
  private readonly pollMs: number;
  private readonly electionMs: number;
  private state: EngineState = 'stopped';
  private lastError: Error | undefined;
  private running = false;
  private loop: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private unlisten: (() => void) | undefined;
  /** The last publication this copy holds. */
  private change = 0;
  private resetCounts: Record<string, number> = {};
  private engine: ProjectionEngine | undefined;
  private lease: ProjectorLease | undefined;
  private pending: ReadModelChanges[] = [];
  private publishing: Promise<void> | undefined;
  private leaseLost: ((error: Error) => void) | undefined;

  constructor(private readonly options: SharedProjectionRunnerOptions) {
    this.names = options.projections.map((projection) => projection.name);
    this.tracked = new RunnerCheckpoints(this.names, options.store, OPERATION_STREAM_PREFIX, options.now ?? Date.now);
    this.pollMs = options.pollMs ?? 500;
    this.electionMs = options.electionMs ?? 1_000;
    for (const projection of options.projections) options.readModel.register(projection);
    this.recording = new RecordingReadModel(options.readModel, (changes) => this.published(changes));
    this.readCheckpoints();
  }

  /** Whether this instance is the projector now. */
  get projecting(): boolean {
    return this.engine !== undefined;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.state = 'catching_up';
    this.unlisten = this.options.shared.onPublished(() => this.wake?.());
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.unlisten?.();
    this.wake?.();
    this.leaseLost?.(new Error('stopping'));
    await this.loop;
    await this.options.shared.close();
    this.state = 'stopped';
    this.tracked.waiters.endAll();
  }

  status(): RunnerStatus {
    const engine = this.engine?.status();
    return {
      state: engine?.state ?? this.state,
      ...((engine?.error ?? this.lastError) ? { error: engine?.error ?? this.lastError?.message } : {}),
      projections:
        engine?.projections ??
        this.options.projections.map((projection) => ({
          name: projection.name,
          version: projection.version,
          checkpoint: this.checkpoint(projection.name),
          mode: 'live' as const,
        })),
      shared: { role: this.projecting ? 'projector' : 'copy' },
    };
  }

  checkpoint(name: string): number {
    return this.tracked.checkpoint(name);
  }

  position(names?: readonly string[]): number {
    return this.tracked.position(names);
  }

  waitForPosition(position: number, timeoutMs: number, names?: readonly string[]): Promise<boolean> {
    return this.tracked.waitForPosition(position, timeoutMs, names);
  }

  lag(): Promise<ProjectionLag[]> {
    return this.tracked.lag();
  }

  /** Only the projector rebuilds: the copies take what it publishes, the emptied tables first. */
  rebuild(names: readonly string[] = this.names): Promise<void> {
    if (!this.engine) {
      return Promise.reject(
        new Error('this instance copies the shared read models; the projecting instance rebuilds them'),
      );
    }
    return this.engine.rebuild(names);
  }

  private readCheckpoints(): void {
    for (const name of this.names) this.tracked.positions.set(name, this.options.readModel.checkpoint(name).position);
  }

  private settle(): void {
    this.readCheckpoints();
    this.tracked.waiters.settle();
  }

  private async run(): Promise<void> {
    let nextElection = 0;
    while (this.running) {
      try {
        if ((this.options.now ?? Date.now)() >= nextElection) {
          nextElection = (this.options.now ?? Date.now)() + this.electionMs;
          const lease = await this.options.shared.tryLead();
          if (lease && this.running) {
            await this.project(lease);
            continue;
          }
          await lease?.release();
        }
        await this.copy();
        this.state = 'live';
        this.lastError = undefined;
      } catch (error) {
        if (!this.running) break;
        this.lastError = error instanceof Error ? error : new Error(String(error));
        this.state = 'failed';
        this.options.onError?.(this.lastError);
      }
      if (!this.running) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => resolve(), this.pollMs);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = undefined;
    }
  }

  /** Reads what was published since this copy's last publication into the copy, in one transaction. */
  private async copy(): Promise<void> {
    const pulled = await this.options.shared.pull(this.change);
    if (pulled.change === this.change) return;
    this.apply(pulled);
  }

  private apply(pulled: PublishedChanges): void {
    const { readModel } = this.options;
    const known = new Set(this.names);
    readModel.transaction(() => {
      for (const name of this.names) {
        if ((pulled.resetCounts[name] ?? 0) !== (this.resetCounts[name] ?? 0)) readModel.reset(name);
      }
      for (const row of pulled.docs) {
        if (known.has(row.projection)) readModel.writeDoc(row.projection, row.key, JSON.parse(row.doc));
      }
      for (const row of pulled.links) {
        if (known.has(row.projection)) readModel.setLink(row.projection, row.stream, row.link);
      }
      for (const row of pulled.checkpoints) {
        if (known.has(row.projection)) readModel.setCheckpoint(row.projection, row.position, row.recordedAt);
      }
    });
    this.change = pulled.change;
    this.resetCounts = pulled.resetCounts;
    this.settle();
  }

  /** Projects while elected: from what was published, with the engine, publishing each transaction. */
  private async project(lease: ProjectorLease): Promise<void> {
    const lost = new Promise<Error>((resolve) => {
      this.leaseLost = resolve;
      lease.onLost(resolve);
    });
    try {
      // Nobody else publishes now: the copy is made whole, and the projector goes on from it.
      await this.copy();
      const stored = await lease.versions();
      const changed = this.options.projections.filter(
        (projection) => stored[projection.name] !== undefined && stored[projection.name] !== projection.version,
      );
      this.lease = lease;
      // Projected by another version of the ledger: built beside the rows every copy serves, and
      // published whole, in one transaction, once caught up (RecordingReadModel.finishRebuild).
      this.engine = new ProjectionEngine({
        store: this.options.store,
        readModel: this.recording,
        projections: this.options.projections,
        outdated: changed.map((projection) => projection.name),
        onError: (error) => this.options.onError?.(error),
        onChange: () => this.settle(),
      });
      this.options.onRole?.('projector');
      this.engine.start();
      this.drain();
      await lost;
    } finally {
      const engine = this.engine;
      this.engine = undefined;
      await engine?.stop();
      this.leaseLost = undefined;
      if (!this.running) {
        // A clean stop: what was folded is published before the election is given up.
        await this.publishing;
        this.drain();
        await this.publishing;
      }
      this.lease = undefined;
      await lease.release();
      if (this.running) this.forget();
      this.options.onRole?.('copy');
    }
  }

  /** Drops what was not published and empties the copy: the next copy is read from the shared store. */
  private forget(): void {
    this.pending = [];
    this.change = 0;
    this.resetCounts = {};
    const { readModel } = this.options;
    readModel.transaction(() => {
      for (const name of this.names) readModel.reset(name);
    });
    this.settle();
  }

  /** A transaction of the engine committed to the copy: it is published after those before it. */
  private published(changes: ReadModelChanges): void {
    if (!this.lease) return;
    this.pending.push(changes);
    this.drain();
  }

  private drain(): void {
    if (this.publishing || this.pending.length === 0 || !this.lease) return;
    const lease = this.lease;
    this.publishing = (async () => {
      while (this.pending.length > 0 && this.lease === lease) {
        const batch = mergeChanges(this.pending.splice(0));
        try {
          this.change = await lease.publish(batch);
        } catch (error) {
          // The copy now holds what the shared store does not: give the election up and copy afresh.
          this.options.onError?.(error as Error);
          this.leaseLost?.(error as Error);
          return;
        }
      }
    })().finally(() => (this.publishing = undefined));
  }
}

/** Several transactions as one publication: a reset drops what came before it of its projection. */
export function mergeChanges(batches: readonly ReadModelChanges[]): ReadModelChanges {
  const resets = new Set<string>();
  const docs = new Map<string, ReadModelChanges['docs'][number]>();
  const links = new Map<string, ReadModelChanges['links'][number]>();
  const checkpoints = new Map<string, ReadModelChanges['checkpoints'][number]>();
  for (const batch of batches) {
    for (const projection of batch.resets) {
      resets.add(projection);
      for (const map of [docs, links]) {
        for (const [id, row] of map) if (row.projection === projection) map.delete(id);
      }
      checkpoints.delete(projection);
    }
    for (const row of batch.docs) docs.set(`${row.projection}\u0000${row.key}`, row);
    for (const row of batch.links) links.set(`${row.projection}\u0000${row.stream}`, row);
    for (const row of batch.checkpoints) checkpoints.set(row.projection, row);
  }
  return {
    resets: [...resets],
    docs: [...docs.values()],
    links: [...links.values()],
    checkpoints: [...checkpoints.values()],
  };
}
