/**
 * A host's session through the MCP gateway, printed as the JSON-RPC messages the host sends (→)
 * and receives (←). It starts `recovery-ledger mcp-gateway` with a configuration it writes to a
 * temporary directory, the gateway starts the example invoice MCP server, and faults are queued in
 * the invoice server's state directory (never through the model's tools).
 *
 *   npm start &                                                     # the ledger on 127.0.0.1:3000
 *   node dist/examples/mcp-gateway-session.js [--ledger http://127.0.0.1:3000]
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { InvoiceState } from './invoice-mcp-server/invoice-state';
import { setTimeout as sleep } from 'node:timers/promises';
import { exitOnHelp } from './example-cli';

function flag(name: string): string | undefined {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? process.argv[index + 1] : undefined;
}

const print = (line: string) => process.stdout.write(`${line}\n`);

async function main(): Promise<void> {
  exitOnHelp(__filename);
  const ledgerUrl = flag('ledger') ?? process.env.LEDGER_URL ?? 'http://127.0.0.1:3000';
  const dir = mkdtempSync(join(tmpdir(), 'mcp-gateway-session-'));
  const state = new InvoiceState(join(dir, 'invoices'));
  const config = join(dir, 'gateway.json');
  writeFileSync(
    config,
    JSON.stringify({
      ledger: { url: ledgerUrl },
      servers: {
        invoices: {
          command: process.execPath,
          args: [resolve(__dirname, 'invoice-mcp-server/main.js'), '--state-dir', state.dir],
        },
      },
      write_tools: {
        create_invoice: {
          // What the model reads about the tool: the configuration's words, not the server's.
          title: 'Create an invoice',
          description:
            'Creates an invoice for a customer: customer_id like cus_42, amount_cents a positive integer, currency an ISO 4217 code like EUR.',
          idempotency_argument: 'idempotency_key',
          vouched_codes: ['INVALID_CUSTOMER', 'RATE_LIMITED'],
          lookup: { tool: 'lookup_operation' },
          policy: { max_attempts: 3, consistency_window_ms: 2000 },
          timeout_ms: 1000,
        },
      },
    }),
  );
  const run = `session_${Date.now().toString(36)}`;
  state.addFault({ on: 'create', operation_ref: `${run}/invoice_2`, fault: { kind: 'timeout-after-commit' } });
  state.addFault({ on: 'create', operation_ref: `${run}/invoice_3`, fault: { kind: 'hostile-text' } });

  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [resolve(__dirname, '../src/cli/main.js'), 'mcp-gateway', '--config', config],
    stderr: 'ignore',
  });
  const client = new Client({ name: 'session-host', version: '1.0.0' });
  await client.connect(transport);
  const send = transport.send.bind(transport);
  transport.send = (message: JSONRPCMessage) => {
    print(`→ ${JSON.stringify(message)}`);
    return send(message);
  };
  const receive = transport.onmessage;
  transport.onmessage = (message: JSONRPCMessage) => {
    print(`← ${JSON.stringify(message)}`);
    receive?.(message);
  };

  const { tools } = await client.listTools();
  print(`# tools: ${tools.map((tool) => tool.name).join(', ')}`);
  const create = (n: number, extra: Record<string, unknown> = {}) =>
    client.callTool({
      name: 'create_invoice',
      arguments: {
        customer_id: 'cus_42',
        amount_cents: 1250,
        currency: 'EUR',
        operation_ref: `${run}/invoice_${n}`,
        ...extra,
      },
    });

  print('# 1. a write that succeeds');
  await create(1);
  print('# 2. the model sends the same call again: the original success, no second invoice');
  await create(1);
  print('# 3. the provider commits, then the call times out: the gateway verifies by operation_ref');
  await create(2);
  print('# 4. the provider answers an instruction in prose: withheld; the outcome is unknown until verified');
  const unknown = (await create(3)).structuredContent as { retry?: { not_before?: string } } | undefined;
  print('# 5. the model calls again at once: nothing is sent while the outcome is unverified');
  await create(3);
  // A consistency window past the last instant the call could reach the provider (its answer, here).
  await sleep(Math.max(0, Date.parse(unknown?.retry?.not_before ?? '') - Date.now() || 2100) + 100);
  print('# 6. after the consistency window: verify_operation finds nothing, one attempt with the same key may run');
  await client.callTool({ name: 'verify_operation', arguments: { operation_ref: `${run}/invoice_3` } });
  await create(3);
  print('# 7. invalid input: correct_input, naming the field');
  await create(4, { customer_id: 'not a customer' });

  const calls = state.calls().create_invoice?.by_operation_ref ?? {};
  print(`# create_invoice calls the upstream received, per operation_ref: ${JSON.stringify(calls)}`);
  await client.close();
  rmSync(dir, { recursive: true, force: true });
}

main().catch((error: unknown) => {
  process.stderr.write(`session failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
