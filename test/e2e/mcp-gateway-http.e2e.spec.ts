/**
 * The gateway with an upstream reached over streamable HTTP (the invoice MCP server in --http
 * mode, a real process on loopback) and an HTTP lookup URL template; and the configuration file
 * refused, with every mistake named, before anything starts.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LedgerClient } from '@recovery-ledger/client';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import {
  CLI,
  INVOICE_SERVER,
  invoiceGatewayConfig,
  startHost,
  workspace,
  type Host,
  type Workspace,
} from '../support/mcp-gateway-harness';
import { setTimeout as sleep } from 'node:timers/promises';

describe('MCP gateway: a streamable HTTP upstream and an HTTP lookup', () => {
  let ledgerProcess: LedgerProcess;
  let ledger: LedgerClient;
  let space: Workspace;
  let upstream: ChildProcess;
  let host: Host;
  let baseUrl: string;

  beforeAll(async () => {
    ledgerProcess = await startLedger();
    ledger = new LedgerClient({ baseUrl: ledgerProcess.baseUrl });
    space = workspace();
    upstream = spawn(process.execPath, [INVOICE_SERVER, '--state-dir', space.stateDir, '--http'], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    const urlFile = join(space.stateDir, 'http-url');
    // The server writes the file once it listens; it may be seen empty for an instant before its content lands.
    for (let waited = 0; !existsSync(urlFile) || readFileSync(urlFile, 'utf8') === ''; waited += 25) {
      if (waited > 15_000) throw new Error('the invoice server did not start');
      await sleep(25);
    }
    baseUrl = readFileSync(urlFile, 'utf8');
    const config = invoiceGatewayConfig(space, {
      ledgerUrl: ledgerProcess.baseUrl,
      windowMs: 3000,
      timeoutMs: 1500,
    }) as any;
    config.servers = { invoices: { url: `${baseUrl}/mcp` } };
    config.write_tools.create_invoice.lookup = { url: `${baseUrl}/lookup?operation_ref={operation_ref}` };
    space.writeConfig(config);
    host = await startHost(space.configFile);
  });

  afterAll(async () => {
    await host?.close();
    upstream?.kill('SIGTERM');
    await ledgerProcess?.stop();
    ledgerProcess?.cleanup();
    space?.cleanup();
  });

  const create = (ref: string) =>
    host.call('create_invoice', { customer_id: 'cus_9', amount_cents: 900, currency: 'EUR', operation_ref: ref });
  const httpLookups = (ref: string) => space.state.calls().http_lookup?.by_operation_ref[ref] ?? 0;

  it('a write succeeds through the HTTP upstream', async () => {
    const answer = await create('run_http/ok');
    expect(answer.structuredContent).toMatchObject({ ok: true, result: { invoice: { operation_ref: 'run_http/ok' } } });
    expect(space.createCalls('run_http/ok')).toBe(1);
  });

  it('a timeout after the commit is proven by the HTTP lookup', async () => {
    const ref = 'run_http/timeout';
    space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'timeout-after-commit' } });
    const answer = await create(ref);
    const invoice = space.state.invoices().find((item) => item.operation_ref === ref);
    expect(answer.structuredContent).toMatchObject({ ok: true, verification: { evidence_ref: invoice?.id } });
    expect(httpLookups(ref)).toBe(1);
    expect(space.createCalls(ref)).toBe(1);
  });

  it('an unavailable lookup escalates: the outcome stays unknown to the model, and nothing is sent again', async () => {
    const ref = 'run_http/unverifiable';
    space.fault({ on: 'create', operation_ref: ref, fault: { kind: 'timeout-after-commit' } });
    space.fault({ on: 'lookup', operation_ref: ref, fault: { kind: 'lookup-unavailable' } });
    const answer = await create(ref);
    expect(answer.structuredContent).toMatchObject({
      ok: false,
      code: 'LOOKUP_UNAVAILABLE',
      commit_state: 'unknown',
      next_action: 'verify_operation',
    });
    expect((await ledger.getOperation(ref)).status).toBe('escalated');
    const again = await create(ref);
    expect(again.structuredContent).toMatchObject({ code: 'LOOKUP_UNAVAILABLE', commit_state: 'unknown' });
    expect(space.createCalls(ref)).toBe(1);
  });
});

describe('MCP gateway: an HTTP upstream that is down', () => {
  let ledgerProcess: LedgerProcess;
  let space: Workspace;
  let host: Host;
  let upstream: ChildProcess;

  beforeAll(async () => {
    ledgerProcess = await startLedger();
    space = workspace();
    upstream = spawn(process.execPath, [INVOICE_SERVER, '--state-dir', space.stateDir, '--http'], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    const urlFile = join(space.stateDir, 'http-url');
    // The server writes the file once it listens; it may be seen empty for an instant before its content lands.
    for (let waited = 0; !existsSync(urlFile) || readFileSync(urlFile, 'utf8') === ''; waited += 25) {
      if (waited > 15_000) throw new Error('the invoice server did not start');
      await sleep(25);
    }
    const baseUrl = readFileSync(urlFile, 'utf8');
    const config = invoiceGatewayConfig(space, {
      ledgerUrl: ledgerProcess.baseUrl,
      windowMs: 5000,
      timeoutMs: 1500,
    }) as any;
    config.servers = { invoices: { url: `${baseUrl}/mcp` } };
    space.writeConfig(config);
    host = await startHost(space.configFile);
  });

  afterAll(async () => {
    await host?.close();
    upstream?.kill('SIGKILL');
    await ledgerProcess?.stop();
    ledgerProcess?.cleanup();
    space?.cleanup();
  });

  it('a refused connection is known not to have sent anything: wait_and_retry, not a verification', async () => {
    upstream.kill('SIGTERM');
    await new Promise((resolve) => upstream.once('exit', resolve));
    const ref = 'run_down/one';
    const answer = await host.call('create_invoice', {
      customer_id: 'cus_1',
      amount_cents: 100,
      currency: 'EUR',
      operation_ref: ref,
    });
    expect(answer.structuredContent).toMatchObject({
      ok: false,
      code: 'NETWORK_UNREACHABLE',
      commit_state: 'not_committed',
      next_action: 'wait_and_retry',
    });
    expect(space.createCalls(ref)).toBe(0);
  });
});

describe('MCP gateway: a ledger that requires keys', () => {
  const RUNTIME_KEY = 'rk_mcp_gateway_runtime_0123456789';
  let ledgerProcess: LedgerProcess;
  let space: Workspace;
  const hosts: Host[] = [];

  beforeAll(async () => {
    ledgerProcess = await startLedger({ env: { LEDGER_API_KEYS: `${RUNTIME_KEY}:runtime:acme` } });
    space = workspace();
    const config = invoiceGatewayConfig(space, { ledgerUrl: ledgerProcess.baseUrl }) as any;
    config.ledger.api_key_env = 'INVOICES_LEDGER_KEY';
    space.writeConfig(config);
  });

  afterAll(async () => {
    for (const host of hosts) await host.close();
    await ledgerProcess?.stop();
    ledgerProcess?.cleanup();
    space?.cleanup();
  });

  it("with its key from the environment, writes are recorded in the key's tenant", async () => {
    const host = await startHost(space.configFile, { INVOICES_LEDGER_KEY: RUNTIME_KEY });
    hosts.push(host);
    const answer = await host.call('create_invoice', {
      customer_id: 'cus_1',
      amount_cents: 100,
      currency: 'EUR',
      operation_ref: 'run_keys/one',
    });
    expect(answer.structuredContent).toMatchObject({ ok: true });
    const ledger = new LedgerClient({ baseUrl: ledgerProcess.baseUrl, apiKey: RUNTIME_KEY });
    expect((await ledger.getOperation('run_keys/one')).status).toBe('succeeded');
  });

  it('with a wrong key nothing is sent, and the model is told to stop, not to retry', async () => {
    const host = await startHost(space.configFile, { INVOICES_LEDGER_KEY: 'rk_wrong_key_000000000000' });
    hosts.push(host);
    const answer = await host.call('create_invoice', {
      customer_id: 'cus_1',
      amount_cents: 100,
      currency: 'EUR',
      operation_ref: 'run_keys/two',
    });
    expect(answer.structuredContent).toMatchObject({
      ok: false,
      code: 'LEDGER_UNAUTHORIZED',
      next_action: 'escalate',
      commit_state: 'not_committed',
    });
    expect(space.createCalls('run_keys/two')).toBe(0);
  });
});

describe('MCP gateway: the configuration file', () => {
  let space: Workspace;
  beforeAll(() => {
    space = workspace();
  });
  afterAll(() => space?.cleanup());

  const runGateway = (config: unknown) => {
    const file = join(space.dir, 'bad.json');
    writeFileSync(file, typeof config === 'string' ? config : JSON.stringify(config));
    return spawnSync(process.execPath, [CLI, 'mcp-gateway', '--config', file], {
      encoding: 'utf8',
      input: '',
      timeout: 20_000,
    });
  };

  it('a broken file exits 2 naming every field that is wrong, and starts nothing', () => {
    const result = runGateway({
      ledger: { url: 'ftp://ledger' },
      servers: { invoices: { command: process.execPath, args: [INVOICE_SERVER, '--state-dir', space.stateDir] } },
      write_tools: {
        create_invoice: {
          lookup: { url: 'http://127.0.0.1:1/lookup' },
          vouched_codes: ['not a code'],
          policy: { max_attempts: 0 },
        },
        verify_operation: { lookup: { tool: 'x' } },
      },
      surprise: true,
    });
    expect(result.status).toBe(2);
    for (const expected of [
      'ledger.url: must be an http(s) URL',
      'write_tools.create_invoice.lookup',
      'write_tools.create_invoice.vouched_codes[0]: must be an UPPER_SNAKE_CASE code',
      'write_tools.create_invoice.policy.max_attempts',
      'surprise',
    ]) {
      expect(result.stderr).toContain(expected);
    }
    expect(space.state.calls()).toEqual({});
  });

  it('semantic mistakes are named too: a gateway tool name, a lookup that writes, an unknown server', () => {
    const result = runGateway({
      servers: { invoices: { command: 'node' } },
      write_tools: {
        verify_operation: { lookup: { tool: 'lookup_operation' } },
        create_invoice: { server: 'elsewhere', lookup: { tool: 'void_invoice' } },
        void_invoice: { lookup: { tool: 'lookup_operation' } },
      },
    });
    expect(result.status).toBe(2);
    expect(result.stderr).toContain('write_tools.verify_operation: verify_operation is a tool of the gateway itself');
    expect(result.stderr).toContain('write_tools.create_invoice.server: no server named elsewhere');
    expect(result.stderr).toContain(
      'write_tools.create_invoice.lookup.tool: void_invoice is a write tool; a lookup must only read',
    );
  });

  it('not JSON, or a write tool no upstream has: a clear one-line reason', () => {
    const notJson = runGateway('{ "servers": ');
    expect(notJson.status).toBe(2);
    expect(notJson.stderr).toMatch(/not JSON/);

    const missing = runGateway({
      servers: { invoices: { command: process.execPath, args: [INVOICE_SERVER, '--state-dir', space.stateDir] } },
      write_tools: { send_email: { lookup: { tool: 'lookup_operation' } } },
    });
    expect(missing.status).toBe(3);
    expect(missing.stderr).toContain('write tool send_email is listed by no upstream server');
  });
});
