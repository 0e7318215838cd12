/**
 * The MCP gateway as a host meets it: the real MCP SDK client spawns the built CLI
 * (`node dist/src/cli/main.js mcp-gateway --config ...`) over stdio; the gateway starts the example
 * invoice MCP server (a real process) and talks to the built ledger over real HTTP. The invoice
 * server's state directory is read from outside, never through the gateway, to count what it saw.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { PassThrough } from 'node:stream';
import { InvoiceState, type FaultRule } from '../../examples/invoice-mcp-server/invoice-state';

export const CLI = resolve(__dirname, '../../dist/src/cli/main.js');
export const INVOICE_SERVER = resolve(__dirname, '../../dist/examples/invoice-mcp-server/main.js');

export interface Workspace {
  dir: string;
  stateDir: string;
  state: InvoiceState;
  configFile: string;
  writeConfig(config: Record<string, unknown>): void;
  fault(rule: FaultRule): void;
  /** Create calls that reached the upstream for this operation_ref (counted on arrival). */
  createCalls(ref: string): number;
  invoicesFor(ref: string): number;
  cleanup(): void;
}

export function workspace(): Workspace {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-gateway-e2e-'));
  const stateDir = join(dir, 'invoices');
  const state = new InvoiceState(stateDir);
  const configFile = join(dir, 'gateway.json');
  return {
    dir,
    stateDir,
    state,
    configFile,
    writeConfig: (config) => writeFileSync(configFile, JSON.stringify(config, null, 2)),
    fault: (rule) => state.addFault(rule),
    createCalls: (ref) => state.calls().create_invoice?.by_operation_ref[ref] ?? 0,
    invoicesFor: (ref) => state.invoices().filter((invoice) => invoice.operation_ref === ref).length,
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

export interface GatewayConfigOptions {
  ledgerUrl: string;
  windowMs?: number;
  maxAttempts?: number;
  timeoutMs?: number;
  approvalRequired?: boolean;
}

/** The configuration the suites use: the invoice server on stdio, create_invoice a write tool. */
export function invoiceGatewayConfig(space: Workspace, options: GatewayConfigOptions): Record<string, unknown> {
  return {
    ledger: { url: options.ledgerUrl },
    run_id: 'mcp-e2e',
    read_vouched_codes: ['RATE_LIMITED'],
    servers: { invoices: { command: process.execPath, args: [INVOICE_SERVER, '--state-dir', space.stateDir] } },
    write_tools: {
      create_invoice: {
        idempotency_argument: 'idempotency_key',
        vouched_codes: ['INVALID_CUSTOMER', 'RATE_LIMITED', 'MISSING_APPROVAL', 'PROVIDER_OUTAGE'],
        lookup: { tool: 'lookup_operation' },
        policy: { max_attempts: options.maxAttempts ?? 3, consistency_window_ms: options.windowMs ?? 3000 },
        timeout_ms: options.timeoutMs ?? 1500,
      },
      void_invoice: {
        idempotency_argument: 'idempotency_key',
        vouched_codes: ['INVOICE_NOT_FOUND'],
        lookup: { tool: 'lookup_operation' },
        policy: {
          max_attempts: 2,
          consistency_window_ms: options.windowMs ?? 3000,
          approval_required: options.approvalRequired ?? true,
        },
        timeout_ms: options.timeoutMs ?? 1500,
      },
    },
  };
}

export interface Host {
  client: Client;
  pid: number;
  stderr(): string;
  call(name: string, args: Record<string, unknown>): Promise<CallToolResult>;
  /** Every text the model could read in an answer: content blocks and structuredContent. */
  seen(result: CallToolResult): string;
  close(): Promise<void>;
}

/** How the host starts the gateway: by default the server CLI's `mcp-gateway` command. */
export interface GatewayLauncher {
  command: string;
  args: string[];
}

/** The host: the SDK's Client spawning the gateway over stdio. */
export async function startHost(
  configFile: string,
  env: Record<string, string> = {},
  launcher?: GatewayLauncher,
): Promise<Host> {
  const transport = new StdioClientTransport({
    command: launcher?.command ?? process.execPath,
    args: launcher?.args ?? [CLI, 'mcp-gateway', '--config', configFile],
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    stderr: 'pipe',
  });
  let stderr = '';
  (transport.stderr as PassThrough | null)?.on('data', (chunk) => (stderr += chunk));
  const client = new Client({ name: 'e2e-host', version: '1.0.0' });
  await client.connect(transport);
  // listTools also gives the client the output schemas it validates every answer against.
  await client.listTools();
  return {
    client,
    pid: transport.pid as number,
    stderr: () => stderr,
    call: async (name, args) => (await client.callTool({ name, arguments: args })) as CallToolResult,
    seen: (result) => JSON.stringify({ content: result.content, structuredContent: result.structuredContent }),
    close: () => client.close(),
  };
}
