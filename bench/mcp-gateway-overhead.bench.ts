/**
 * What the MCP gateway costs per call, measured beside a direct call to the same upstream in the
 * same run: the MCP SDK client calls the example invoice MCP server directly (stdio), and through
 * `recovery-ledger mcp-gateway` (stdio), which adds the ledger's plan, dispatch gate and recorded
 * envelope (three durable submits over loopback HTTP) to every write. Blocks of direct and gateway
 * calls alternate, so a drift of the machine's load touches both alike.
 *
 *   npm run build && node dist/bench/mcp-gateway-overhead.bench.js [--calls 300] [--warmup 30] [--rounds 6]
 *
 * Not a test: nothing is asserted. Loopback only; temporary directories are removed at the end.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { startLedger } from './support/processes';
import { percentile } from './support/report';

const DIST = resolve(__dirname, '..');
const CLI = join(DIST, 'src/cli/main.js');
const INVOICE_SERVER = join(DIST, 'examples/invoice-mcp-server/main.js');

function option(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`);
  const value = index >= 0 ? Number(process.argv[index + 1]) : fallback;
  if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} must be a positive integer`);
  return value;
}

async function connect(command: string, args: string[]): Promise<Client> {
  const client = new Client({ name: 'bench-host', version: '1.0.0' });
  await client.connect(new StdioClientTransport({ command, args, stderr: 'ignore' }));
  await client.listTools();
  return client;
}

interface Series {
  write: number[];
  read: number[];
}

async function timed(call: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  const result = (await call()) as { isError?: boolean };
  const elapsed = performance.now() - start;
  if (result.isError) throw new Error(`a measured call failed: ${JSON.stringify(result).slice(0, 300)}`);
  return elapsed;
}

const summary = (values: number[]) => ({
  calls: values.length,
  mean_ms: Number((values.reduce((sum, value) => sum + value, 0) / values.length).toFixed(2)),
  p50_ms: Number(percentile(values, 0.5).toFixed(2)),
  p99_ms: Number(percentile(values, 0.99).toFixed(2)),
});

async function main(): Promise<void> {
  const calls = option('calls', 300);
  const warmup = option('warmup', 30);
  const rounds = option('rounds', 6);
  const dir = mkdtempSync(join(tmpdir(), 'mcp-gateway-bench-'));
  const ledger = await startLedger(join(dir, 'ledger'));
  const config = join(dir, 'gateway.json');
  writeFileSync(
    config,
    JSON.stringify({
      ledger: { url: ledger.baseUrl },
      servers: {
        invoices: { command: process.execPath, args: [INVOICE_SERVER, '--state-dir', join(dir, 'via-gateway')] },
      },
      write_tools: {
        create_invoice: { idempotency_argument: 'idempotency_key', lookup: { tool: 'lookup_operation' } },
      },
    }),
  );
  const direct = await connect(process.execPath, [INVOICE_SERVER, '--state-dir', join(dir, 'direct')]);
  const gateway = await connect(process.execPath, [CLI, 'mcp-gateway', '--config', config]);
  const series = { direct: { write: [], read: [] } as Series, gateway: { write: [], read: [] } as Series };
  let n = 0;
  const invoice = { customer_id: 'cus_bench', amount_cents: 100, currency: 'EUR' };
  const writeDirect = () =>
    direct.callTool({ name: 'create_invoice', arguments: { ...invoice, idempotency_key: `bench/direct_${++n}` } });
  const writeGateway = () =>
    gateway.callTool({ name: 'create_invoice', arguments: { ...invoice, operation_ref: `bench/gateway_${++n}` } });
  const firstDirect = (await writeDirect()) as { structuredContent?: { invoice?: { id: string } } };
  const firstGateway = (await writeGateway()) as { structuredContent?: { result?: { invoice?: { id: string } } } };
  const directId = firstDirect.structuredContent?.invoice?.id as string;
  const gatewayId = firstGateway.structuredContent?.result?.invoice?.id as string;
  const readDirect = () => direct.callTool({ name: 'get_invoice', arguments: { invoice_id: directId } });
  const readGateway = () => gateway.callTool({ name: 'get_invoice', arguments: { invoice_id: gatewayId } });

  for (let i = 0; i < warmup; i++) {
    await writeDirect();
    await writeGateway();
    await readDirect();
    await readGateway();
  }
  const perRound = Math.ceil(calls / rounds);
  const startedLoad = loadavg()[0];
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < perRound; i++) series.direct.write.push(await timed(writeDirect));
    for (let i = 0; i < perRound; i++) series.gateway.write.push(await timed(writeGateway));
    for (let i = 0; i < perRound; i++) series.direct.read.push(await timed(readDirect));
    for (let i = 0; i < perRound; i++) series.gateway.read.push(await timed(readGateway));
  }
  const report = {
    measured_at: new Date().toISOString(),
    machine: {
      cpus: cpus().length,
      model: cpus()[0]?.model,
      node: process.version,
      load_average: [startedLoad, loadavg()[0]].map((value) => Number(value.toFixed(2))),
    },
    write: { direct: summary(series.direct.write), gateway: summary(series.gateway.write) },
    read: { direct: summary(series.direct.read), gateway: summary(series.gateway.read) },
  };
  const ratio = (a: number, b: number) => Number((a / b).toFixed(2));
  const result = {
    ...report,
    write_ratio_p50: ratio(report.write.gateway.p50_ms, report.write.direct.p50_ms),
    write_added_p50_ms: Number((report.write.gateway.p50_ms - report.write.direct.p50_ms).toFixed(2)),
    read_ratio_p50: ratio(report.read.gateway.p50_ms, report.read.direct.p50_ms),
    read_added_p50_ms: Number((report.read.gateway.p50_ms - report.read.direct.p50_ms).toFixed(2)),
  };
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  await direct.close();
  await gateway.close();
  await ledger.stop();
  rmSync(dir, { recursive: true, force: true });
}

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
