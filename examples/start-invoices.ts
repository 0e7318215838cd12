/**
 * Starts invoice steps with one call each (`startStep`): the ledger's work feed then hands them to
 * whichever feed worker has the tool (examples/feed-worker.ts), which drives each one to its end.
 *
 *   node dist/examples/start-invoices.js --run run_feed --count 3 [--ledger http://127.0.0.1:3000]
 *     [--dispatch-timeout-ms 60000] [--window-ms 30000]
 */
import { LedgerClient } from '@recovery-ledger/client';
import { CREATE_INVOICE, VERIFICATION_TOOL } from './invoice-tools';
import { exitOnHelp } from './example-cli';

function flag(name: string, fallback?: string): string | undefined {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? process.argv[index + 1] : fallback;
}

async function main(): Promise<void> {
  exitOnHelp(__filename);
  const ledger = new LedgerClient({
    baseUrl: flag('ledger', 'http://127.0.0.1:3000') as string,
    apiKey: process.env.LEDGER_API_KEY,
  });
  const run = flag('run', 'run_feed') as string;
  const count = Number(flag('count', '3'));
  for (let index = 1; index <= count; index++) {
    const answer = await ledger.startStep({
      operationRef: `${run}/invoice_${index}`,
      runId: run,
      tool: CREATE_INVOICE,
      input: { customer_id: `cus_${index}`, amount_cents: 1000 * index, currency: 'EUR' },
      policy: {
        verification_tool: VERIFICATION_TOOL,
        dispatch_timeout_ms: Number(flag('dispatch-timeout-ms', '60000')),
        consistency_window_ms: Number(flag('window-ms', '30000')),
      },
    });
    process.stdout.write(
      `${JSON.stringify({ started: answer.state.operation_ref, status: answer.state.status, directive: answer.directive })}\n`,
    );
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`start failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
