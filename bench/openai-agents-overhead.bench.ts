/**
 * What the OpenAI Agents SDK integration costs per tool call, beside the bare tool in the same run:
 * the same create call to the example invoice provider (in this process, loopback HTTP), once as a
 * plain SDK tool() runs it, and once through ledgeredAgentsTool, which adds the ledger's plan,
 * dispatch gate and recorded envelope to every call. Both are driven through the SDK's own tool
 * object (FunctionTool.invoke, what the runner calls), with a new operation per call; blocks of
 * bare and wrapped calls alternate, so a drift of the machine's load touches both alike.
 *
 *   node scripts/build.cjs && node dist/bench/openai-agents-overhead.bench.js [--calls 200] [--warmup 20] [--rounds 4]
 *
 * Not a test: nothing is asserted. Loopback only; the temporary directory is removed at the end.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { RunContext, tool, type FunctionTool } from '@openai/agents';
import { z } from 'zod';
import { LedgerClient, type ToolEnvelope } from '@recovery-ledger/client';
import { ledgeredAgentsTool } from '@recovery-ledger/agent-frameworks/openai-agents';
import { startInvoiceProvider } from '../examples/invoice-provider/invoice-provider';
import { invoiceTools, type InvoiceInput } from '../examples/invoice-tools';
import { startLedger } from './support/processes';
import { percentile } from './support/report';

function option(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`);
  const value = index >= 0 ? Number(process.argv[index + 1]) : fallback;
  if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} must be a positive integer`);
  return value;
}

const POLICY = { max_attempts: 3, consistency_window_ms: 30_000 };
const SCHEMA = z.object({ customer_id: z.string(), amount_cents: z.number().int(), currency: z.string() });

type Invokable = FunctionTool<any, any, any>;

async function timed(call: () => Promise<boolean>): Promise<number> {
  const start = performance.now();
  const ok = await call();
  const elapsed = performance.now() - start;
  if (!ok) throw new Error('a measured call failed');
  return elapsed;
}

const summary = (values: number[]) => ({
  calls: values.length,
  mean_ms: Number((values.reduce((sum, value) => sum + value, 0) / values.length).toFixed(2)),
  p50_ms: Number(percentile(values, 0.5).toFixed(2)),
  p99_ms: Number(percentile(values, 0.99).toFixed(2)),
});

async function main(): Promise<void> {
  const calls = option('calls', 200);
  const warmup = option('warmup', 20);
  const rounds = option('rounds', 4);
  const dir = mkdtempSync(join(tmpdir(), 'openai-agents-bench-'));
  const served = await startLedger(join(dir, 'ledger'));
  const provider = await startInvoiceProvider({ port: 0 });
  const { createInvoice, lookup } = invoiceTools(provider.url);
  const ledger = new LedgerClient({ baseUrl: served.baseUrl });
  const input: InvoiceInput = { customer_id: 'cus_bench', amount_cents: 100, currency: 'EUR' };
  const args = JSON.stringify(input);
  const context = new RunContext();
  const details = (n: number) =>
    ({
      toolCall: { type: 'function_call', callId: `c${n}`, name: 'create_invoice', arguments: args },
    }) as never;
  const bareTool = tool({
    name: 'create_invoice',
    description: 'Creates an invoice.',
    parameters: SCHEMA,
    execute: async (value, _context, callDetails) => {
      const key = `bench/oa-bare/${callDetails?.toolCall?.callId}`;
      const envelope = (await createInvoice(value, {
        operationRef: key,
        idempotencyKey: key,
        attempt: 1,
        sideEffect: 'write',
      })) as ToolEnvelope;
      return JSON.stringify(envelope);
    },
  }) as Invokable;
  const bare = async (n: number) =>
    (JSON.parse(String(await bareTool.invoke(context, args, details(n)))) as ToolEnvelope).ok;
  const wrapped = async (n: number) => {
    const wrappedTool = ledgeredAgentsTool({
      ledger,
      name: 'create_invoice',
      description: 'Creates an invoice.',
      runId: `bench-oa-${n}`,
      policy: POLICY,
      call: createInvoice,
      lookup,
      parameters: SCHEMA,
    });
    return String(await wrappedTool.invoke(context, args, details(n))).startsWith('create_invoice succeeded');
  };
  const startedLoad = loadavg()[0];
  let n = 0;
  for (let i = 0; i < warmup; i++) {
    await timed(() => bare(++n));
    await timed(() => wrapped(++n));
  }
  const bareTimes: number[] = [];
  const wrappedTimes: number[] = [];
  const perRound = Math.ceil(calls / rounds);
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < perRound; i++) bareTimes.push(await timed(() => bare(++n)));
    for (let i = 0; i < perRound; i++) wrappedTimes.push(await timed(() => wrapped(++n)));
  }
  const b = summary(bareTimes);
  const w = summary(wrappedTimes);
  const result = {
    measured_at: new Date().toISOString(),
    machine: {
      cpus: cpus().length,
      model: cpus()[0]?.model,
      node: process.version,
      load_average: [startedLoad, loadavg()[0]].map((value) => Number(value.toFixed(2))),
    },
    frameworks: {
      'openai-agents': {
        bare: b,
        wrapped: w,
        added_p50_ms: Number((w.p50_ms - b.p50_ms).toFixed(2)),
        ratio_p50: Number((w.p50_ms / b.p50_ms).toFixed(2)),
      },
    },
  };
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  await provider.close();
  await served.stop();
  rmSync(dir, { recursive: true, force: true });
}

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
