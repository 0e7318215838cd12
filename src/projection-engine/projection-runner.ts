import type { EventStore, StoredEvent } from '../store/event-store.port';

export type EngineState = 'stopped' | 'catching_up' | 'live' | 'failed';

export interface ProjectionStatus {
  name: string;
  version: number;
  checkpoint: number;
  mode: 'live' | 'rebuilding';
}

export interface RunnerStatus {
  state: EngineState;
  error?: string;
  projections: ProjectionStatus[];
  /** Present where the engine runs in a worker thread: how many times that thread ended unasked. */
  worker?: { restarts: number };
  /**
   * Present where the read models are shared by several instances (docs/postgres.md, "Read
   * models"): whether this one projects them or copies what the projector published.
   */
  shared?: { role: 'projector' | 'copy' };
}

export interface ProjectionLag {
  projection: string;
  /** Positions: the last one applied, and the head of the log. */
  checkpoint: number;
  head: number;
  /**
   * Events not yet applied: 0 when caught up, on every store. While behind, `head - checkpoint`
   * where the store's positions are dense (SQLite); null where they are not (EventStoreDB, whose
   * positions are byte offsets), since counting there would mean reading every event behind.
   */
  events_behind: number | null;
  /** Age of the oldest event not yet applied (0 when caught up). */
  ms_behind: number;
}

/**
 * What the rest of the service holds of the projection engine, wherever it runs: in this thread
 * (`ProjectionEngine`) or in a worker thread of its own (`WorkerProjectionRunner`). Queries, health,
 * metrics and the module's lifecycle use only this.
 */
export interface ProjectionRunner {
  /** Starts following the log in the background; resolves at once (see `waitForPosition`). */
  start(): void;
  stop(): Promise<void>;
  status(): RunnerStatus;
  checkpoint(name: string): number;
  /** The position every named projection has reached (all of them by default). */
  position(names?: readonly string[]): number;
  /**
   * Read-your-writes: resolves true once every named projection has applied the log up to
   * `position` (and committed it, so this thread's read-model connection sees it), false if that
   * did not happen within `timeoutMs`.
   */
  waitForPosition(position: number, timeoutMs: number, names?: readonly string[]): Promise<boolean>;
  lag(): Promise<ProjectionLag[]>;
  /**
   * Calls `listener` with how long each commit of this process took to become readable (every
   * projection has applied and committed it), in ms. Only a runner that sees this process's
   * commits as they happen has it (the embedded store's worker runner).
   */
  onReadable?(listener: (ms: number) => void): void;
  /** Rebuilds the named projections (all by default) from zero; resolves once they have caught up. */
  rebuild(names?: readonly string[]): Promise<void>;
}

/**
 * How far each projection is behind the log: in time on every store, in events only where the
 * store's positions count them (`densePositions`). A projection with nothing of its streams after
 * its checkpoint is caught up, whatever else the log holds after it (EventStoreDB's `$all` also
 * carries the work feed's lease streams).
 */
export async function projectionLag(
  store: EventStore,
  streamPrefix: string,
  checkpoints: ReadonlyArray<{ name: string; checkpoint: number }>,
  now: () => number,
): Promise<ProjectionLag[]> {
  const head = await store.headPosition();
  const oldestUnapplied = new Map<number, StoredEvent | undefined>();
  const lags: ProjectionLag[] = [];
  for (const { name, checkpoint } of checkpoints) {
    if (checkpoint < head && !oldestUnapplied.has(checkpoint)) {
      const [next] = await store.readAll({ after: checkpoint, limit: 1, streamPrefix });
      oldestUnapplied.set(checkpoint, next);
    }
    const next = checkpoint < head ? oldestUnapplied.get(checkpoint) : undefined;
    const recordedAt = next ? Date.parse(next.metadata.recorded_at) : NaN;
    lags.push({
      projection: name,
      checkpoint,
      head,
      events_behind: next === undefined ? 0 : store.densePositions ? head - checkpoint : null,
      ms_behind: Number.isFinite(recordedAt) ? Math.max(0, now() - recordedAt) : 0,
    });
  }
  return lags;
}

/**
 * Readers waiting for projections to reach a position (`wait_for_position`), as either runner keeps
 * them: each resolves true once `reached(names)` is at its position, false at its timeout or stop.
 */
export class PositionWaiters {
  private readonly waiting = new Set<{
    position: number;
    names: readonly string[];
    resolve(reached: boolean): void;
    timer: ReturnType<typeof setTimeout>;
  }>();

  constructor(private readonly reached: (names: readonly string[]) => number) {}

  wait(position: number, timeoutMs: number, names: readonly string[]): Promise<boolean> {
    if (this.reached(names) >= position) return Promise.resolve(true);
    if (timeoutMs <= 0) return Promise.resolve(false);
    return new Promise((resolve) => {
      const waiter = {
        position,
        names,
        resolve,
        timer: setTimeout(() => {
          this.waiting.delete(waiter);
          resolve(false);
        }, timeoutMs),
      };
      this.waiting.add(waiter);
    });
  }

  /** Resolves every waiter whose position is now reached. */
  settle(): void {
    for (const waiter of this.waiting) {
      if (this.reached(waiter.names) >= waiter.position) {
        clearTimeout(waiter.timer);
        this.waiting.delete(waiter);
        waiter.resolve(true);
      }
    }
  }

  /** The runner stopped: nobody's position will be reached now. */
  endAll(): void {
    for (const waiter of this.waiting) {
      clearTimeout(waiter.timer);
      waiter.resolve(false);
    }
    this.waiting.clear();
  }
}

/**
 * Where each projection a runner serves stands, as the runner last learnt it, and the reads every
 * runner outside the engine's own thread answers the same way from it: a projection's checkpoint,
 * the position all have reached, a wait for a position (docs/contract.md §5) and the lag.
 */
export class RunnerCheckpoints {
  /** The position each projection has reached, set by the runner as it learns it. */
  readonly positions = new Map<string, number>();
  readonly waiters = new PositionWaiters((names) => this.position(names));

  constructor(
    readonly names: readonly string[],
    private readonly store: EventStore,
    private readonly streamPrefix: string,
    private readonly now: () => number,
  ) {}

  checkpoint(name: string): number {
    const position = this.positions.get(name);
    if (position === undefined) throw new Error(`no projection ${name}`);
    return position;
  }

  position(names: readonly string[] = this.names): number {
    return Math.min(...names.map((name) => this.checkpoint(name)));
  }

  waitForPosition(position: number, timeoutMs: number, names: readonly string[] = this.names): Promise<boolean> {
    for (const name of names) this.checkpoint(name);
    return this.waiters.wait(position, timeoutMs, names);
  }

  lag(): Promise<ProjectionLag[]> {
    return projectionLag(
      this.store,
      this.streamPrefix,
      this.names.map((name) => ({ name, checkpoint: this.checkpoint(name) })),
      this.now,
    );
  }
}
