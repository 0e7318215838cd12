/**
 * Rebuild rate of the projections over a large log, as a ratio to a plain ordered scan of the same
 * events table in the same run (so the machine's speed cancels out).
 *
 *   npm run build && node dist/bench/projection-rebuild.bench.js [events=1000000] [dir]
 *
 * The log is written first through the real command path (LedgerService over the SQLite store,
 * many operations in flight at once, group commit), unless `dir` already holds one.
 */
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { LEDGER_PROJECTIONS } from '@recovery-ledger/projections';
import { ProjectionEngine } from '../src/projection-engine/projection-engine';
import { SqliteReadModel } from '../src/adapters/sqlite/sqlite-read-model.store';
import { SqliteEventStore } from '../src/adapters/sqlite/sqlite-event-store.adapter';
import { ledgerOver, runOperation } from './ledger-workload';

const target = Number(process.argv[2] ?? 1_000_000);
const dir = process.argv[3] ?? mkdtempSync(join(tmpdir(), 'ledger-rebuild-bench-'));
const keep = process.argv[3] !== undefined;
const eventsFile = join(dir, 'events.sqlite');

function rate(events: number, ms: number): number {
  return Math.round(events / (ms / 1000));
}

async function writeLog(store: SqliteEventStore): Promise<void> {
  const ledger = ledgerOver(store);
  const inFlight = 2_000;
  let next = 0;
  const started = performance.now();
  let lastReport = started;
  const worker = async () => {
    while ((await store.headPosition()) < target) {
      const n = next++;
      await runOperation(ledger, n, n % 10 === 0 ? 'globex' : 'acme');
      const now = performance.now();
      if (now - lastReport > 5_000) {
        lastReport = now;
        const head = await store.headPosition();
        process.stderr.write(`  writing: ${head} events, ${rate(head, now - started)} events/s\n`);
      }
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  const head = await store.headPosition();
  console.log(
    `log written: ${head} events, ${next} operations, ${rate(head, performance.now() - started)} events/s through LedgerService`,
  );
}

async function main(): Promise<void> {
  const store = SqliteEventStore.open({ file: eventsFile });
  if ((await store.headPosition()) < target) await writeLog(store);
  const head = await store.headPosition();

  // 1. A plain ordered scan of the events table: every row, in position order, no parsing.
  const raw = new Database(eventsFile, { readonly: true });
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
  raw.close();

  // 2. The same scan through the port (batches of 1000, JSON parsed): what the engine reads.
  t = performance.now();
  let portRows = 0;
  for (let after = 0; ;) {
    const batch = await store.readAll({ after, limit: 1000, streamPrefix: 'op-' });
    if (batch.length === 0) break;
    portRows += batch.length;
    after = batch[batch.length - 1].position;
  }
  const portMs = performance.now() - t;

  // 3. Rebuild all projections from zero into a fresh read model, as `rebuild` does it.
  const readModelFile = join(dir, `read-models-${Date.now()}.sqlite`);
  const readModel = SqliteReadModel.open({ file: readModelFile });
  const engine = new ProjectionEngine({ store, readModel, projections: LEDGER_PROJECTIONS, batchSize: 1000 });
  t = performance.now();
  await engine.rebuild();
  const rebuildMs = performance.now() - t;
  if (engine.position() !== head) throw new Error(`rebuild stopped at ${engine.position()}, head is ${head}`);

  // 3b. The same with larger transactions: faster, but each batch holds the event loop longer, so
  // the server's catch-up uses 1000 and this is what an offline rebuild can afford.
  const bigBatches = SqliteReadModel.open({ file: join(dir, `read-models-big-${Date.now()}.sqlite`) });
  t = performance.now();
  await new ProjectionEngine({
    store,
    readModel: bigBatches,
    projections: LEDGER_PROJECTIONS,
    batchSize: 10_000,
  }).rebuild();
  const bigMs = performance.now() - t;
  bigBatches.close();

  // 4. Each projection alone, to see where the time goes.
  const alone: string[] = [];
  for (const projection of LEDGER_PROJECTIONS) {
    const single = SqliteReadModel.open({ file: join(dir, `single-${projection.name}-${Date.now()}.sqlite`) });
    const singleEngine = new ProjectionEngine({ store, readModel: single, projections: [projection], batchSize: 1000 });
    const s = performance.now();
    await singleEngine.rebuild();
    alone.push(`${projection.name} ${rate(head, performance.now() - s)}/s`);
    single.close();
  }

  const scanRate = rate(rows, scanMs);
  const rebuildRate = rate(head, rebuildMs);
  console.log(`events in log:            ${head} (${(bytes / 1e6).toFixed(0)} MB of data+metadata JSON)`);
  console.log(`plain ordered scan:       ${scanRate} events/s (${(scanMs / 1000).toFixed(2)} s)`);
  console.log(
    `scan through the port:    ${rate(portRows, portMs)} events/s (${(portMs / 1000).toFixed(2)} s, JSON parsed)`,
  );
  console.log(`rebuild, 4 projections:   ${rebuildRate} events/s (${(rebuildMs / 1000).toFixed(2)} s)`);
  console.log(`rebuild / plain scan:     ${(rebuildRate / scanRate).toFixed(3)}`);
  console.log(
    `rebuild, batches of 10k:  ${rate(head, bigMs)} events/s (${(bigMs / 1000).toFixed(2)} s), ratio ${(rate(head, bigMs) / scanRate).toFixed(3)}`,
  );
  console.log(`each projection alone:    ${alone.join(', ')}`);
  readModel.close();
  await store.close();
  if (!keep) rmSync(dir, { recursive: true, force: true });
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
