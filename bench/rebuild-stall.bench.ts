/**
 * How long tenant A's admin rebuild stalls tenant B's reads: a log of `events` events of tenant A
 * is written through the real command path, the built service is started on it, and while A's
 * admin rebuilds every projection, B's runtime reads its own operation in a closed loop. Printed:
 * the longest and the 99th-percentile latency of B's reads during the rebuild, beside the same
 * reads with no rebuild running (same process, same run).
 *
 *   npm run build && node dist/bench/rebuild-stall.bench.js [events=64000]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { randomUUID } from 'node:crypto';
import { SqliteEventStore } from '../src/adapters/sqlite/sqlite-event-store.adapter';
import { ledgerOver, percentileOf, runOperation } from './ledger-workload';
import { startLedger } from './support/processes';

const target = Number(process.argv[2] ?? 64_000);
const ADMIN_A = 'stall-admin-key-acme-000000001';
const RUNTIME_B = 'stall-runtime-key-globex-00001';

async function writeLog(file: string): Promise<number> {
  const store = SqliteEventStore.open({ file });
  const ledger = ledgerOver(store);
  let next = 0;
  const worker = async () => {
    while ((await store.headPosition()) < target) await runOperation(ledger, next++, 'acme');
  };
  await Promise.all(Array.from({ length: 500 }, worker));
  const head = await store.headPosition();
  await store.close();
  return head;
}

async function readLoop(baseUrl: string, ref: string, until: () => boolean): Promise<number[]> {
  const latencies: number[] = [];
  while (!until()) {
    const started = performance.now();
    const response = await fetch(`${baseUrl}/v1/operations/${encodeURIComponent(ref)}`, {
      headers: { authorization: `Bearer ${RUNTIME_B}` },
    });
    await response.arrayBuffer();
    if (response.status !== 200) throw new Error(`tenant B's read answered ${response.status}`);
    latencies.push(performance.now() - started);
  }
  return latencies.sort((a, b) => a - b);
}

const summary = (latencies: number[]) =>
  `${latencies.length} reads, p50 ${percentileOf(latencies, 0.5).toFixed(1)} ms, p99 ${percentileOf(latencies, 0.99).toFixed(1)} ms, max ${latencies[latencies.length - 1].toFixed(1)} ms`;

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-stall-bench-'));
  try {
    const head = await writeLog(join(dir, 'events.sqlite'));
    console.log(`log: ${head} events of tenant A`);
    const service = await startLedger(dir, { LEDGER_API_KEYS: `${ADMIN_A}:admin:acme,${RUNTIME_B}:runtime:globex` });
    try {
      const ref = 'run_b/step_1';
      const plan = {
        events: [
          {
            event_id: randomUUID(),
            type: 'StepPlanned',
            data: { run_id: 'run_b', tool: 'create_invoice', side_effect: 'write', input_hash: 'h1' },
          },
        ],
      };
      const planned = await fetch(`${service.baseUrl}/v1/operations/${encodeURIComponent(ref)}/events`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${RUNTIME_B}` },
        body: JSON.stringify(plan),
      });
      const position = ((await planned.json()) as { position: number }).position;
      // Waits in steps the service allows (wait_timeout_ms is bounded), until the read models are at `position`.
      const caughtUp = async () => {
        for (;;) {
          const answer = await fetch(
            `${service.baseUrl}/v1/recovery?wait_for_position=${position}&wait_timeout_ms=5000`,
            { headers: { authorization: `Bearer ${ADMIN_A}` } },
          );
          await answer.arrayBuffer();
          if (answer.status === 200) return;
          if (answer.status !== 503) throw new Error(`waiting for the projections answered ${answer.status}`);
        }
      };
      await caughtUp();

      const quietEnd = performance.now() + 3_000;
      const quiet = await readLoop(service.baseUrl, ref, () => performance.now() > quietEnd);
      console.log(`tenant B, no rebuild:      ${summary(quiet)}`);

      let rebuilding = true;
      const started = performance.now();
      const rebuild = await fetch(`${service.baseUrl}/v1/admin/projections/rebuild`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_A}` },
      });
      if (rebuild.status !== 202) throw new Error(`rebuild answered ${rebuild.status}`);
      // The reset happens between two live batches: wait until the read models show it, then
      // until they are back at the head.
      const done = (async () => {
        for (let tries = 0; tries < 200; tries++) {
          const answer = await fetch(`${service.baseUrl}/v1/recovery`, {
            headers: { authorization: `Bearer ${ADMIN_A}` },
          });
          const seen = ((await answer.json()) as { as_of_position: number }).as_of_position;
          if (seen < position) break;
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        await caughtUp();
        rebuilding = false;
      })();
      const during = await readLoop(service.baseUrl, ref, () => !rebuilding);
      await done;
      console.log(
        `tenant B, during rebuild:  ${summary(during)} (rebuild of ${head} events took ${((performance.now() - started) / 1000).toFixed(1)} s)`,
      );
    } finally {
      await service.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
