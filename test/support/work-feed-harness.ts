/**
 * What the work-feed tests share: the example invoice provider as a real process (its own counts
 * over HTTP) or on a loopback port of the test's own process, worker processes of the built
 * example, and in-process LedgerWorkers over real HTTP.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { LedgerClient, LedgerWorker, type WorkerEvent, type WorkerReport } from '@recovery-ledger/client';
import { CREATE_INVOICE, VERIFICATION_TOOL, invoiceTools } from '../../examples/invoice-tools';
import { startInvoiceProvider, type FaultRule } from '../../examples/invoice-provider/invoice-provider';

export const PROVIDER_MAIN = resolve(__dirname, '../../dist/examples/invoice-provider/main.js');
export const FEED_WORKER = resolve(__dirname, '../../dist/examples/feed-worker.js');

/** The provider's own counts and faults, as a test reads and sets them wherever the provider runs. */
export interface Provider {
  url: string;
  stats(): Promise<{ created: Record<string, number>; create_requests: Record<string, number> }>;
  inject(rule: FaultRule): Promise<void>;
  stop(): Promise<void>;
}

export interface ProviderProcess extends Provider {
  child: ChildProcess;
}

/**
 * The same provider on a loopback port of the test's process: for tests where no process of it
 * must die or stand still. `idempotency: false` is the process's `--no-idempotency`.
 */
export async function startProviderInProcess(options: { idempotency?: boolean } = {}): Promise<Provider> {
  const provider = await startInvoiceProvider(options);
  return {
    url: provider.url,
    stats: async () => ({
      created: Object.fromEntries(provider.createdCounts()),
      create_requests: Object.fromEntries(provider.createRequests()),
    }),
    inject: async (rule) => provider.inject(rule),
    stop: () => provider.close(),
  };
}

export async function startProviderProcess(args: string[] = []): Promise<ProviderProcess> {
  const child = spawn(process.execPath, [PROVIDER_MAIN, '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const url = await new Promise<string>((resolveUrl, reject) => {
    const timer = setTimeout(() => reject(new Error(`provider did not start:\n${output}`)), 15_000);
    child.stdout!.on('data', (chunk) => {
      output += chunk;
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolveUrl(match[1]);
      }
    });
    child.stderr!.on('data', (chunk) => (output += chunk));
    child.once('exit', (code) => reject(new Error(`provider exited with ${code}:\n${output}`)));
  });
  const exited = new Promise<void>((resolveExit) => child.once('exit', () => resolveExit()));
  return {
    url,
    child,
    stats: async () =>
      (await (await fetch(`${url}/__stats`)).json()) as {
        created: Record<string, number>;
        create_requests: Record<string, number>;
      },
    inject: async (rule) => {
      const response = await fetch(`${url}/__faults`, { method: 'POST', body: JSON.stringify(rule) });
      if (!response.ok) throw new Error(`fault refused: ${response.status}`);
    },
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

export interface InProcessWorker {
  id: string;
  events: WorkerEvent[];
  stop(): Promise<WorkerReport>;
}

export function runWorker(
  ledger: LedgerClient,
  providerUrl: string,
  options: { id: string; concurrency?: number; leaseMs?: number; toolTimeoutMs?: number },
): InProcessWorker {
  const { createInvoice, lookup } = invoiceTools(providerUrl, { timeoutMs: options.toolTimeoutMs ?? 800 });
  const stop = new AbortController();
  const events: WorkerEvent[] = [];
  const worker = new LedgerWorker(ledger, {
    tools: { [CREATE_INVOICE]: { call: createInvoice, lookup } },
    concurrency: options.concurrency ?? 4,
    leaseMs: options.leaseMs ?? 5_000,
    waitMs: 300,
    workerId: options.id,
    signal: stop.signal,
    onEvent: (event) => events.push(event),
  });
  const running = worker.run();
  return {
    id: options.id,
    events,
    stop: async () => {
      stop.abort();
      return running;
    },
  };
}

export interface WorkerProcess {
  child: ChildProcess;
  lines(): Array<Record<string, any>>;
  kill(signal?: NodeJS.Signals): Promise<number | null>;
}

export function startWorkerProcess(ledgerUrl: string, providerUrl: string, args: string[] = []): WorkerProcess {
  const child = spawn(process.execPath, [FEED_WORKER, '--ledger', ledgerUrl, '--provider', providerUrl, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  child.stdout!.on('data', (chunk) => (stdout += chunk));
  child.stderr!.on('data', (chunk) => (stdout += chunk));
  const exited = new Promise<number | null>((resolveExit) => child.once('exit', (code) => resolveExit(code)));
  return {
    child,
    lines: () =>
      stdout
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, any>),
    kill: async (signal = 'SIGTERM') => {
      if (child.exitCode === null) child.kill(signal);
      return exited;
    },
  };
}

export async function waitUntil<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = 20_000,
  everyMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Until the step is in one of these states (strongly consistent read of its stream). */
export function waitForStatus(ledger: LedgerClient, ref: string, statuses: readonly string[], timeoutMs = 20_000) {
  return waitUntil(
    `${ref} to be ${statuses.join(' or ')}`,
    async () => {
      const state = await ledger.getOperation(ref);
      return statuses.includes(state.status) ? state : undefined;
    },
    timeoutMs,
  );
}

export const INVOICE = { customer_id: 'cus_feed', amount_cents: 1250, currency: 'EUR' };

/** Plans an invoice step for the feed to hand out, verified by the example's lookup, `policy` over that. */
export function startInvoiceStep(
  ledger: LedgerClient,
  operationRef: string,
  runId: string,
  policy: Record<string, number | string> = {},
) {
  return ledger.startStep({
    operationRef,
    runId,
    tool: CREATE_INVOICE,
    input: INVOICE,
    policy: { verification_tool: VERIFICATION_TOOL, ...policy },
  });
}
export { CREATE_INVOICE };
