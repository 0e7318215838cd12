/** The gateway's configuration: defaults, environment references, and the documented example. */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { GatewayConfigError, parseGatewayConfig } from '../../../src/mcp-gateway/gateway-config';

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
  it('fills the defaults: a local ledger, three attempts, a 30 s window, no approval, nothing vouched', () => {
    const config = parseGatewayConfig(minimal, 'gateway.json', {});
    expect(config.ledger).toEqual({ url: 'http://127.0.0.1:3000', timeout_ms: 10_000 });
    expect(config.write_tools.create_invoice).toMatchObject({
      vouched_codes: [],
      policy: { max_attempts: 3, consistency_window_ms: 30_000, approval_required: false },
      lookup: { tool: 'lookup_operation', argument: 'operation_ref', found_field: 'found', evidence_field: 'evidence_ref' },
      timeout_ms: 30_000,
    });
    expect(config.recovery.older_than_ms).toBe(0);
  });

  it('reads the ledger key and ${env:NAME} references from the environment, and names a missing one', () => {
    const raw = {
      ...minimal,
      ledger: { api_key_env: 'GATEWAY_KEY' },
      servers: { crm: { url: 'https://crm.test/mcp', headers: { authorization: 'Bearer ${env:CRM_TOKEN}' } } },
    };
    const config = parseGatewayConfig(raw, 'gateway.json', { GATEWAY_KEY: 'k1', CRM_TOKEN: 't1' });
    expect(config.ledger.api_key).toBe('k1');
    expect(config.servers.crm).toEqual({ url: 'https://crm.test/mcp', headers: { authorization: 'Bearer t1' } });
    expect(problemsOf(raw, {})).toEqual([
      'servers.crm.headers.authorization: environment variable CRM_TOKEN is not set',
      'ledger.api_key_env: environment variable GATEWAY_KEY is not set',
    ]);
  });

  it('refuses a lookup URL without {operation_ref}, and a server that is neither a command nor a URL', () => {
    expect(problemsOf({ ...minimal, write_tools: { create_invoice: { lookup: { url: 'http://127.0.0.1:9/lookup' } } } })).toEqual([
      'write_tools.create_invoice.lookup.url: must contain {operation_ref}',
    ]);
    expect(problemsOf({ ...minimal, servers: { invoices: { cmd: 'node' } } })).toHaveLength(1);
  });

  it('the example in docs/mcp-gateway.md is a valid configuration', () => {
    const doc = readFileSync(resolve(__dirname, '../../../docs/mcp-gateway.md'), 'utf8');
    const section = doc.slice(doc.indexOf('## The configuration file'));
    const json = /```json\n([\s\S]*?)\n```/.exec(section)?.[1];
    expect(json).toBeDefined();
    const config = parseGatewayConfig(JSON.parse(json as string), 'docs', { LEDGER_API_KEY: 'k', CRM_TOKEN: 't' });
    expect(Object.keys(config.write_tools)).toEqual(['create_invoice', 'void_invoice']);
    expect(config.write_tools.void_invoice.policy.approval_required).toBe(true);
  });
});
