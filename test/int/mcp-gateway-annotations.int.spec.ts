/**
 * MCP tool annotations against the real invoice MCP server (spawned over stdio): when the
 * configuration is silent they propose a tool's class, logged at start; a disagreement with the
 * configuration is logged; a tool configured as a write goes through the ledger even when its
 * annotations say read-only (docs/mcp-gateway.md, "Tool annotations").
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { McpGateway, parseGatewayConfig } from '@recovery-ledger/mcp-gateway';

const INVOICE_SERVER = resolve(__dirname, '../../dist/examples/invoice-mcp-server/main.js');

describe('MCP tool annotations in the gateway', () => {
  let dir: string;
  let gateway: McpGateway | undefined;
  const logged: Array<Record<string, unknown>> = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mcp-annotations-'));
    const config = parseGatewayConfig(
      {
        // No ledger answers here: the test only needs to see which path a call takes.
        ledger: { url: 'http://127.0.0.1:9', timeout_ms: 500 },
        servers: { invoices: { command: process.execPath, args: [INVOICE_SERVER, '--state-dir', dir] } },
        // get_invoice says readOnlyHint: true; the configuration makes it a write anyway.
        write_tools: { get_invoice: { lookup: { tool: 'lookup_operation' } } },
        // void_invoice says destructiveHint: true; the configuration lets it pass as a read.
        read_tools: { void_invoice: {} },
      },
      'annotations.json',
      {},
    );
    gateway = new McpGateway(config, (line) => logged.push(line));
    await gateway.start();
  }, 30_000);

  afterAll(async () => {
    await gateway?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('logs the class the annotations propose where the configuration is silent, and every disagreement', () => {
    for (const line of logged.filter((item) =>
      ['tool_class_proposed', 'annotation_disagreement'].includes(String(item.event)),
    ))
      process.stdout.write(`${JSON.stringify(line)}\n`);
    const of = (event: string) =>
      Object.fromEntries(logged.filter((line) => line.event === event).map((line) => [line.tool, line]));
    expect(of('tool_class_proposed')).toEqual({
      create_invoice: expect.objectContaining({
        class: 'write',
        annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true },
      }),
      lookup_operation: expect.objectContaining({ class: 'read' }),
    });
    expect(of('annotation_disagreement')).toEqual({
      get_invoice: expect.objectContaining({
        configured: 'write',
        annotations: expect.objectContaining({ readOnlyHint: true }),
        note: 'the configuration wins: every call goes through the ledger',
      }),
      void_invoice: expect.objectContaining({
        configured: 'read',
        annotations: expect.objectContaining({ destructiveHint: true }),
      }),
    });
  });

  it('never lets a read-only annotation take a configured write tool past the ledger', async () => {
    // A write needs its operation_ref before anything is sent; a pass-through read would have called the server.
    const answer = await (gateway as McpGateway).callTool('get_invoice', { invoice_id: 'inv_1' });
    expect(answer.isError).toBe(true);
    expect(JSON.stringify(answer.content)).toContain('get_invoice needs operation_ref');
  });
});
