import type { AnyProjection } from '@recovery-ledger/projections';
import type { EventStore, StoredEvent, Subscription } from '../store/event-store.port';
import { OPERATION_STREAM_PREFIX } from '../store/stream-names';
import {
  PositionWaiters,
  projectionLag,
  type EngineState,
  type ProjectionLag,
  type ProjectionRunner,
  type RunnerStatus,
} from './projection-runner';
import type { ReadModel } from '../store/read-model.port';
import { ProjectionWorkingSet } from './working-set';

export interface ProjectionEngineOptions {
  store: EventStore;
  readModel: ReadModel;
  projections: readonly AnyProjection[];
  /** Only streams under this prefix are projected (default: the operations' streams). */
  streamPrefix?: string;
  /** Events per catch-up read and per transaction. */
  batchSize?: number;
  /** Events a rebuild folds between two yields to the event loop (default 250). */
  rebuildBatchSize?: number;
  /**
   * A rebuild commits after folding this many events (default 20,000), or once it holds
   * `rebuildMaxDocs` documents (default 10,000): fewer, larger transactions, each document parsed
   * and written once per commit, and memory bounded by these two numbers.
   */
  rebuildCommitEvents?: number;
  rebuildMaxDocs?: number;
  /** The wall clock, for lag in milliseconds only: projections never see it. */
  now?: () => number;
  /** After a failure, follow again from the checkpoints after this long; null stops for good. */
  restartDelayMs?: number | null;
  onError?(error: Error): void;
  /**
   * Projections whose stored rows another version of them wrote, beyond those whose checkpoint
   * says so (the read model of a copy, whose checkpoints carry this build's version): built beside
   * their rows from `start`, like those.
   */
  outdated?: readonly string[];
  /** Told after each change of what `status()` answers: a commit, a state, a rebuild's mode. */
  onChange?(): void;
}

export type { EngineState, ProjectionLag, ProjectionStatus } from './projection-runner';

/**
 * Runs the projections over the global log: catches up from the lowest checkpoint, then follows the
 * store's subscription. Each batch is applied to every projection whose checkpoint it passes and
 * committed with their checkpoints in one read-model transaction, so a crash at any point leaves
 * documents and checkpoints agreeing; on restart the engine resumes from the stored checkpoints,
 * which is why nothing is counted twice or skipped.
 *
 * A rebuild reads the log from zero in its own lane for the projections it resets, while the others
 * stay live; it joins the live lane once it has reached the live lane's position.
 *
 * A projection whose stored checkpoint was written by another version of it is outdated: its rows
 * are served as they stand (at their checkpoint, which the live lane no longer moves) while `start`
 * builds the new version beside them, and the swap makes it live (docs/reliability.md, "Rebuilding
 * beside"). Stopped or failed, what was built beside is kept and the next build goes on from it.
 */
export class ProjectionEngine implements ProjectionRunner {
  private readonly projections: readonly AnyProjection[];
  private readonly byName = new Map<string, AnyProjection>();
  private readonly live = new Set<string>();
  /** Registered with rows another version wrote: built beside them, out of the live lane until the swap. */
  private readonly outdated = new Set<string>();
  private retryOutdated: ReturnType<typeof setTimeout> | undefined;
  private readonly rebuilds = new Map<string, Promise<void>>();
  private readonly checkpoints = new Map<string, number>();
  private readonly waiters = new PositionWaiters((names) => this.position(names));
  private readonly prefix: string;
  private readonly batchSize: number;
  private readonly rebuildBatchSize: number;
  private readonly rebuildCommitEvents: number;
  private readonly rebuildMaxDocs: number;
  private readonly now: () => number;
  private state: EngineState = 'stopped';
  private lastError: Error | undefined;
  private running = false;
  private stopping = false;
  private loop: Promise<void> | undefined;
  private subscription: Subscription | undefined;
  private endLive: (() => void) | undefined;
  private wakeRestart: (() => void) | undefined;
  /** The live lane has read the log up to here. */
  private livePosition = 0;

