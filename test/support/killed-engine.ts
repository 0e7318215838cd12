/**
 * The projection engine in a process of its own, SIGKILLed from inside its commits (test/support/
 * engine-faults.ts): right after the COMMIT of the chosen one, or inside it, before it commits.
 * Nothing gets to clean up. Also a store that counts the events read through it.
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { BatchInfo } from './engine-faults';
import type { EventStore } from '../../src/store/event-store.port';

const ROOT = resolve(__dirname, '../..');

export interface KilledEngine {
  dir: string;
  eventsFile: string;
  readModelFile: string;
  phase: 'afterCommit' | 'beforeCommit';
  /** Killed at this commit (1-based) of those that moved `projection` (any, when not given). */
  commit: number;
  projection?: string;
  /** The projections to run: a module (from the repository's root) and the name it exports them as. */
  projections: { module: string; name: string };
  /** More options of the engine, as JSON. */
  engine: Record<string, number>;
}

/** Runs the engine until it is killed; answers what the commit it was killed at covered. */
export async function runEngineUntilKilled(options: KilledEngine): Promise<BatchInfo> {
  const reportFile = join(options.dir, 'killed-at.json');
  const script = join(options.dir, 'engine-child.js');
  const source = (path: string) => JSON.stringify(join(ROOT, path));
  writeFileSync(
    script,
    `
const fs = require('node:fs');
require(${source('test/chaos/swc-register.cjs')});
const { ProjectionEngine } = require(${source('src/projection-engine/projection-engine.ts')});
const { SqliteReadModel } = require(${source('src/adapters/sqlite/sqlite-read-model.store.ts')});
const { SqliteEventStore } = require(${source('src/adapters/sqlite/sqlite-event-store.adapter.ts')});
const { withEngineFaults } = require(${source('test/support/engine-faults.ts')});
const projections = require(${source(options.projections.module)})[${JSON.stringify(options.projections.name)}];
const store = SqliteEventStore.open({ file: ${JSON.stringify(options.eventsFile)} });
const readModel = SqliteReadModel.open({ file: ${JSON.stringify(options.readModelFile)} });
const only = ${JSON.stringify(options.projection ?? null)};
let commits = 0;
const kill = (batch) => {
  if ((only !== null && !batch.projections.includes(only)) || ++commits !== ${options.commit}) return;
  fs.writeFileSync(${JSON.stringify(reportFile)}, JSON.stringify(batch));
  process.kill(process.pid, 'SIGKILL');
};
const engine = new ProjectionEngine({ ...withEngineFaults(store, readModel, { ${options.phase}: kill }), projections, restartDelayMs: null, ...${JSON.stringify(options.engine)} });
engine.start();
setTimeout(() => process.exit(3), 20000);
`,
  );
  const child = spawn(process.execPath, [script], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const signal = await new Promise<NodeJS.Signals | null>((resolveExit) =>
    child.on('exit', (_code, exitSignal) => resolveExit(exitSignal)),
  );
  expect({ signal, stderr }).toEqual({ signal: 'SIGKILL', stderr: '' });
  return JSON.parse(readFileSync(reportFile, 'utf8')) as BatchInfo;
}

/** The store, counting the events read through it. */
export function counting(store: EventStore): { store: EventStore; read: () => number } {
  let read = 0;
  const spied: EventStore = Object.assign(Object.create(store) as EventStore, {
    readAll: async (options: Parameters<EventStore['readAll']>[0]) => {
      const events = await store.readAll(options);
      read += events.length;
      return events;
    },
  });
  return { store: spied, read: () => read };
}
