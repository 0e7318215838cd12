/**
 * Projection lag under a sustained append load, in one process as in the server: the engine
 * follows the SQLite store live while LedgerService appends at a target rate. For every stored
 * submit, the lag is the time from its answer to the moment every projection has applied its
 * position (what a reader with ?wait_for_position would wait). The engine's own lag report
 * (events and ms behind the head) is sampled every 100 ms.
 *
 *   npm run build && node dist/bench/projection-lag.bench.js [events_per_second=2000] [seconds=20]
 *
 * events_per_second=0 appends as fast as the ledger can with 200 runtimes in a closed loop. An
 * open-loop target above what the process can append only measures its growing queue: the engine
 * shares the event loop with the command path, so it is starved along with everything else.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { LEDGER_PROJECTIONS } from '@recovery-ledger/projections';
import { ProjectionEngine } from '../src/projection-engine/projection-engine';
import { SqliteReadModel } from '../src/adapters/sqlite/sqlite-read-model.store';
import { SqliteEventStore } from '../src/adapters/sqlite/sqlite-event-store.adapter';
import { ledgerOver, percentileOf, runOperation } from './ledger-workload';
import { setTimeout as sleep } from 'node:timers/promises';

const targetRate = Number(process.argv[2] ?? 2_000);
const seconds = Number(process.argv[3] ?? 20);
const EVENTS_PER_OPERATION = 8.7; // average over the workload's 20 paths (174 events), refusals included

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-lag-bench-'));
  const store = SqliteEventStore.open({ file: join(dir, 'events.sqlite') });
  const readModel = SqliteReadModel.open({ file: join(dir, 'read-models.sqlite') });
  const engine = new ProjectionEngine({ store, readModel, projections: LEDGER_PROJECTIONS });
  engine.start();
  const ledger = ledgerOver(store);

  const lags: number[] = [];
  const pending: Promise<void>[] = [];
  const onAnswer = (position: number) => {
    const answeredAt = performance.now();
    pending.push(
      engine.waitForPosition(position, 60_000).then((reached) => {
        lags.push(reached ? performance.now() - answeredAt : Number.POSITIVE_INFINITY);
      }),
    );
  };

  const samples: Array<{ events: number; ms: number }> = [];
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const lag = await engine.lag();
      // The embedded store counts events behind (dense positions), so none is null here.
      samples.push({
        events: Math.max(...lag.map((l) => l.events_behind ?? 0)),
        ms: Math.max(...lag.map((l) => l.ms_behind)),
      });
      await sleep(100);
    }
  })();

  const started = performance.now();
  const deadline = started + seconds * 1000;
  let n = 0;
  const running: Promise<void>[] = [];
  if (targetRate > 0) {
    // Operations start at a steady pace; each then runs its facts back to back, as a runtime does.
    const perOperationMs = 1000 / (targetRate / EVENTS_PER_OPERATION);
    while (performance.now() < deadline) {
      const due = Math.floor((performance.now() - started) / perOperationMs);
      while (n < due) running.push(runOperation(ledger, n++, 'acme', onAnswer));
      await sleep(5);
    }
  } else {
    const worker = async () => {
      while (performance.now() < deadline) await runOperation(ledger, n++, 'acme', onAnswer);
    };
    await Promise.all(Array.from({ length: 200 }, worker));
  }
  await Promise.all(running);
  const appendSeconds = (performance.now() - started) / 1000;
  const head = await store.headPosition();
  await Promise.all(pending);
  sampling = false;
  await sampler;

  lags.sort((a, b) => a - b);
  const behind = samples.map((s) => s.events).sort((a, b) => a - b);
  const behindMs = samples.map((s) => s.ms).sort((a, b) => a - b);
  const fmt = (ms: number) => `${ms.toFixed(1)} ms`;
  console.log(
    `target ${targetRate || 'max'} events/s for ${seconds} s: appended ${head} events in ${appendSeconds.toFixed(1)} s = ${Math.round(head / appendSeconds)} events/s (${n} operations, ${lags.length} stored submits)`,
  );
  console.log(
    `read-your-writes lag (answer -> projected): p50 ${fmt(percentileOf(lags, 0.5))}, p95 ${fmt(percentileOf(lags, 0.95))}, p99 ${fmt(percentileOf(lags, 0.99))}, max ${fmt(lags[lags.length - 1] ?? 0)}`,
  );
  console.log(
    `engine lag samples (${samples.length}, every 100 ms when the loop is free): events behind p50 ${percentileOf(behind, 0.5)}, p99 ${percentileOf(behind, 0.99)}, max ${behind[behind.length - 1] ?? 0}; ms behind p50 ${percentileOf(behindMs, 0.5)}, p99 ${percentileOf(behindMs, 0.99)}, max ${behindMs[behindMs.length - 1] ?? 0}`,
  );
  await engine.stop();
  readModel.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
