/**
 * The call window through the MCP gateway: an upstream that commits after the gateway gave up on
 * its call must not be written twice. The gateway declares its call timeout as the call window
 * on every dispatch, so the ledger judges a not_found conclusive only a consistency window after
 * that call could last reach the provider; until then the model is told to verify, never to call
 * again, and nothing is dispatched. Real processes throughout: the SDK's client as the host, the
 * gateway CLI, the example invoice MCP server, and the built ledger over HTTP.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { LedgerClient } from '@recovery-ledger/client';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import {
  CLI,
  invoiceGatewayConfig,
  startHost,
  workspace,
  type Host,
  type Workspace,
} from '../support/mcp-gateway-harness';
import { setTimeout as sleep } from 'node:timers/promises';

// The upstream commits DELAY_MS after the create arrives: after the gateway's timeout and after a
// consistency window counted from the dispatch (where a not_found used to become conclusive), but
// inside a consistency window counted from the end of the gateway's call (at 90 % of the timeout,
// the margin it keeps). Both sides are 1.3 s away, for a loaded machine.
const TIMEOUT_MS = 3000;
const WINDOW_MS = 4000;
const DELAY_MS = 5350;
const waitPast = async (instant: string) => sleep(Math.max(0, Date.parse(instant) - Date.now()) + 100);

describe('MCP gateway: a slow upstream that commits after the gateway gave up on the call', () => {
  let ledgerProcess: LedgerProcess;
  let ledger: LedgerClient;
  let space: Workspace;
  let host: Host;

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

  const create = (ref: string) =>
    host.call('create_invoice', { customer_id: 'cus_slow', amount_cents: 4200, currency: 'EUR', operation_ref: ref });
  const envelope = (result: CallToolResult) => result.structuredContent as any;

  it('the model calling again at once, verifying, and calling again gets verify_operation; one create reaches the upstream, one invoice', async () => {
    const ref = 'run_slow/invoice_1';
    space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'slow', delay_ms: DELAY_MS } });

    const first = envelope(await create(ref));
    expect(first).toMatchObject({ ok: false, commit_state: 'unknown', next_action: 'verify_operation' });
    expect(first.retry.not_before).toEqual(expect.any(String));

    // The model does not wait: it calls again, verifies, and calls again, all inside the window.
    const again = envelope(await create(ref));
    const verified = envelope(await host.call('verify_operation', { operation_ref: ref }));
    const afterVerify = envelope(await create(ref));
    for (const answer of [again, verified, afterVerify]) {
      expect(answer).toMatchObject({
        ok: false,
        commit_state: 'unknown',
        next_action: 'verify_operation',
        retry: { directive: 'never' },
      });
    }
    expect(verified.code).toBe('VERIFICATION_PREMATURE');
    expect(space.createCalls(ref)).toBe(1);

    // After that instant the same call finds the invoice the slow create made, and sends nothing.
    await waitPast(afterVerify.retry.not_before);
    const settled = envelope(await create(ref));
    expect(space.createCalls(ref)).toBe(1);
    const invoices = space.state.invoices().filter((invoice) => invoice.operation_ref === ref);
    expect(invoices).toHaveLength(1);
    expect(settled).toMatchObject({
      ok: true,
      commit_state: 'committed',
      verification: { evidence_ref: invoices[0].id },
    });

    // The ledger's call deadline is the gateway's own call timeout, and a not_found waits a whole
    // consistency window past the last instant that call could reach the provider.
    const events = (await ledger.getEvents(ref)).events;
    const dispatched = events.filter((event) => event.type === 'AttemptDispatched');
    expect(dispatched).toHaveLength(1);
    expect(dispatched[0].data).toMatchObject({ call_window_ms: TIMEOUT_MS, call_deadline: expect.any(String) });
    const deadline = Date.parse(dispatched[0].data.call_deadline as string);
    expect(deadline - Date.parse(dispatched[0].recorded_at)).toBeLessThanOrEqual(TIMEOUT_MS);
    const recorded = events.find((event) => event.type === 'EnvelopeRecorded');
    const lastReach = Math.min(deadline, Date.parse(recorded?.recorded_at as string));
    expect(Date.parse(afterVerify.retry.not_before)).toBeGreaterThanOrEqual(lastReach + WINDOW_MS);
  });
});

describe('MCP gateway: a call timeout that does not end before the consistency window is refused at start', () => {
  let space: Workspace;
  beforeAll(() => {
    space = workspace();
  });
  afterAll(() => space?.cleanup());

  const unsafe = () => {
    const config = invoiceGatewayConfig(space, { ledgerUrl: 'http://127.0.0.1:9' }) as any;
    config.write_tools.create_invoice.timeout_ms = 30_000;
    config.write_tools.create_invoice.policy.consistency_window_ms = 30_000;
    const file = join(space.dir, 'unsafe.json');
    writeFileSync(file, JSON.stringify(config));
    return file;
  };
  const reason =
    'write_tools.create_invoice.timeout_ms: 30000 must be less than write_tools.create_invoice.policy.consistency_window_ms (30000)';

  it('the command exits 2 naming the field, and starts nothing', () => {
    const result = spawnSync(process.execPath, [CLI, 'mcp-gateway', '--config', unsafe()], {
      encoding: 'utf8',
      input: '',
      timeout: 20_000,
    });
    expect(result.status).toBe(2);
    expect(result.stderr).toContain(reason);
    expect(space.state.calls()).toEqual({});
  });

  it("the host's initialize is answered with the same reason", async () => {
    const client = new Client({ name: 'e2e-host', version: '1.0.0' });
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [CLI, 'mcp-gateway', '--config', unsafe()],
      env: { PATH: process.env.PATH ?? '' },
      stderr: 'ignore',
    });
    try {
      await expect(client.connect(transport)).rejects.toThrow(reason);
    } finally {
      await transport.close().catch(() => undefined);
    }
  });
});
