/**
 * A worker that stands still (GC, a VM stop, SIGSTOP) must not write after the ledger has let
 * another worker conclude that its attempt never happened, and where it still can (a tool whose
 * HTTP client the SDK does not check at the socket), the ledger says so (docs/reliability.md "When
 * an attempt may still reach the provider", "How close the check sits to the write";
 * docs/contract.md §4.9). The built service over real HTTP, the example provider as a real process
 * with its idempotency off (a second create would be a second invoice in its own count) and idle
 * connections kept open for a minute, and the SDK's LedgerWorker in real worker processes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { LedgerClient, LedgerWorker, type WorkerEvent } from '@recovery-ledger/client';
import { VERIFICATION_TOOL, invoiceTools } from '../../examples/invoice-tools';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { until } from '../support/until';
import { CREATE_INVOICE, INVOICE, startProviderProcess, type ProviderProcess } from '../support/work-feed-harness';

jest.setTimeout(120_000);

const ROOT = resolve(__dirname, '../..');
const REGISTER = join(ROOT, 'test/chaos/swc-register.cjs');
const SCRIPT = join(ROOT, 'test/support/paused-feed-worker.ts');

let ledger: LedgerProcess;
let provider: ProviderProcess;
let client: LedgerClient;
let scratch: string;
let receiver: Server;
const hooks: Array<{ type: string; data: { operation_ref?: string } }> = [];
const children: ChildProcess[] = [];
const ref = (label: string) => `run_paused/${label}-${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  // A pooled connection to the provider outlives the pauses below, as it does for a busy worker.
  provider = await startProviderProcess(['--no-idempotency', '--keep-alive-ms', '60000']);
  receiver = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    request.on('end', () => {
      hooks.push(JSON.parse(body) as (typeof hooks)[number]);
      response.writeHead(204).end();
    });
  });
  await new Promise<void>((resolveListen) => receiver.listen(0, '127.0.0.1', resolveListen));
  // The webhook receiver is on loopback, which a production ledger refuses as a target.
  ledger = await startLedger({ env: { LEDGER_RATE_LIMIT_PER_MINUTE: '1000000', LEDGER_WEBHOOK_ALLOW_PRIVATE: '1' } });
  client = new LedgerClient({ baseUrl: ledger.baseUrl });
  scratch = mkdtempSync(join(tmpdir(), 'paused-worker-'));
});
afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  await Promise.all([ledger?.stop(), provider?.stop()]);
  ledger?.cleanup();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
  await new Promise((resolveClose) => receiver?.close(resolveClose));
});

interface WorkerProcess {
  lines(): Array<Record<string, any>>;
  /** The process's state letter in /proc (`T`: stopped by a signal). */
  state(): string;
  resume(): void;
  stop(): Promise<void>;
}

function startWorker(id: string, args: string[] = []): WorkerProcess {
  const child = spawn(
    process.execPath,
    [
      '--require',
      REGISTER,
      SCRIPT,
      '--ledger',
      ledger.baseUrl,
      '--provider',
      provider.url,
      '--worker-id',
      id,
      '--lease-ms',
      '1000',
      ...args,
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.push(child);
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = new Promise<void>((resolveExit) => child.once('exit', () => resolveExit()));
  return {
    lines: () =>
      output
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, any>),
    state: () => /\) (\S)/.exec(readFileSync(`/proc/${child.pid}/stat`, 'utf8'))?.[1] ?? '?',
    resume: () => {
      if (child.exitCode === null) child.kill('SIGCONT');
    },
    stop: async () => {
      if (child.exitCode === null) {
        child.kill('SIGCONT');
        child.kill('SIGTERM');
      }
      await exited;
    },
  };
}

const linesOf = (worker: WorkerProcess, event: string) => async () =>
  worker.lines().filter((line) => line.event === event);
const some = (lines: unknown[]) => lines.length > 0;

const start = (operationRef: string, policy: Record<string, number>) =>
  client.startStep({
    operationRef,
    runId: 'run_paused',
    tool: CREATE_INVOICE,
    input: INVOICE,
    policy: { verification_tool: VERIFICATION_TOOL, ...policy },
  });

