/**
 * docs/mcp-gateway.md's host configuration and configuration file, run as printed: both are read
 * out of the page, the checkout's path put for `/home/me/recovery-ledger` and a temporary
 * directory for `/home/me/invoices`, and the host's command started by the SDK's client against
 * the built ledger in local mode (no key anywhere) and the example invoice MCP server. And a
 * gateway that cannot start says why to the host, in the answer to its initialize.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { PassThrough } from 'node:stream';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { InvoiceState } from '../../examples/invoice-mcp-server/invoice-state';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import { CLI } from '../support/mcp-gateway-harness';

const ROOT = resolve(__dirname, '../..');
const DOC = readFileSync(join(ROOT, 'docs/mcp-gateway.md'), 'utf8');

/** The first ```json block after a heading of the page. */
function jsonAfter(heading: string): string {
  const section = DOC.slice(DOC.indexOf(heading));
  const block = /```json\n([\s\S]*?)\n```/.exec(section)?.[1];
  if (!block) throw new Error(`no JSON block after ${heading}`);
  return block;
}

describe('MCP gateway: the configuration in docs/mcp-gateway.md, run as printed against a local-mode ledger', () => {
  let ledgerProcess: LedgerProcess;
  let dir: string;
  let state: InvoiceState;
  let client: Client;
  let stderr = '';

  beforeAll(async () => {
    // Local mode: no LEDGER_API_KEYS for the ledger, no LEDGER_API_KEY for the gateway.
    ledgerProcess = await startLedger();
    dir = mkdtempSync(join(tmpdir(), 'mcp-gateway-doc-'));
    state = new InvoiceState(join(dir, 'invoices'));
    const configFile = join(dir, 'gateway.json');
    const place = (text: string) =>
      text
        .replaceAll('/home/me/recovery-ledger/gateway.json', configFile)
        .replaceAll('/home/me/recovery-ledger', ROOT)
        .replaceAll('/home/me/invoices', state.dir);
    writeFileSync(configFile, place(jsonAfter('## The configuration file')));
    const server = JSON.parse(place(jsonAfter('## Host configuration'))).mcpServers.invoices as {
      command: string;
      args: string[];
      env?: Record<string, string>;
    };
    expect(server.env).toBeUndefined();

    const transport = new StdioClientTransport({
      command: server.command,
      args: server.args,
      // The page's ledger is npm start's 127.0.0.1:3000; this one listens elsewhere (the documented override).
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LEDGER_URL: ledgerProcess.baseUrl },
      stderr: 'pipe',
    });
    (transport.stderr as PassThrough | null)?.on('data', (chunk) => (stderr += chunk));
    client = new Client({ name: 'doc-host', version: '1.0.0' });
    await client.connect(transport);
  });

  afterAll(async () => {
    await client?.close();
    await ledgerProcess?.stop();
    ledgerProcess?.cleanup();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const call = async (name: string, args: Record<string, unknown>) =>
    (await client.callTool({ name, arguments: args })) as CallToolResult;

  it('starts without a key, lists the tools with the words the configuration gives, and a write succeeds', async () => {
    expect(stderr).toContain('"ledger_key":"none"');
    const { tools } = await client.listTools();
    const byName = Object.fromEntries(tools.map((tool) => [tool.name, tool]));
    expect(Object.keys(byName)).toEqual(
      expect.arrayContaining([
        'create_invoice',
        'void_invoice',
        'get_invoice',
        'lookup_operation',
        'verify_operation',
        'operation_status',
      ]),
    );
    expect(byName.create_invoice).toMatchObject({
      title: 'Create an invoice',
      description: expect.stringMatching(/^Creates an invoice for a customer: customer_id like cus_42/),
    });
    expect(byName.get_invoice).toMatchObject({
      title: 'Read an invoice',
      description: 'Reads one invoice by its id (inv_…).',
    });

    const answer = await call('create_invoice', {
      customer_id: 'cus_42',
      amount_cents: 1250,
      currency: 'EUR',
      operation_ref: 'task_1/invoice_1',
    });
    expect(answer.structuredContent).toMatchObject({
      ok: true,
      commit_state: 'committed',
      result: { invoice: { operation_ref: 'task_1/invoice_1' } },
    });
    expect(state.invoices()).toHaveLength(1);
  });

  it('a provider outage reaches the model as the page says: the sample vouches for PROVIDER_OUTAGE', async () => {
    state.addFault({ on: 'create', operation_ref: 'task_1/invoice_2', fault: { kind: 'outage', retry_after_ms: 200 } });
    const answer = await call('create_invoice', {
      customer_id: 'cus_42',
      amount_cents: 1250,
      currency: 'EUR',
      operation_ref: 'task_1/invoice_2',
    });
    expect(answer.structuredContent).toMatchObject({
      ok: false,
      code: 'PROVIDER_OUTAGE',
      category: 'dependency',
      commit_state: 'not_committed',
      next_action: 'wait_and_retry',
    });
    // The page shows this answer's first line, from a real run: the same words, up to the instant.
    const line = (answer.content as Array<{ text: string }>)[0].text.split('\n')[0];
    expect(DOC).toContain(line.slice(0, line.indexOf(' not_before=')));
  });
});

describe('MCP gateway: a gateway that cannot start says why, to the host and on stderr', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'mcp-gateway-nostart-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  // A ledger on another machine with its key variable unset: the one mistake that still stops a start.
  const configFile = () => {
    const config = JSON.parse(jsonAfter('## The configuration file'));
    config.ledger.url = 'http://ledger.example.internal:3000';
    const file = join(dir, 'remote.json');
    writeFileSync(file, JSON.stringify(config));
    return file;
  };
  const reason = 'ledger.api_key_env: environment variable LEDGER_API_KEY is not set';

  it("the host's initialize is answered with a JSON-RPC error carrying the reason", async () => {
    const client = new Client({ name: 'e2e-host', version: '1.0.0' });
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [CLI, 'mcp-gateway', '--config', configFile()],
      env: { PATH: process.env.PATH ?? '' },
      stderr: 'ignore',
    });
    try {
      await expect(client.connect(transport)).rejects.toThrow(reason);
    } finally {
      await transport.close().catch(() => undefined);
    }
  });

  it('the process prints it on stderr and exits non-zero', () => {
    const initialize = {
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
    };
    const result = spawnSync(process.execPath, [CLI, 'mcp-gateway', '--config', configFile()], {
      encoding: 'utf8',
      input: `${JSON.stringify(initialize)}\n`,
      timeout: 20_000,
      env: { PATH: process.env.PATH ?? '' },
    });
    expect(result.status).toBe(2);
    expect(result.stderr).toContain(reason);
    expect(JSON.parse(result.stdout.trim())).toMatchObject({
      jsonrpc: '2.0',
      id: 0,
      error: { code: -32603, message: expect.stringContaining(reason) },
    });
  });
});
