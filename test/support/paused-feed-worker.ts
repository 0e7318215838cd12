/**
 * A feed worker process whose process can be made to stand still, for the paused-worker test:
 *
 *   node --require ./test/chaos/swc-register.cjs test/support/paused-feed-worker.ts \
 *     --ledger URL --provider URL --worker-id NAME --lease-ms N [--pause-file PATH]
 *     [--stop-in-tool] [--own-http]
 *
 * The SDK runs unbuilt (src/client), exactly as a runtime would use it. With `--pause-file`, the
 * first time the ledger's answer to a dispatch arrives, the whole event loop blocks (Atomics.wait,
 * no timer or I/O runs) until that file exists: a GC pause or a VM stop between the grant and the
 * call, at the worst moment, with no hook in the SDK. With `--stop-in-tool`, the first tool call
 * first talks to the provider (so a kept-alive connection to it waits in the pool), then the process
 * stops itself with SIGSTOP, after the SDK's window check and before its request: the test sends
 * SIGCONT. With `--own-http` the create is the tool's own fetch, which the SDK cannot check at the
 * socket (the call may reach the provider late). Each line of output is one JSON object.
 */
import { existsSync } from 'node:fs';
import {
  LedgerClient,
  LedgerWorker,
  normalizeHttpResponse,
  type ToolCall,
  type ToolCallContext,
} from '@recovery-ledger/client';
import { CREATE_INVOICE, VERIFICATION_TOOL, invoiceTools, type InvoiceInput } from '../../examples/invoice-tools';
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

/** A create of the tool's own: fetch (its pool, its keep-alive) with the SDK's signal, no check at the socket. */
function ownHttpCreate(provider: string): ToolCall<InvoiceInput> {
  return async (input: InvoiceInput, context: ToolCallContext) => {
    const response = await fetch(`${provider}/invoices`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': context.idempotencyKey },
      body: JSON.stringify(input),
      ...(context.signal ? { signal: context.signal } : {}),
    });
    const text = await response.text();
    return normalizeHttpResponse(
      { status: response.status, headers: response.headers, body: text === '' ? undefined : JSON.parse(text) },
      {
        operationRef: context.operationRef,
        sideEffect: context.sideEffect,
        now: new Date(),
        verificationTool: VERIFICATION_TOOL,
        evidenceRef: (body) => (body as { id?: string } | undefined)?.id,
      },
    );
  };
}

/** The first call: a request to the provider (a connection kept alive in the pool), then SIGSTOP. */
function stoppingOnce(provider: string, create: ToolCall<InvoiceInput>): ToolCall<InvoiceInput> {
  let stopped = false;
  return async (input, context) => {
    if (!stopped) {
      stopped = true;
      await (await fetch(`${provider}/__health`)).text();
      // The connection goes back to the pool, idle, as between a busy worker's calls.
      await new Promise((resolveIdle) => setTimeout(resolveIdle, 50));
      log({ event: 'stopping', operation_ref: context.operationRef, attempt: context.attempt });
      process.kill(process.pid, 'SIGSTOP');
      log({ event: 'continued' });
    }
    return create(input, context);
  };
}

async function main(): Promise<void> {
  const ledger = new LedgerClient({ baseUrl: flag('ledger') as string, fetch: pausingFetch(flag('pause-file')) });
  const provider = flag('provider') as string;
  const tools = invoiceTools(provider, { timeoutMs: 5_000 });
  const { lookup } = tools;
  const created = process.argv.includes('--own-http') ? ownHttpCreate(provider) : tools.createInvoice;
  const createInvoice = process.argv.includes('--stop-in-tool') ? stoppingOnce(provider, created) : created;
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