describe('a worker paused between its grant and its call', () => {
  it('does not call when it wakes after another worker verified, retried and created: one invoice', async () => {
    const operationRef = ref('grant');
    const pauseFile = join(scratch, `${randomUUID()}.resume`);
    const paused = startWorker('w-paused', ['--pause-file', pauseFile]);
    let other: WorkerProcess | undefined;
    try {
      await until(linesOf(paused, 'started'), some, 'the paused worker to start');
      await start(operationRef, { dispatch_timeout_ms: 1_000, consistency_window_ms: 1_000 });
      // Granted attempt 1, and now standing still before its call: no renewal, no timer, nothing.
      await until(linesOf(paused, 'pausing'), some, 'the first worker to be granted attempt 1');
      expect(await client.getOperation(operationRef)).toMatchObject({ status: 'dispatched', current_attempt: 1 });

      // The other worker finds the dispatch silent, finds no invoice, and (once the lookup is
      // conclusive) is granted attempt 2 and creates the invoice.
      other = startWorker('w-other');
      await until(
        () => provider.stats(),
        (stats) => (stats.create_requests[operationRef] ?? 0) >= 1,
        'the other worker to create',
        60_000,
      );
      await until(
        () => client.getOperation(operationRef),
        (state) => state.status === 'succeeded',
        'the step to succeed',
      );

      // The first worker wakes, its window long gone.
      writeFileSync(pauseFile, '');
      await until(linesOf(paused, 'recorded'), some, 'the paused worker to record its attempt');
    } finally {
      writeFileSync(pauseFile, '');
      await Promise.all([paused.stop(), other?.stop()]);
    }

    // The provider's own count: one create request, one invoice.
    const stats = await provider.stats();
    expect(stats.create_requests[operationRef]).toBe(1);
    expect(stats.created[operationRef]).toBe(1);
    // It did not call: its envelope came after the step had moved on, and is refused as late.
    const [recorded] = await linesOf(paused, 'recorded')();
    expect(recorded).toMatchObject({
      operation_ref: operationRef,
      attempt: 1,
      tool_called: false,
      code: 'ATTEMPT_MISMATCH',
    });

    const state = await client.getOperation(operationRef);
    expect(state).toMatchObject({ status: 'succeeded', attempts_used: 2 });
    expect(state.possible_duplicate).toBeUndefined();

    const events = (await client.getEvents(operationRef)).events;
    const first = events.find((event) => event.type === 'AttemptDispatched' && event.data.attempt === 1)!;
    // The paused worker declared the rest of its lease as its call window.
    expect(first.data.call_window_ms).toBeLessThanOrEqual(1_000);
    const deadline = Date.parse(first.data.call_deadline as string);
    // The other worker's not_found counted only a consistency window after attempt 1's deadline.
    const conclusive = events.find(
      (event) => event.type === 'VerificationRecorded' && event.data.outcome === 'not_found',
    )!;
    expect(Date.parse(conclusive.recorded_at)).toBeGreaterThanOrEqual(deadline + 1_000);
    // What the paused worker said when it woke is kept as evidence: nothing was sent.
    const late = events.find((event) => event.type === 'LateOutcomeRecorded')!;
    expect(late.data).toMatchObject({
      attempt: 1,
      possible_duplicate: false,
      envelope: { code: 'CALL_WINDOW_PASSED', commit_state: 'not_committed' },
    });
  });
});

describe('a worker paused between taking an item and dispatching it', () => {
  it('asks the ledger for its lease again first, and dispatches with a call window left to call in', async () => {
    const operationRef = ref('item');
    const { createInvoice, lookup } = invoiceTools(provider.url, { timeoutMs: 5_000 });
    const stop = new AbortController();
    const events: WorkerEvent[] = [];
    let pausedOnce = false;
    const worker = new LedgerWorker(client, {
      tools: { [CREATE_INVOICE]: { call: createInvoice, lookup } },
      concurrency: 1,
      leaseMs: 1_000,
      waitMs: 200,
      workerId: 'w-slow-start',
      signal: stop.signal,
      onEvent: (event) => {
        events.push(event);
        // The process stands still for longer than the lease, right after the item arrived.
        if (event.type === 'item' && event.operation_ref === operationRef && !pausedOnce) {
          pausedOnce = true;
          const cell = new Int32Array(new SharedArrayBuffer(4));
          Atomics.wait(cell, 0, 0, 1_500);
        }
      },
    });
    const running = worker.run();
    try {
      await start(operationRef, { dispatch_timeout_ms: 10_000, consistency_window_ms: 0 });
      await until(
        () => client.getOperation(operationRef),
        (state) => state.status === 'succeeded',
        'the step to succeed',
      );
    } finally {
      stop.abort();
      await running;
    }
    const stored = (await client.getEvents(operationRef)).events;
    const dispatches = stored.filter((event) => event.type === 'AttemptDispatched');
    expect(dispatches).toHaveLength(1);
    // Dispatched under a lease just renewed: the ledger granted a window to call in (under the
    // expired one it would have been none).
    const windowMs = Date.parse(dispatches[0].data.call_deadline as string) - Date.parse(dispatches[0].recorded_at);
    expect(windowMs).toBeGreaterThan(0);
    expect(events.filter((event) => event.type === 'error' || event.type === 'lease_lost')).toEqual([]);
    expect((await provider.stats()).created[operationRef]).toBe(1);
  });
});