  constructor(private readonly options: ProjectionEngineOptions) {
    this.projections = options.projections;
    this.prefix = options.streamPrefix ?? OPERATION_STREAM_PREFIX;
    this.batchSize = options.batchSize ?? 1000;
    this.rebuildBatchSize = options.rebuildBatchSize ?? Math.min(this.batchSize, 250);
    this.rebuildCommitEvents = options.rebuildCommitEvents ?? 20_000;
    this.rebuildMaxDocs = options.rebuildMaxDocs ?? 10_000;
    this.now = options.now ?? Date.now;
    for (const projection of this.projections) {
      if (this.byName.has(projection.name)) throw new Error(`two projections are named ${projection.name}`);
      this.byName.set(projection.name, projection);
      options.readModel.register(projection);
      const stored = options.readModel.checkpoint(projection.name);
      if (stored.version !== projection.version || options.outdated?.includes(projection.name))
        this.outdated.add(projection.name);
      else this.live.add(projection.name);
      // An outdated projection is served at the position its stored rows reached.
      this.checkpoints.set(projection.name, stored.position);
    }
  }

  /** Starts following the log in the background; resolves at once (see `waitForPosition`). */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.stopping = false;
    this.loop = this.run();
    this.buildOutdated();
  }

  /**
   * Builds the outdated projections beside their rows, from what an earlier build left there if
   * anything. A failed build is reported and tried again after `restartDelayMs`, its rows still served.
   */
  private buildOutdated(): void {
    const names = [...this.outdated].filter((name) => !this.rebuilds.has(name));
    if (names.length === 0 || !this.running) return;
    this.startRebuild(names, true).catch((error: unknown) => {
      if (!this.running) return;
      this.lastError = error instanceof Error ? error : new Error(String(error));
      this.options.onError?.(this.lastError);
      const delay = this.options.restartDelayMs === undefined ? 1000 : this.options.restartDelayMs;
      if (delay === null) return;
      this.retryOutdated = setTimeout(() => {
        this.retryOutdated = undefined;
        this.buildOutdated();
      }, delay);
    });
  }

  async stop(): Promise<void> {
    this.running = false;
    this.stopping = true;
    clearTimeout(this.retryOutdated);
    this.wakeRestart?.();
    const subscription = this.subscription;
    this.subscription = undefined;
    await subscription?.close().catch(() => undefined);
    this.endLive?.();
    await this.loop;
    await Promise.allSettled([...this.rebuilds.values()]);
    this.state = 'stopped';
    this.options.onChange?.();
    this.waiters.endAll();
  }

  status(): RunnerStatus {
    return {
      state: this.state,
      ...(this.lastError ? { error: this.lastError.message } : {}),
      projections: this.projections.map((projection) => ({
        name: projection.name,
        version: projection.version,
        checkpoint: this.checkpoint(projection.name),
        mode: this.live.has(projection.name) ? 'live' : 'rebuilding',
      })),
    };
  }

  checkpoint(name: string): number {
    const position = this.checkpoints.get(name);
    if (position === undefined) throw new Error(`no projection ${name}`);
    return position;
  }

  /** The position every named projection has reached (all of them by default). */
  position(names: readonly string[] = this.names()): number {
    return Math.min(...names.map((name) => this.checkpoint(name)));
  }

  /**
   * Read-your-writes: resolves true once every named projection has applied the log up to
   * `position`, false if that did not happen within `timeoutMs`.
   */
  waitForPosition(position: number, timeoutMs: number, names: readonly string[] = this.names()): Promise<boolean> {
    for (const name of names) this.checkpoint(name);
    return this.waiters.wait(position, timeoutMs, names);
  }

  /** See `projectionLag`. */
  lag(): Promise<ProjectionLag[]> {
    return projectionLag(
      this.options.store,
      this.prefix,
      this.projections.map((projection) => ({ name: projection.name, checkpoint: this.checkpoint(projection.name) })),
      this.now,
    );
  }

  /**
   * Rebuilds the named projections (all by default) from zero. Resolves once they have caught up
   * with the live lane, or with the head of the log when the engine is not running.
   */
  rebuild(names: readonly string[] = this.names()): Promise<void> {
    const fresh = names.filter((name) => {
      if (!this.byName.has(name)) throw new Error(`no projection ${name}`);
      return !this.rebuilds.has(name);
    });
    const pending = names
      .filter((name) => this.rebuilds.has(name))
      .map((name) => this.rebuilds.get(name) as Promise<void>);
    if (fresh.length > 0) pending.push(this.startRebuild(fresh, false));
    return Promise.all(pending).then(() => undefined);
  }

  /** `resume`: go on from what an earlier build of the same version left beside (`beginRebuild`). */
  private startRebuild(names: readonly string[], resume: boolean): Promise<void> {
    // Leaving the live lane and starting beside it happen in one synchronous step, between two
    // batches. Readers keep the live tables, at the position they had reached, until the swap.
    for (const name of names) {
      this.live.delete(name);
      this.options.readModel.beginRebuild(name, { resume });
    }
    this.options.onChange?.();
    const lane = this.runRebuild(names).finally(() => {
      for (const name of names) this.rebuilds.delete(name);
    });
    for (const name of names) this.rebuilds.set(name, lane);
    return lane;
  }

  private names(): string[] {
    return this.projections.map((projection) => projection.name);
  }

  private loadCheckpoints(): void {
    for (const projection of this.projections) {
      // A projection being rebuilt (or outdated) is served at the position its live tables reached.
      if (!this.live.has(projection.name)) continue;
      this.checkpoints.set(projection.name, this.options.readModel.checkpoint(projection.name).position);
    }
  }

  private async run(): Promise<void> {
    while (this.running) {
      try {
        await this.follow();
      } catch (error) {
        if (!this.running) break;
        this.fail(error);
        const delay = this.options.restartDelayMs === undefined ? 1000 : this.options.restartDelayMs;
        if (delay === null) {
          this.running = false;
          break;
        }
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, delay);
          this.wakeRestart = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        this.wakeRestart = undefined;
      }
    }
  }

  private fail(error: unknown): void {
    this.lastError = error instanceof Error ? error : new Error(String(error));
    this.state = 'failed';
    this.options.onError?.(this.lastError);
    this.options.onChange?.();
  }

  /** Catch-up with large reads, then the store's live subscription, from the stored checkpoints. */
  private async follow(): Promise<void> {
    // What is durable is the truth: after a failure, memory may hold a batch that rolled back.
    this.loadCheckpoints();
    const liveNames = [...this.live];
    let position = liveNames.length > 0 ? this.position(liveNames) : this.position();
    this.livePosition = position;
    this.state = 'catching_up';
    this.options.onChange?.();
    for (;;) {
      const batch = await this.options.store.readAll({
        after: position,
        limit: this.batchSize,
        streamPrefix: this.prefix,
      });
      if (!this.running) return;
      if (batch.length === 0) break;
      await this.applyLive(batch);
      position = batch[batch.length - 1].position;
    }
    if (!this.running) return;
    this.state = 'live';
    this.lastError = undefined;
    this.options.onChange?.();
    await new Promise<void>((resolve, reject) => {
      this.endLive = resolve;
      this.subscription = this.options.store.subscribe(
        { after: position, streamPrefix: this.prefix },
        { onEvents: (events) => this.applyLive(events), onError: reject },
      );
    });
    this.endLive = undefined;
  }

  private async applyLive(batch: StoredEvent[]): Promise<void> {
    if (!this.running || batch.length === 0) return;
    const { readModel } = this.options;
    const projections = this.projections.filter((projection) => this.live.has(projection.name));
    const last = batch[batch.length - 1];
    const reached = readModel.transaction(() => {
      const applied = new Map<string, number>();
      for (const projection of projections) {
        // Read inside the transaction: another engine on the same file may have got further.
        const checkpoint = readModel.checkpoint(projection.name).position;
        if (last.position <= checkpoint) {
          applied.set(projection.name, checkpoint);
          continue;
        }
        const set = new ProjectionWorkingSet(projection, readModel, checkpoint);
        set.fold(batch);
        set.write();
        readModel.setCheckpoint(projection.name, last.position, last.metadata.recorded_at, last.metadata.hash);
        applied.set(projection.name, last.position);
      }
      return applied;
    });
    for (const [name, position] of reached) this.checkpoints.set(name, position);
    // Set before anything awaits: a rebuild decides to join by comparing with this position.
    this.livePosition = Math.max(this.livePosition, last.position);
    this.settleWaiters();
  }

  /**
   * Reads the log from where each set beside stands (zero, or what an earlier build left) for the
   * projections being rebuilt, folding many batches into one working set per projection and
   * committing it with the checkpoints every `rebuildCommitEvents` events.
   */
  private async runRebuild(names: readonly string[]): Promise<void> {
    const { readModel } = this.options;
    const projections = this.projections.filter((projection) => names.includes(projection.name));
    // On this connection a projection being rebuilt answers the checkpoint of its set beside.
    let sets = projections.map(
      (projection) => new ProjectionWorkingSet(projection, readModel, readModel.checkpoint(projection.name).position),
    );
    let position = Math.min(...sets.map((set) => set.after));
    let folded: { last: StoredEvent; events: number } | undefined;
    let caughtUp = false;
    const commit = () => {
      if (!folded) return;
      const { last } = folded;
      folded = undefined;
      ({ sets, position } = this.commitRebuild(sets, last));
    };
    try {
      for (;;) {
        if (this.stopping) break;
        if (this.running && position >= this.livePosition) {
          // Only what is committed may join: commit, then look again (the live lane may have moved).
          if (folded) {
            commit();
            continue;
          }
          // Another engine on the same file may have taken the live tables further than this one's
          // live lane: the set built beside goes on to there, so a swap never moves a checkpoint back.
          const live = readModel.checkpoints().filter((checkpoint) => names.includes(checkpoint.projection));
          if (live.every((checkpoint) => checkpoint.position <= position)) {
            caughtUp = true;
            break;
          }
        }
        // The embedded store reads synchronously, so without this the whole rebuild between two
        // commits ran in one turn of the event loop and every other request (any tenant's) waited
        // for it: 2.9 s at 64k events. Yielding after each batch bounds that wait by one batch's
        // fold (docs/security.md, "Rebuilds").
        await yieldToEventLoop();
        const batch = await this.options.store.readAll({
          after: position,
          limit: this.rebuildBatchSize,
          streamPrefix: this.prefix,
        });
        if (batch.length === 0) {
          caughtUp = true;
          break;
        }
        for (const set of sets) set.fold(batch);
        const last = batch[batch.length - 1];
        folded = { last, events: (folded?.events ?? 0) + batch.length };
        position = last.position;
        const held = sets.reduce((sum, set) => sum + set.size, 0);
        if (folded.events >= this.rebuildCommitEvents || held >= this.rebuildMaxDocs) commit();
      }
      commit();
    } finally {
      // Joining is synchronous with the check above: the live lane's next batch starts after
      // livePosition, and these projections skip what they already applied. Caught up, the set
      // built beside is swapped in; stopped or failed, it is dropped and the live tables join as
      // they stood, behind, and the live lane (restarted from the checkpoints) catches them up.
      // An outdated projection's live tables are another version's: they never join, and what was
      // built beside is kept for the next build to go on from.
      for (const name of names) {
        const keep = !caughtUp && this.outdated.has(name);
        if (caughtUp) readModel.finishRebuild(name);
        else readModel.abandonRebuild(name, { keep });
        this.checkpoints.set(name, readModel.checkpoint(name).position);
        if (keep) continue;
        this.outdated.delete(name);
        this.live.add(name);
      }
      this.settleWaiters();
    }
  }

  /**
   * Commits a rebuild's working sets with their checkpoints in one transaction. If another engine
   * on the same file moved these projections meanwhile, what was folded here does not sit on what is
   * stored: it is dropped, and the rebuild goes on from the stored checkpoints.
   */
  private commitRebuild(
    sets: ProjectionWorkingSet[],
    last: StoredEvent,
  ): { sets: ProjectionWorkingSet[]; position: number } {
    const { readModel } = this.options;
    const moved = readModel.transaction(() => {
      const stored = sets.map((set) => readModel.checkpoint(set.projection.name).position);
      if (stored.some((checkpoint, index) => checkpoint !== sets[index].after)) return stored;
      for (const set of sets) {
        set.write();
        readModel.setCheckpoint(set.projection.name, last.position, last.metadata.recorded_at, last.metadata.hash);
      }
      return undefined;
    });
    if (moved) {
      return {
        sets: sets.map((set, index) => new ProjectionWorkingSet(set.projection, readModel, moved[index])),
        position: Math.min(...moved),
      };
    }
    return {
      sets: sets.map((set) => new ProjectionWorkingSet(set.projection, readModel, last.position)),
      position: last.position,
    };
  }

  private settleWaiters(): void {
    this.options.onChange?.();
    this.waiters.settle();
  }
}

const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));
