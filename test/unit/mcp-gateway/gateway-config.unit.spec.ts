/** The gateway's configuration: defaults, environment references, and the documented example. */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { GatewayConfigError, parseGatewayConfig } from '@recovery-ledger/mcp-gateway';

const minimal = {
  servers: { invoices: { command: 'node', args: ['server.js'] } },
  write_tools: { create_invoice: { lookup: { tool: 'lookup_operation' } } },
};

function problemsOf(raw: unknown, env: NodeJS.ProcessEnv = {}): string[] {
  try {
    parseGatewayConfig(raw, 'gateway.json', env);
  } catch (error) {
    if (error instanceof GatewayConfigError) return error.problems;
    throw error;
  }
  return [];
}

describe('the MCP gateway configuration', () => {
  it('fills the defaults: a local ledger, three attempts, a 30 s window, a 10 s call, no approval, nothing vouched', () => {
    const config = parseGatewayConfig(minimal, 'gateway.json', {});
    expect(config.ledger).toEqual({ url: 'http://127.0.0.1:3000', timeout_ms: 10_000 });
    expect(config.write_tools.create_invoice).toMatchObject({
      vouched_codes: [],
      policy: { max_attempts: 3, consistency_window_ms: 30_000, approval_required: false },
      lookup: {
        tool: 'lookup_operation',
        argument: 'operation_ref',
        found_field: 'found',
        evidence_field: 'evidence_ref',
      },
      timeout_ms: 10_000,
    });
    expect(config.servers.invoices).toMatchObject({ trust_descriptions: false });
    expect(config.read_tools).toEqual({});
    expect(config.recovery.older_than_ms).toBe(0);
  });

  it('reads the ledger key and ${env:NAME} references from the environment, and names a missing one', () => {
    const raw = {
      ...minimal,
      ledger: { url: 'https://ledger.example.internal', api_key_env: 'GATEWAY_KEY' },
      servers: { crm: { url: 'https://crm.test/mcp', headers: { authorization: 'Bearer ${env:CRM_TOKEN}' } } },
    };
    const config = parseGatewayConfig(raw, 'gateway.json', { GATEWAY_KEY: 'k1', CRM_TOKEN: 't1' });
    expect(config.ledger.api_key).toBe('k1');
    expect(config.servers.crm).toEqual({
      url: 'https://crm.test/mcp',
      headers: { authorization: 'Bearer t1' },
      trust_descriptions: false,
    });
    expect(problemsOf(raw, {})).toEqual([
      'servers.crm.headers.authorization: environment variable CRM_TOKEN is not set',
      'ledger.api_key_env: environment variable GATEWAY_KEY is not set (a ledger that is not on this machine needs a runtime key)',
    ]);
  });

  it('a ledger on this machine may be in local mode: a named key variable that is not set is no error there', () => {
    for (const url of ['http://127.0.0.1:3000', 'http://localhost:3000', 'http://[::1]:3000']) {
      const config = parseGatewayConfig(
        { ...minimal, ledger: { url, api_key_env: 'LEDGER_API_KEY' } },
        'gateway.json',
        {},
      );
      expect(config.ledger.api_key).toBeUndefined();
    }
    // The command line's --url is judged as if the file said it.
    expect(() =>
      parseGatewayConfig(
        { ...minimal, ledger: { api_key_env: 'LEDGER_API_KEY' } },
        'gateway.json',
        {},
        { ledgerUrl: 'https://ledger.example.internal' },
      ),
    ).toThrow(/ledger.api_key_env: environment variable LEDGER_API_KEY is not set/);
  });

  it('refuses a write whose call timeout does not end before its consistency window, naming the field', () => {
    const tool = (timeout_ms: number, consistency_window_ms?: number) => ({
      ...minimal,
      write_tools: {
        create_invoice: {
          lookup: { tool: 'lookup_operation' },
          timeout_ms,
          ...(consistency_window_ms === undefined ? {} : { policy: { consistency_window_ms } }),
        },
      },
    });
    expect(problemsOf(tool(30_000))).toEqual([
      'write_tools.create_invoice.timeout_ms: 30000 must be less than write_tools.create_invoice.policy.consistency_window_ms (30000): a call still open when the window ends could commit after a lookup found nothing',
    ]);
    expect(problemsOf(tool(5_000, 5_000))).toHaveLength(1);
    expect(problemsOf(tool(4_999, 5_000))).toEqual([]);
  });

  it('takes titles and descriptions for write and read tools, and refuses a read_tools entry for a write tool', () => {
    const raw = {
      ...minimal,
      servers: { invoices: { command: 'node', trust_descriptions: true } },
      write_tools: {
        create_invoice: { lookup: { tool: 'lookup_operation' }, title: 'Create', description: 'Creates one.' },
      },
      read_tools: { get_invoice: { description: 'Reads one.' } },
    };
    const config = parseGatewayConfig(raw, 'gateway.json', {});
    expect(config.write_tools.create_invoice).toMatchObject({ title: 'Create', description: 'Creates one.' });
    expect(config.servers.invoices).toMatchObject({ trust_descriptions: true });
    expect(problemsOf({ ...raw, read_tools: { create_invoice: { title: 'x' } } })).toEqual([
      'read_tools.create_invoice: create_invoice is a write tool; give its title and description in write_tools.create_invoice',
    ]);
  });

  it('refuses a lookup URL without {operation_ref}, and a server that is neither a command nor a URL', () => {
    expect(
      problemsOf({ ...minimal, write_tools: { create_invoice: { lookup: { url: 'http://127.0.0.1:9/lookup' } } } }),
    ).toEqual(['write_tools.create_invoice.lookup.url: must contain {operation_ref}']);
    expect(problemsOf({ ...minimal, servers: { invoices: { cmd: 'node' } } })).toHaveLength(1);
  });

  it('the example in docs/mcp-gateway.md is a valid configuration', () => {
    const doc = readFileSync(resolve(__dirname, '../../../docs/mcp-gateway.md'), 'utf8');
    const section = doc.slice(doc.indexOf('## The configuration file'));
    const json = /```json\n([\s\S]*?)\n```/.exec(section)?.[1];
    expect(json).toBeDefined();
    // No key in the environment: the page's ledger is local (it may be in local mode).
    const config = parseGatewayConfig(JSON.parse(json as string), 'docs', {});
    expect(Object.keys(config.write_tools)).toEqual(['create_invoice', 'void_invoice']);
    expect(config.write_tools.void_invoice.policy.approval_required).toBe(true);
  });
});
