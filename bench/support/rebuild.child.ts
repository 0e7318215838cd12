/**
 * Figures 5 and 7 in a process of their own, so that its resident set is the rebuild's alone (the
 * parent samples it from /proc): a plain ordered scan of the events table, then the projection
 * engine's rebuild from zero of all projections into a fresh read model, the one the service uses
 * (`<dir>/read-models.sqlite`), with the engine's default batch size, as the service runs it.
 *
 *   node dist/bench/support/rebuild.child.js <data dir>
 *
 * Prints one JSON line: the phases with their wall-clock bounds (Date.now()) and what they counted.
 */
import Database from 'better-sqlite3';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { LEDGER_PROJECTIONS } from '@recovery-ledger/projections';
import { ProjectionEngine } from '../../src/projection-engine/projection-engine';
import { SqliteReadModel } from '../../src/adapters/sqlite/sqlite-read-model.store';
import { SqliteEventStore } from '../../src/adapters/sqlite/sqlite-event-store.adapter';

export interface RebuildChildResult {
  events: number;
  openedAt: number;
  scan: { from: number; to: number; rows: number; bytes: number; ms: number };
  rebuild: { from: number; to: number; events: number; ms: number };
  rssAfterMb: number;
}

async function main(): Promise<void> {
  const dir = process.argv[2];
  if (!dir) throw new Error('usage: rebuild.child.js <data dir>');
  const eventsFile = join(dir, 'events.sqlite');
  const store = SqliteEventStore.open({ file: eventsFile });
  const events = await store.headPosition();
  const openedAt = Date.now();
  // Let the parent see the resident set with the log open and nothing read yet.
  await new Promise((r) => setTimeout(r, 500));

  // The baseline: every row in position order, the JSON columns touched but not parsed.
  const raw = new Database(eventsFile, { readonly: true });
  const scanFrom = Date.now();
  let t = performance.now();
  let rows = 0;
  let bytes = 0;
  for (const row of raw.prepare('SELECT * FROM events ORDER BY position').iterate() as Iterable<{
    data: string;
    metadata: string;
  }>) {
    rows += 1;
    bytes += row.data.length + row.metadata.length;
  }
  const scanMs = performance.now() - t;
  const scanTo = Date.now();
  raw.close();

  const readModelFile = join(dir, 'read-models.sqlite');
  for (const suffix of ['', '-wal', '-shm']) rmSync(`${readModelFile}${suffix}`, { force: true });
  const readModel = SqliteReadModel.open({ file: readModelFile });
  const engine = new ProjectionEngine({ store, readModel, projections: LEDGER_PROJECTIONS });
  const rebuildFrom = Date.now();
  t = performance.now();
  await engine.rebuild();
  const rebuildMs = performance.now() - t;
  const rebuildTo = Date.now();
  if (engine.position() !== events)
    throw new Error(`rebuild stopped at ${engine.position()}, the log ends at ${events}`);
  const rssAfterMb = process.memoryUsage().rss / 1024 / 1024;
  readModel.close();
  await store.close();
  const result: RebuildChildResult = {
    events,
    openedAt,
    scan: { from: scanFrom, to: scanTo, rows, bytes, ms: scanMs },
    rebuild: { from: rebuildFrom, to: rebuildTo, events, ms: rebuildMs },
    rssAfterMb,
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`rebuild child failed: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
