/**
 * Writes as MCP tasks (docs/mcp-gateway.md, "Writes as tasks"): the real MCP SDK client asks for a
 * task through its experimental task API, the built CLI is the gateway, the example invoice MCP
 * server the upstream, and the built ledger answers over real HTTP. What the host saw is the task's
 * messages; what the upstream saw is counted by the upstream itself.
 */
import { CallToolResultSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { LedgerClient } from '@recovery-ledger/client';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { invoiceGatewayConfig, startHost, workspace, type Host, type Workspace } from '../support/mcp-gateway-harness';
import { until } from '../support/until';
import { setTimeout as sleep } from 'node:timers/promises';

const WINDOW_MS = 2500;
const TIMEOUT_MS = 1200;

interface TaskRun {
  taskId: string;
  statuses: { status: string; statusMessage?: string }[];
  result?: CallToolResult;
  error?: unknown;
}

describe('MCP gateway: a write called as a task', () => {
  let ledgerProcess: LedgerProcess;
  let ledger: LedgerClient;
  let space: Workspace;
  let host: Host;
  let counter = 0;

  beforeAll(async () => {
    ledgerProcess = await startLedger();
    ledger = new LedgerClient({ baseUrl: ledgerProcess.baseUrl });
    space = workspace();
    space.writeConfig(
      invoiceGatewayConfig(space, { ledgerUrl: ledgerProcess.baseUrl, windowMs: WINDOW_MS, timeoutMs: TIMEOUT_MS }),
    );
    host = await startHost(space.configFile);
  });

  afterAll(async () => {
    await host?.close();
    await ledgerProcess?.stop();
    ledgerProcess?.cleanup();
    space?.cleanup();
  });

  const nextRef = (label: string) => `run_task/${label}_${++counter}`;
  const invoice = (ref: string, extra: Record<string, unknown> = {}) => ({
    customer_id: `cus_${counter}`,
    amount_cents: 1200,
    currency: 'EUR',
    operation_ref: ref,
    ...extra,
  });

  /** Calls a tool as a task and follows it to its end through the SDK's own polling. */
  async function asTask(name: string, args: Record<string, unknown>, onCreated?: (id: string) => void, ttl = 60_000) {
    const run: TaskRun = { taskId: '', statuses: [] };
    const stream = host.client.experimental.tasks.callToolStream({ name, arguments: args }, CallToolResultSchema, {
      task: { ttl },
      timeout: 30_000,
    });
    for await (const message of stream) {
      if (message.type === 'taskCreated') {
        run.taskId = message.task.taskId;
        run.statuses.push({ status: message.task.status });
        onCreated?.(run.taskId);
      } else if (message.type === 'taskStatus') {
        run.statuses.push({ status: message.task.status, statusMessage: message.task.statusMessage });
      } else if (message.type === 'result') {
        run.result = message.result as CallToolResult;
      } else if (message.type === 'error') {
        run.error = message.error;
      }
    }
    return run;
  }
  const envelopeOf = (run: TaskRun) => run.result?.structuredContent as any;
  const finalStatus = async (run: TaskRun) => (await host.client.experimental.tasks.getTask(run.taskId)).status;

  it('tools/list: the write tools may run as tasks; the read tools pass on what the upstream says', async () => {
    const { tools } = await host.client.listTools();
    const byName = Object.fromEntries(tools.map((tool) => [tool.name, tool]));
    expect(byName.create_invoice.execution).toEqual({ taskSupport: 'optional' });
    expect(byName.void_invoice.execution).toEqual({ taskSupport: 'optional' });
    expect(byName.get_invoice.execution?.taskSupport).not.toBe('optional');
  });

  it('answers at once with a task whose id says nothing of the operation; it completes with one invoice', async () => {
    const ref = nextRef('plain');
    const run = await asTask('create_invoice', invoice(ref));
    expect(run.error).toBeUndefined();
    expect(run.taskId).toMatch(/^[0-9a-f]{32}$/);
    expect(run.statuses[0].status).toBe('working');
    expect(envelopeOf(run)).toMatchObject({ ok: true, commit_state: 'committed', operation_ref: ref });
    expect(await finalStatus(run)).toBe('completed');
    expect(space.createCalls(ref)).toBe(1);
    expect(space.invoicesFor(ref)).toBe(1);
  });

  it('a timeout after the provider committed: verified by operation_ref, completed as that success, one invoice', async () => {
    const ref = nextRef('committed');
    space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'timeout-after-commit' } });
    const run = await asTask('create_invoice', invoice(ref));
    const [stored] = space.state.invoices().filter((item) => item.operation_ref === ref);
    expect(envelopeOf(run)).toMatchObject({ ok: true, verification: { evidence_ref: stored.id } });
    expect(await finalStatus(run)).toBe('completed');
    expect(space.createCalls(ref)).toBe(1);
  });

  it('a timeout before anything committed: the task stays working while it verifies, sends again only after a not_found, one invoice', async () => {
    const ref = nextRef('lost');
    space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'hang' } });
    const run = await asTask('create_invoice', invoice(ref));
    const said = run.statuses.map((status) => status.statusMessage ?? '').join('\n');
    expect(said).toMatch(/create_invoice: the outcome is unknown \(\w+\); verifying it by operation_ref at /);
    expect(run.statuses.slice(0, -1).every((status) => status.status === 'working')).toBe(true);
    expect(envelopeOf(run)).toMatchObject({ ok: true, commit_state: 'committed' });
    expect(await finalStatus(run)).toBe('completed');
    expect(space.createCalls(ref)).toBe(2);
    expect(space.invoicesFor(ref)).toBe(1);
    // For docs/mcp-gateway.md, "Writes as tasks": what the host saw.
    process.stdout.write(`${JSON.stringify({ taskId: run.taskId, statuses: run.statuses })}\n`);
    // The second dispatch came only after a not_found recorded past the window.
    const types = (await ledger.getEvents(ref)).events.map((event) => event.type);
    const notFound = types.indexOf('VerificationRecorded');
    expect(notFound).toBeGreaterThan(-1);
    expect(types.lastIndexOf('AttemptDispatched')).toBeGreaterThan(notFound);
  });

  it('a rate limit: the task waits until not_before and sends the same operation again once', async () => {
    const ref = nextRef('limited');
    space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'rate-limit', retry_after_ms: 700 } });
    const run = await asTask('create_invoice', invoice(ref));
    const waiting = run.statuses.find((status) => /waiting until/.test(status.statusMessage ?? ''));
    expect(waiting?.statusMessage).toMatch(/before the same operation is sent again/);
    expect(envelopeOf(run)).toMatchObject({ ok: true });
    expect(space.createCalls(ref)).toBe(2);
    expect(space.invoicesFor(ref)).toBe(1);
    const events = (await ledger.getEvents(ref)).events;
    const limited = events.find((event) => event.type === 'EnvelopeRecorded')?.data.envelope as any;
    const second = events.filter((event) => event.type === 'AttemptDispatched')[1];
    expect(Date.parse(second.recorded_at)).toBeGreaterThanOrEqual(Date.parse(limited.retry.not_before));
  });

  it('a wait longer than the task may work ends it with that answer and its not_before, nothing sent again', async () => {
    const ref = nextRef('long_wait');
    space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'rate-limit', retry_after_ms: 60_000 } });
    const run = await asTask('create_invoice', invoice(ref), undefined, 10_000);
    expect(envelopeOf(run)).toMatchObject({ ok: false, code: 'RATE_LIMITED', next_action: 'wait_and_retry' });
    expect(run.result?.isError).toBe(true);
    expect(await finalStatus(run)).toBe('completed');
    expect(space.createCalls(ref)).toBe(1);
  });

  it('an approval: the task waits for an approver in the ledger, then sends the write once', async () => {
    const target = nextRef('to_void');
    const id = (await host.call('create_invoice', invoice(target))).structuredContent as any;
    const ref = nextRef('void');
    const voids = () => space.state.calls().void_invoice?.by_operation_ref[ref] ?? 0;
    let taskId = '';
    const running = asTask('void_invoice', { invoice_id: id.result.invoice.id, operation_ref: ref }, (created) => {
      taskId = created;
    });
    await until(
      async () => (taskId ? (await host.client.experimental.tasks.getTask(taskId)).statusMessage : undefined),
      (message) => /waiting for an approver/.test(message ?? ''),
      'the task to wait for an approver',
    );
    expect(voids()).toBe(0);
    await ledger.recordApproval(ref, { decision: 'granted', approver: 'alice' });
    const run = await running;
    expect(envelopeOf(run)).toMatchObject({ ok: true, result: { invoice: { status: 'void' } } });
    expect(voids()).toBe(1);
  });

  it('a refusal the model must act on ends the task with the envelope as its answer, isError as in a plain call, nothing sent again', async () => {
    const ref = nextRef('invalid');
    const run = await asTask('create_invoice', invoice(ref, { customer_id: 'not a customer' }));
    expect(envelopeOf(run)).toMatchObject({
      ok: false,
      code: 'INVALID_CUSTOMER',
      next_action: 'correct_input',
      commit_state: 'not_committed',
    });
    expect(run.result?.isError).toBe(true);
    expect(await finalStatus(run)).toBe('completed');
    expect(space.createCalls(ref)).toBe(1);
  });

  it('cancelling a task stops its waiting only: nothing more is sent, and the ledger keeps the step', async () => {
    const ref = nextRef('cancelled');
    space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'hang' } });
    let taskId = '';
    const running = asTask('create_invoice', invoice(ref), (created) => {
      taskId = created;
    });
    await until(
      async () => (taskId ? (await host.client.experimental.tasks.getTask(taskId)).statusMessage : undefined),
      (message) => /verifying it by operation_ref/.test(message ?? ''),
      'the task to verify',
    );
    await host.client.experimental.tasks.cancelTask(taskId);
    await running.catch(() => undefined);
    expect((await host.client.experimental.tasks.getTask(taskId)).status).toBe('cancelled');
    // Past the window, when the task would have verified and sent again had it not been cancelled.
    const state = await ledger.getOperation(ref);
    await sleep(Math.max(0, Date.parse(state.since ?? '') + TIMEOUT_MS + WINDOW_MS + 1_500 - Date.now()));
    expect(space.createCalls(ref)).toBe(1);
    const status = await host.call('operation_status', { operation_ref: ref });
    expect(status.structuredContent).toMatchObject({ operation_ref: ref, status: 'verifying' });
  });

  it('a read tool asked as a task is refused with an MCP error, and a plain write call is answered as before', async () => {
    const read = await asTask('get_invoice', { invoice_id: 'inv_1' });
    expect(read.result).toBeUndefined();
    expect(String((read.error as Error | undefined)?.message)).toMatch(/does not run as a task/);
    const ref = nextRef('plain_call');
    const answer = await host.call('create_invoice', invoice(ref));
    expect(answer.structuredContent).toMatchObject({ ok: true });
  });
});
