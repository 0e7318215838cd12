/**
 * Runs the invoice MCP server:
 *   node dist/examples/invoice-mcp-server/main.js --state-dir ./invoice-state           (stdio)
 *   node dist/examples/invoice-mcp-server/main.js --state-dir ./invoice-state --http    (streamable HTTP)
 * With --http it listens on 127.0.0.1 (--port, default an ephemeral one), serves MCP at /mcp and
 * the lookup by operation_ref at GET /lookup?operation_ref=..., and writes its URL to
 * <state-dir>/http-url and to stderr. Faults are rules in <state-dir>/faults.json.
 * --hostile-descriptions ends every title and description it publishes with an instruction to the
 * model, to try what reaches a host through the gateway.
 */
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createInvoiceServer } from './invoice-mcp-server';
import { InvoiceState } from './invoice-state';
import { exitOnHelp } from '../example-cli';

function flag(name: string): string | undefined {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? process.argv[index + 1] : undefined;
}

/** Publish tool descriptions that carry an instruction to the model (see InvoiceServerOptions). */
const hostileDescriptions = process.argv.includes('--hostile-descriptions');

const crash = (): never => {
  // A crash, not a shutdown: no answer, no flush, the caller sees the connection drop.
  process.kill(process.pid, 'SIGKILL');
  throw new Error('unreachable');
};

async function readBody(request: IncomingMessage): Promise<unknown> {
  let body = '';
  for await (const chunk of request) body += chunk;
  return body === '' ? undefined : JSON.parse(body);
}

async function serveHttp(state: InvoiceState, port: number): Promise<void> {
  const http = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://localhost');
    const handle = async () => {
      if (request.method === 'GET' && url.pathname === '/lookup') {
        const ref = url.searchParams.get('operation_ref') ?? '';
        state.countCall('http_lookup', ref);
        const fault = state.takeFault('lookup', ref);
        if (fault?.kind === 'lookup-unavailable') {
          response.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"unavailable"}');
          return;
        }
        const invoice = state.byOperationRef(ref);
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(JSON.stringify(invoice ? { found: true, evidence_ref: invoice.id, invoice } : { found: false }));
        return;
      }
      if (url.pathname !== '/mcp' || request.method !== 'POST') {
        response.writeHead(405, { 'content-type': 'application/json' }).end('{"error":"POST /mcp"}');
        return;
      }
      // Stateless: a server and a transport per request, as the SDK suggests for simple servers.
      const server = createInvoiceServer(state, { crash, hostileDescriptions });
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      response.on('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(request, response, await readBody(request));
    };
    handle().catch(() => {
      if (!response.headersSent)
        response.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"internal"}');
    });
  });
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(port, '127.0.0.1', () => resolve());
  });
  const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  writeFileSync(join(state.dir, 'http-url'), url);
  process.stderr.write(`invoice MCP server listening on ${url}/mcp\n`);
  const stop = () => http.close(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

async function main(): Promise<void> {
  exitOnHelp(__filename);
  const dir = flag('state-dir') ?? process.env.INVOICE_STATE_DIR;
  if (!dir) throw new Error('--state-dir (or INVOICE_STATE_DIR) is required');
  const state = new InvoiceState(dir);
  if (process.argv.includes('--http')) return serveHttp(state, Number(flag('port') ?? 0));
  const server = createInvoiceServer(state, { crash, hostileDescriptions });
  // The host went away (or was killed): nothing is left to answer, so do not linger as an orphan.
  process.stdin.once('end', () => process.exit(0));
  process.stdin.once('close', () => process.exit(0));
  await server.connect(new StdioServerTransport());
}

main().catch((error: unknown) => {
  process.stderr.write(`invoice MCP server failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
