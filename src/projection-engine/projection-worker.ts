/**
 * The projection engine's own thread (see `WorkerProjectionRunner`): its own connection to the
 * embedded log (reads only) and its own connection to the read-model file, so folding and writing
 * documents never takes a turn of the event loop that answers requests. Talks to its runner by
 * messages only.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { LEDGER_PROJECTIONS } from '@recovery-ledger/projections';
import { openEmbeddedLogReader } from '../adapters/store.factory';
import { ProjectionEngine } from './projection-engine';
import type { RunnerStatus } from './projection-runner';
import { openReadModel } from '../adapters/store.factory';

export interface ProjectionWorkerData {
  eventsFile: string;
  readModelFile: string;
  digestKey?: string;
  busyTimeoutMs: number;
  restartDelayMs: number | null;
}

export type ToWorker =
  { type: 'start' } | { type: 'stop' } | { type: 'appended' } | { type: 'rebuild'; id: number; names: string[] };

export type FromWorker =
  | { type: 'status'; status: RunnerStatus }
  | { type: 'error'; message: string; stack?: string }
  | { type: 'rebuilt'; id: number; error?: string }
  | { type: 'stopped' };

function main(port: NonNullable<typeof parentPort>, data: ProjectionWorkerData): void {
  const post = (message: FromWorker) => port.postMessage(message);
  const log = openEmbeddedLogReader(data.eventsFile, data.busyTimeoutMs);
  const readModel = openReadModel({
    file: data.readModelFile,
    busyTimeoutMs: data.busyTimeoutMs,
    readCacheBytes: 0,
    ...(data.digestKey === undefined ? {} : { digestKey: data.digestKey }),
  });
  // Status goes out at most once per turn of this thread's loop, after the commit it reports:
  // the runner settles a reader's wait_for_position on it, and the commit is then visible to the
  // reader's own connection.
  let statusQueued = false;
  const engine: ProjectionEngine = new ProjectionEngine({
    store: log.store,
    readModel,
    projections: LEDGER_PROJECTIONS,
    restartDelayMs: data.restartDelayMs,
    onError: (error) => post({ type: 'error', message: error.message, stack: error.stack }),
    onChange: () => {
      if (statusQueued) return;
      statusQueued = true;
      queueMicrotask(() => {
        statusQueued = false;
        post({ type: 'status', status: engine.status() });
      });
    },
  });
  post({ type: 'status', status: engine.status() });
  let stopping = false;
  port.on('message', (message: ToWorker) => {
    switch (message.type) {
      case 'start':
        if (!stopping) engine.start();
        break;
      case 'appended':
        log.announce();
        break;
      case 'rebuild':
        engine.rebuild(message.names).then(
          () => post({ type: 'rebuilt', id: message.id }),
          (error: unknown) =>
            post({ type: 'rebuilt', id: message.id, error: error instanceof Error ? error.message : String(error) }),
        );
        break;
      case 'stop':
        if (stopping) return;
        stopping = true;
        void (async () => {
          await engine.stop();
          await log.store.close().catch(() => undefined);
          readModel.close();
          post({ type: 'stopped' });
          port.close();
        })();
        break;
    }
  });
}

if (parentPort) main(parentPort, workerData as ProjectionWorkerData);
