/**
 * A worker process on the ledger's work feed: it plugs the invoice tool and its lookup into the
 * SDK's LedgerWorker, and the ledger tells it what is due. Safe to kill at any point; SIGTERM or
 * SIGINT stops it cleanly (items in hand finish first).
 *
 *   node dist/examples/feed-worker.js [--ledger http://127.0.0.1:3000] [--provider http://127.0.0.1:4010]
 *     [--concurrency 4] [--worker-id name] [--lease-ms 30000] [--tool-timeout-ms 5000] [--quiet]
 *
 * Steps are started elsewhere with one call each (examples/start-invoices.ts, or
 * `ledger.startStep(...)` in a runtime). Each line of output is one JSON object.
 */
import { LedgerClient, LedgerWorker } from '@recovery-ledger/client';
import { CREATE_INVOICE, invoiceTools } from './invoice-tools';
import { exitOnHelp, flag, integerFlag, log } from './example-cli';

async function main(): Promise<void> {
  exitOnHelp(__filename);
  const ledger = new LedgerClient({
    baseUrl: flag('ledger', 'http://127.0.0.1:3000') as string,
    apiKey: process.env.LEDGER_API_KEY,
    timeoutMs: 10_000,
  });
  const { createInvoice, lookup } = invoiceTools(flag('provider', 'http://127.0.0.1:4010') as string, {
    timeoutMs: integerFlag('tool-timeout-ms', 5000),
  });
  const stop = new AbortController();
  process.once('SIGTERM', () => stop.abort());
  process.once('SIGINT', () => stop.abort());
  const quiet = process.argv.includes('--quiet');
  const worker = new LedgerWorker(ledger, {
    tools: { [CREATE_INVOICE]: { call: createInvoice, lookup } },
    concurrency: integerFlag('concurrency', 4),
    leaseMs: integerFlag('lease-ms', 30_000),
    waitMs: integerFlag('wait-ms', 5_000),
    signal: stop.signal,
    ...(flag('worker-id') ? { workerId: flag('worker-id') } : {}),
    onEvent: (event) => {
      if (!quiet || event.type === 'started' || event.type === 'stopped' || event.type === 'error') log(event);
    },
  });
  await worker.run();
}

main().catch((error: unknown) => {
  process.stderr.write(`feed worker failed: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
