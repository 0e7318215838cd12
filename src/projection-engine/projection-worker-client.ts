import { extname, join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { AnyProjection } from '@recovery-ledger/projections';
import type { EventStore } from '../store/event-store.port';
import { onEmbeddedAppend } from '../adapters/store.factory';
import { OPERATION_STREAM_PREFIX } from '../store/stream-names';
import { RunnerCheckpoints, type ProjectionLag, type ProjectionRunner, type RunnerStatus } from './projection-runner';
import type { FromWorker, ProjectionWorkerData, ToWorker } from './projection-worker';
import type { ReadModel } from '../store/read-model.port';

export interface WorkerRunnerOptions {
  /** The embedded log's file and the read models' file: the worker opens its own connections to both. */
  eventsFile: string;
  readModelFile: string;
  /** The key of the read model's row digest (see ReadModelOptions): the same on both connections. */
  digestKey?: string;
  busyTimeoutMs: number;
  /** This thread's store: lag is read from it, and its commits are announced to the worker. */
  store: EventStore;
  /** This thread's read model: the one queries read; checkpoints start from it. */
  readModel: ReadModel;
  /** The projections the worker runs (its catalog, `LEDGER_PROJECTIONS`). */
  projections: readonly AnyProjection[];
  /** After a failure in the worker, or its thread's end, start again after this long (default 1 s). */
  restartDelayMs?: number;
  now?: () => number;
  /** The engine in the worker failed (it follows the log again after the delay by itself). */
  onError?(error: Error): void;
  /** The worker thread itself ended unasked; it is started again from the stored checkpoints. */
  onWorkerExit?(error: Error, restarts: number): void;
}

/**
 * Where the worker's entry is: beside this file, compiled (dist) or not (the tests, which load the
 * sources through SWC; a worker thread cannot load TypeScript by itself, so it is given a require
 * hook that compiles with the same compiler the tests use).
 */
function spawnWorker(data: ProjectionWorkerData): Worker {
  const entry = join(__dirname, `projection-worker${extname(__filename)}`);
  // V8's default young generation (48 MB) let the worker's heap reach 44 MB under submit load; at
  // 8 MB it stayed at 26 MB (its live data is about 20 MB). The extra scavenges run on the worker's
  // own thread, not the one answering requests.
  const resourceLimits = { maxYoungGenerationSizeMb: 8 };
  if (!entry.endsWith('.ts')) return new Worker(entry, { workerData: data, resourceLimits });
  const loader = `
    const { readFileSync } = require('node:fs');
    const { transformSync } = require(${JSON.stringify(require.resolve('@swc/core'))});
    require.extensions['.ts'] = (module, filename) => {
      const { code } = transformSync(readFileSync(filename, 'utf8'), {
        filename,
        jsc: { target: 'es2022', parser: { syntax: 'typescript', decorators: true }, transform: { legacyDecorator: true, decoratorMetadata: true } },
        module: { type: 'commonjs' },
      });
      module._compile(code, filename);
    };
    require(${JSON.stringify(entry)});
  `;
  return new Worker(loader, { eval: true, workerData: data, resourceLimits });
}

/** About a minute of group commits at full speed: past that the oldest are not timed. */
const MAX_UNREAD_COMMITS = 100_000;

/**
 * The projection engine in a worker thread, on the embedded SQLite store: the fold and the
 * read-model writes (a tenth of the service's CPU under submits, profiled) leave the thread that
 * answers requests for the second core. This side keeps what readers need synchronously: the
 * checkpoints and state the worker reports after each commit, the waits for a position, and lag,
 * read from this thread's store.
 *
 * Consistency is the engine's: documents and checkpoints commit in one read-model transaction in
 * the worker, which reports a position only after that commit, so a reader whose wait has
 * resolved reads it through this thread's connection (whose cache `PRAGMA data_version` clears).
 * A worker that ends unasked is started again, loudly, from the stored checkpoints: nothing is
 * applied twice or skipped.
 */
export class WorkerProjectionRunner implements ProjectionRunner {
  private readonly names: string[];
  private readonly tracked: RunnerCheckpoints;
  private readonly rebuilds = new Map<number, { resolve(): void; reject(error: Error): void }>();
  private readonly now: () => number;
  private readonly restartDelayMs: number;
  private current: RunnerStatus;
  private worker: Worker | undefined;
  private running = false;
  private stopping = false;
  private restarts = 0;
  private restartTimer: ReturnType<typeof setTimeout> | undefined;
  private stopAnnouncing: (() => void) | undefined;
  private nextRebuild = 1;
  /** This process's commits not yet readable, oldest first: the position each reached, and when. */
  private readonly unreadCommits: Array<{ position: number; atMs: number }> = [];
  private readableListener: ((ms: number) => void) | undefined;

  constructor(private readonly options: WorkerRunnerOptions) {
    this.now = options.now ?? Date.now;
    this.restartDelayMs = options.restartDelayMs ?? 1000;
    this.names = options.projections.map((projection) => projection.name);
    this.tracked = new RunnerCheckpoints(this.names, options.store, OPERATION_STREAM_PREFIX, this.now);
    // Registered here too: this thread's connection reads the tables (the worker's registers the same).
    for (const projection of options.projections) options.readModel.register(projection);
    this.current = {
      state: 'stopped',
      projections: options.projections.map((projection) => ({
        name: projection.name,
        version: projection.version,
        checkpoint: options.readModel.checkpoint(projection.name).position,
        mode: 'live',
      })),
    };
    for (const projection of this.current.projections)
      this.tracked.positions.set(projection.name, projection.checkpoint);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.stopping = false;
    // Each commit of this process wakes the worker's subscription at once; its poll stays for
    // what other processes append to the same file.
    this.stopAnnouncing = onEmbeddedAppend(this.options.store, (position) => {
      this.send({ type: 'appended' });
      if (position !== undefined && this.readableListener) this.noteCommit(position);
    });
    this.ensureWorker();
    this.send({ type: 'start' });
  }

  async stop(): Promise<void> {
    this.running = false;
    this.stopping = true;
    clearTimeout(this.restartTimer);
    this.restartTimer = undefined;
    this.stopAnnouncing?.();
    this.stopAnnouncing = undefined;
    const worker = this.worker;
    if (worker) {
      // The worker stops its engine and closes both its connections, then says so; only then is
      // the thread ended (the store of this thread closes after this, in a later shutdown phase).
      const done = new Promise<void>((resolve) => {
        const finish = () => resolve();
        worker.once('exit', finish);
        worker.on('message', (message: FromWorker) => {
          if (message.type === 'stopped') finish();
        });
      });
      worker.postMessage({ type: 'stop' } satisfies ToWorker);
      const timeout = setTimeout(() => void worker.terminate(), 30_000);
      await done;
      clearTimeout(timeout);
      await worker.terminate();
    }
    this.worker = undefined;
    this.failRebuilds(new Error('the projection engine stopped'));
    this.current = { ...this.current, state: 'stopped' };
    this.tracked.waiters.endAll();
  }

  status(): RunnerStatus {
    return {
      ...this.current,
      projections: this.current.projections.map((projection) => ({ ...projection })),
      worker: { restarts: this.restarts },
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

  onReadable(listener: (ms: number) => void): void {
    this.readableListener = listener;
  }

  /** Bounded: a worker that stands still must not make this thread hold every commit since. */
  private noteCommit(position: number): void {
    if (this.unreadCommits.length >= MAX_UNREAD_COMMITS) this.unreadCommits.shift();
    this.unreadCommits.push({ position, atMs: this.now() });
  }

  /** Every commit the read models now show has become readable: say how long each took. */
  private settleReadable(): void {
    if (this.unreadCommits.length === 0) return;
    const reached = this.position();
    const nowMs = this.now();
    let settled = 0;
    while (settled < this.unreadCommits.length && this.unreadCommits[settled].position <= reached) {
      this.readableListener?.(nowMs - this.unreadCommits[settled].atMs);
      settled += 1;
    }
    if (settled > 0) this.unreadCommits.splice(0, settled);
  }

  rebuild(names: readonly string[] = this.names): Promise<void> {
    for (const name of names) this.checkpoint(name);
    const worker = this.ensureWorker();
    const id = this.nextRebuild++;
    return new Promise<void>((resolve, reject) => {
      this.rebuilds.set(id, { resolve, reject });
      worker.postMessage({ type: 'rebuild', id, names: [...names] } satisfies ToWorker);
    });
  }

  private send(message: ToWorker): void {
    this.worker?.postMessage(message);
  }

  private ensureWorker(): Worker {
    if (this.worker) return this.worker;
    const worker = spawnWorker({
      eventsFile: this.options.eventsFile,
      readModelFile: this.options.readModelFile,
      ...(this.options.digestKey === undefined ? {} : { digestKey: this.options.digestKey }),
      busyTimeoutMs: this.options.busyTimeoutMs,
      restartDelayMs: this.restartDelayMs,
    });
    this.worker = worker;
    let thrown: Error | undefined;
    worker.on('message', (message: FromWorker) => {
      if (this.worker === worker) this.receive(message);
    });
    worker.on('error', (error) => {
      thrown = error;
    });
    worker.on('exit', (code) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      const error = new Error(
        `the projection worker thread ended (exit code ${code}${thrown ? `: ${thrown.message}` : ''}); it starts again from the stored checkpoints`,
      );
      this.failRebuilds(error);
      if (this.stopping) return;
      this.restarts += 1;
      this.current = { ...this.current, state: 'failed', error: error.message };
      this.options.onWorkerExit?.(error, this.restarts);
      if (!this.running) return;
      this.restartTimer = setTimeout(() => {
        this.restartTimer = undefined;
        if (!this.running) return;
        this.ensureWorker();
        this.send({ type: 'start' });
      }, this.restartDelayMs);
    });
    return worker;
  }

  private receive(message: FromWorker): void {
    switch (message.type) {
      case 'status':
        this.current = message.status;
        for (const projection of message.status.projections)
          this.tracked.positions.set(projection.name, projection.checkpoint);
        this.tracked.waiters.settle();
        this.settleReadable();
        break;
      case 'error': {
        const error = new Error(message.message);
        if (message.stack) error.stack = message.stack;
        this.options.onError?.(error);
        break;
      }
      case 'rebuilt': {
        const pending = this.rebuilds.get(message.id);
        this.rebuilds.delete(message.id);
        if (message.error === undefined) pending?.resolve();
        else pending?.reject(new Error(message.error));
        break;
      }
      case 'stopped':
        break;
    }
  }

  private failRebuilds(error: Error): void {
    for (const pending of this.rebuilds.values()) pending.reject(error);
    this.rebuilds.clear();
  }
}
