/**
 * A feed worker process whose process can be made to stand still, for the paused-worker test:
 *
 *   node --require ./test/chaos/swc-register.cjs test/support/paused-feed-worker.ts \
 *     --ledger URL --provider URL --worker-id NAME --lease-ms N [--pause-file PATH]
 *
 * The SDK runs unbuilt (src/client), exactly as a runtime would use it. With `--pause-file`, the
 * first time the ledger's answer to a dispatch arrives, the whole event loop blocks (Atomics.wait,
 * no timer or I/O runs) until that file exists: a GC pause or a VM stop between the grant and the
 * call, at the worst moment, with no hook in the SDK. Each line of output is one JSON object.
 */
import { existsSync } from 'node:fs';
import { LedgerClient, LedgerWorker } from '@recovery-ledger/client';
import { CREATE_INVOICE, invoiceTools } from '../../examples/invoice-tools';
import { flag, integerFlag, log } from '../../examples/example-cli';

const PAUSE_LIMIT_MS = 60_000;

/** Blocks the thread until `file` exists (or the limit passes): nothing else in the process runs. */
function standStill(file: string): number {
  const cell = new Int32Array(new SharedArrayBuffer(4));
  const started = Date.now();
  while (!existsSync(file) && Date.now() - started < PAUSE_LIMIT_MS) Atomics.wait(cell, 0, 0, 20);
  return Date.now() - started;
}

function pausingFetch(pauseFile: string | undefined): typeof fetch {
  let paused = false;
  return async (input, init) => {
    const response = await fetch(input, init);
    const body = typeof init?.body === 'string' ? init.body : '';
    if (pauseFile && !paused && body.includes('"AttemptDispatched"')) {
      paused = true;
      log({ event: 'pausing', after: 'dispatch answer' });
      log({ event: 'resumed', paused_ms: standStill(pauseFile) });
    }
    return response;
  };
}

async function main(): Promise<void> {
  const ledger = new LedgerClient({ baseUrl: flag('ledger') as string, fetch: pausingFetch(flag('pause-file')) });
  const { createInvoice, lookup } = invoiceTools(flag('provider') as string, { timeoutMs: 5_000 });
  const stop = new AbortController();
  process.once('SIGTERM', () => stop.abort());
  const worker = new LedgerWorker(ledger, {
    tools: { [CREATE_INVOICE]: { call: createInvoice, lookup } },
    concurrency: 1,
    leaseMs: integerFlag('lease-ms', 1_000),
    waitMs: 200,
    workerId: flag('worker-id') as string,
    signal: stop.signal,
    onEvent: (event) => log({ ...event, event: event.type }),
  });
  await worker.run();
}

main().catch((error: unknown) => {
  process.stderr.write(`paused feed worker failed: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
