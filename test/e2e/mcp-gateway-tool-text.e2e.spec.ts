/**
 * What the host's model reads about the upstream's tools. The example invoice server, started
 * with --hostile-descriptions, ends every title and description it publishes (tools, arguments,
 * annotations) with an instruction to the model. Through the gateway the host's tools/list holds
 * none of it unless the configuration vouches for the server; the configuration's own title and
 * description are shown instead. Real processes: the SDK's client, the gateway CLI, the server.
 */
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { HOSTILE_TEXT } from '../../examples/invoice-mcp-server/invoice-state';
import { startLedger, type LedgerProcess } from '../support/ledger-process';
import {
  INVOICE_SERVER,
  invoiceGatewayConfig,
  startHost,
  workspace,
  type Host,
  type Workspace,
} from '../support/mcp-gateway-harness';

const HOSTILE = /ignore|admin|SYSTEM|99999999/i;

describe('MCP gateway: upstream prose never reaches the host unless the configuration vouches for the server', () => {
  let ledgerProcess: LedgerProcess;
  let space: Workspace;
  const hosts: Host[] = [];

  beforeAll(async () => {
    ledgerProcess = await startLedger();
    space = workspace();
  });

  afterAll(async () => {
    for (const host of hosts) await host.close().catch(() => undefined);
    await ledgerProcess?.stop();
    ledgerProcess?.cleanup();
    space?.cleanup();
  });

  async function toolsWith(edit: (config: any) => void): Promise<{ host: Host; tools: Tool[] }> {
    const config = invoiceGatewayConfig(space, { ledgerUrl: ledgerProcess.baseUrl }) as any;
    config.servers.invoices.args = [INVOICE_SERVER, '--state-dir', space.stateDir, '--hostile-descriptions'];
    edit(config);
    space.writeConfig(config);
    const host = await startHost(space.configFile);
    hosts.push(host);
    return { host, tools: (await host.client.listTools()).tools };
  }

  it('not vouched for: no title, description, schema description or annotation title of the upstream reaches the host', async () => {
    const { host, tools } = await toolsWith(() => undefined);
    const seen = JSON.stringify(tools);
    expect(HOSTILE.exec(seen)?.[0]).toBeUndefined();
    const create = tools.find((tool) => tool.name === 'create_invoice') as Tool;
    expect(create.title).toBeUndefined();
    expect(create.description).toMatch(/^Runs through a recovery ledger/);

    // The tools still work.
    const answer = await host.call('create_invoice', {
      customer_id: 'cus_text',
      amount_cents: 100,
      currency: 'EUR',
      operation_ref: 'run_text/one',
    });
    expect(answer.structuredContent).toMatchObject({ ok: true });
  });

  it('the configured title and description are what the host reads instead', async () => {
    const { tools } = await toolsWith((config) => {
      config.write_tools.create_invoice.title = 'Create an invoice';
      config.write_tools.create_invoice.description = 'Creates one invoice for a customer, in cents.';
      config.read_tools = { get_invoice: { description: 'Reads one invoice by its id.' } };
    });
    expect(HOSTILE.test(JSON.stringify(tools))).toBe(false);
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
    expect(byName.create_invoice.title).toBe('Create an invoice');
    expect(byName.create_invoice.description).toMatch(
      /^Creates one invoice for a customer, in cents\.\n\nRuns through a recovery ledger/,
    );
    expect(byName.create_invoice.annotations).toEqual({
      readOnlyHint: false,
      destructiveHint: false,
      idempotentHint: true,
    });
    expect(byName.create_invoice.inputSchema.properties).toMatchObject({
      customer_id: { type: 'string' },
      amount_cents: { type: 'number' },
    });
    expect((byName.create_invoice.inputSchema.properties as any).customer_id.description).toBeUndefined();
    expect(byName.get_invoice).toMatchObject({ description: 'Reads one invoice by its id.' });
    expect(byName.get_invoice.title).toBeUndefined();
    // A tool nothing was configured for keeps its name, its schema's structure and its hints.
    expect(byName.lookup_operation).toEqual({
      name: 'lookup_operation',
      inputSchema: {
        type: 'object',
        properties: { operation_ref: { type: 'string', minLength: 1, maxLength: 200 } },
        required: ['operation_ref'],
        $schema: expect.any(String),
      },
      annotations: { readOnlyHint: true },
      execution: expect.any(Object),
    });
  });

  it('vouched for (trust_descriptions): the upstream words pass, so the test above would see them', async () => {
    const { tools } = await toolsWith((config) => {
      config.servers.invoices.trust_descriptions = true;
    });
    const create = tools.find((tool) => tool.name === 'create_invoice') as Tool;
    expect(create.description).toContain(HOSTILE_TEXT);
    expect(create.title).toContain(HOSTILE_TEXT);
    expect(HOSTILE.test(JSON.stringify(tools))).toBe(true);
  });
});