describe('a worker stopped (SIGSTOP) in its tool call, after the SDK checked its window, with a kept-alive connection to the provider', () => {
  /**
   * Worker 1 is granted attempt 1, talks to the provider once (a connection kept alive in the pool)
   * and stops itself before its create. Worker 2 finds the dispatch silent, verifies not_found once
   * that is conclusive, is granted attempt 2 and creates. Then worker 1 continues.
   */
  async function stoppedWhileAnotherCreates(operationRef: string, args: string[], beforeResume = async () => {}) {
    const stopped = startWorker(`w-stopped-${operationRef.slice(-8)}`, ['--stop-in-tool', ...args]);
    let other: WorkerProcess | undefined;
    try {
      await until(linesOf(stopped, 'started'), some, 'the first worker to start');
      await start(operationRef, { dispatch_timeout_ms: 1_000, consistency_window_ms: 1_000 });
      await until(linesOf(stopped, 'stopping'), some, 'the first worker to reach its tool call');
      await until(
        async () => stopped.state(),
        (state) => state === 'T',
        'the first worker to be stopped',
      );

      other = startWorker(`w-other-${operationRef.slice(-8)}`);
      await until(
        () => client.getOperation(operationRef),
        (state) => state.status === 'succeeded',
        'the other worker to create and the step to succeed',
        60_000,
      );
      expect((await provider.stats()).created[operationRef]).toBe(1);
      await beforeResume();
      stopped.resume();
      await until(linesOf(stopped, 'recorded'), some, 'the first worker to record its attempt');
    } finally {
      await Promise.all([stopped.stop(), other?.stop()]);
    }
    const [recorded] = await linesOf(stopped, 'recorded')();
    const events = (await client.getEvents(operationRef)).events;
    return { recorded, events, stats: await provider.stats() };
  }

  it('through callHttpTool: the late create never reaches the provider, one invoice', async () => {
    const operationRef = ref('stopped');
    const { recorded, events, stats } = await stoppedWhileAnotherCreates(operationRef, []);

    // Before the write-once connection the pooled socket wrote the create on SIGCONT: two requests, two invoices.
    expect(stats.create_requests[operationRef]).toBe(1);
    expect(stats.created[operationRef]).toBe(1);
    expect(recorded).toMatchObject({
      operation_ref: operationRef,
      attempt: 1,
      tool_called: true,
      code: 'ATTEMPT_MISMATCH',
    });
    const late = events.find((event) => event.type === 'LateOutcomeRecorded')!;
    expect(late.data).toMatchObject({
      attempt: 1,
      possible_duplicate: false,
      envelope: { code: 'CALL_WINDOW_PASSED', commit_state: 'not_committed' },
    });
    expect((await client.getOperation(operationRef)).possible_duplicate).toBeUndefined();
  });

  it('through a fetch of the tool’s own: the late create may reach the provider, and the ledger shows the possible duplicate in the state, triage and a webhook', async () => {
    const subscribed = await fetch(`${ledger.baseUrl}/v1/admin/webhooks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`,
        kinds: ['operation.possible_duplicate'],
      }),
    });
    expect(subscribed.status).toBe(201);
    const operationRef = ref('own-http');
    // The provider answers the late create slowly: the SDK's window signal cuts the call off after
    // it left, so the worker reports an unknown outcome rather than a success.
    const { recorded, events, stats } = await stoppedWhileAnotherCreates(operationRef, ['--own-http'], () =>
      provider.inject({ operation_ref: operationRef, fault: { kind: 'slow', delay_ms: 3_000 }, times: 1 }),
    );

    expect(recorded).toMatchObject({ operation_ref: operationRef, attempt: 1, tool_called: true });
    const late = events.find((event) => event.type === 'LateOutcomeRecorded')!;
    expect(late.data).toMatchObject({ attempt: 1, possible_duplicate: true, envelope: { commit_state: 'unknown' } });
    // What the provider holds: the pooled connection wrote the late create.
    expect(stats.create_requests[operationRef]).toBe(2);
    const state = await client.getOperation(operationRef);
    expect(state).toMatchObject({ status: 'succeeded', possible_duplicate: { attempt: 1 } });
    const position = Math.max(...events.map((event) => event.position));
    const triage = (await (
      await fetch(`${ledger.baseUrl}/v1/triage?kind=possible_duplicate&wait_for_position=${position}`)
    ).json()) as { items: unknown[] };
    expect(triage.items).toEqual([
      expect.objectContaining({ kind: 'possible_duplicate', operation_ref: operationRef }),
    ]);
    await until(
      async () => hooks.filter((hook) => hook.data?.operation_ref === operationRef),
      (delivered) => delivered.length > 0,
      'the operation.possible_duplicate webhook',
    );
    expect(hooks.find((hook) => hook.data?.operation_ref === operationRef)).toMatchObject({
      type: 'operation.possible_duplicate',
    });
  });
});
