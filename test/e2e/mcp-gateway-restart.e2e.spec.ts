/**
 * The gateway killed (SIGKILL) in the middle of a write and started again: the new process asks
 * the ledger what was in flight (GET /v1/recovery) and verifies it by the same operation_ref
 * before anything is sent again. Real processes throughout: host client, gateway CLI, invoice MCP
 * server, ledger.
 */
import { LedgerClient } from '@recovery-ledger/client';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { invoiceGatewayConfig, startHost, workspace, type Host, type Workspace } from '../support/mcp-gateway-harness';
import { setTimeout as sleep } from 'node:timers/promises';
import { untilTrue as until } from '../support/until';

const WINDOW_MS = 12_000;
// The call is still open upstream when the gateway dies; the window must outlast it (the gateway refuses otherwise).
const TIMEOUT_MS = 4000;

describe('MCP gateway: killed mid-call and restarted, it verifies instead of re-sending', () => {
  let ledgerProcess: LedgerProcess;
  let ledger: LedgerClient;
  let space: Workspace;
  const hosts: Host[] = [];

  beforeAll(async () => {
    ledgerProcess = await startLedger();
    ledger = new LedgerClient({ baseUrl: ledgerProcess.baseUrl });
    space = workspace();
    space.writeConfig(
      invoiceGatewayConfig(space, { ledgerUrl: ledgerProcess.baseUrl, windowMs: WINDOW_MS, timeoutMs: TIMEOUT_MS }),
    );
  });

  afterAll(async () => {
    for (const host of hosts) await host.close().catch(() => undefined);
    await ledgerProcess?.stop();
    ledgerProcess?.cleanup();
    space?.cleanup();
  });

  async function host(): Promise<Host> {
    const started = await startHost(space.configFile);
    hosts.push(started);
    return started;
  }

  /** Starts a create through a first gateway, waits until the upstream has it, and SIGKILLs the gateway. */
  async function killMidCall(ref: string): Promise<void> {
    const first = await host();
    const pending = first.call('create_invoice', {
      customer_id: 'cus_7',
      amount_cents: 700,
      currency: 'EUR',
      operation_ref: ref,
    });
    pending.catch(() => undefined);
    await until('the upstream to receive the create', () => space.createCalls(ref) === 1);
    await until(
      'the ledger to show the attempt in flight',
      async () => (await ledger.getOperation(ref)).status === 'dispatched',
    );
    process.kill(first.pid, 'SIGKILL');
    await expect(pending).rejects.toThrow();
  }

  const dispatches = async (ref: string) =>
    (await ledger.getEvents(ref)).events.filter((event) => event.type === 'AttemptDispatched').length;

  it('the write had committed: the restarted gateway proves it by lookup, and the model gets that success without a second send', async () => {
    const ref = 'run_restart/committed';
    space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'timeout-after-commit' } });
    await killMidCall(ref);
    expect(space.invoicesFor(ref)).toBe(1);

    const second = await host();
    await until('recovery to settle the step', async () => (await ledger.getOperation(ref)).status === 'succeeded');
    const events = (await ledger.getEvents(ref)).events;
    const invoice = space.state.invoices().find((item) => item.operation_ref === ref);
    expect(events.find((event) => event.type === 'VerificationRecorded')?.data).toMatchObject({
      outcome: 'found_committed',
      evidence_ref: invoice?.id,
    });
    expect(second.stderr()).toContain('"event":"recovered"');

    const answer = await second.call('create_invoice', {
      customer_id: 'cus_7',
      amount_cents: 700,
      currency: 'EUR',
      operation_ref: ref,
    });
    expect(answer.structuredContent).toMatchObject({
      ok: true,
      operation_ref: ref,
      verification: { evidence_ref: invoice?.id },
    });
    expect(space.createCalls(ref)).toBe(1);
    expect(await dispatches(ref)).toBe(1);
  });

  it('the write had not committed: nothing is sent before a not_found past the window, and then only with the same operation_ref', async () => {
    const ref = 'run_restart/lost';
    space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'hang' } });
    await killMidCall(ref);

    const second = await host();
    await second.client.listTools();
    const early = await second.call('create_invoice', {
      customer_id: 'cus_7',
      amount_cents: 700,
      currency: 'EUR',
      operation_ref: ref,
    });
    const envelope = early.structuredContent as any;
    expect(envelope).toMatchObject({ ok: false, commit_state: 'unknown', next_action: 'verify_operation' });
    expect(space.createCalls(ref)).toBe(1);
    expect(await dispatches(ref)).toBe(1);

    await sleep(Math.max(0, Date.parse(envelope.retry.not_before) - Date.now()) + 100);
    const later = await second.call('create_invoice', {
      customer_id: 'cus_7',
      amount_cents: 700,
      currency: 'EUR',
      operation_ref: ref,
    });
    expect(later.structuredContent).toMatchObject({ ok: true });
    // The second send carried the same key: the upstream counts both under this one operation_ref.
    expect(space.createCalls(ref)).toBe(2);
    expect(space.invoicesFor(ref)).toBe(1);
    const events = (await ledger.getEvents(ref)).events.map((event) =>
      event.type === 'VerificationRecorded' ? `${event.type}:${event.data.outcome}` : event.type,
    );
    expect(events.indexOf('VerificationRecorded:not_found')).toBeLessThan(events.lastIndexOf('AttemptDispatched'));
    expect(events.filter((type) => type === 'AttemptDispatched')).toHaveLength(2);
  });
});
