/**
 * What a framework integration costs per tool call, measured beside the bare tool in the same run:
 * the same create call to the example invoice provider (in this process, loopback HTTP), once as
 * the framework's own tool runs it bare, and once through the integration's wrapper, which adds the
 * ledger's plan, dispatch gate and recorded envelope (three durable submits over loopback HTTP) to
 * every call. Each wrapper is driven through the framework's own tool object (its execute), with a
 * new operation per call. Blocks of bare and wrapped calls alternate, so a drift of the machine's
 * load touches both alike.
 *
 *   npm run build && node dist/bench/agent-frameworks-overhead.bench.js [--calls 200] [--warmup 20] [--rounds 4]
 *
 * Not a test: nothing is asserted. Loopback only; the temporary directory is removed at the end.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { LedgerClient, type ToolCall, type ToolEnvelope } from '@recovery-ledger/client';
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

/** One framework's tool, bare and wrapped: each answers whether the call succeeded. */
interface Subject {
  bare: (input: InvoiceInput, n: number) => Promise<boolean>;
  wrapped: (input: InvoiceInput, n: number) => Promise<boolean>;
}

interface Setup {
  ledger: LedgerClient;
  call: ToolCall<InvoiceInput>;
  lookup: ReturnType<typeof invoiceTools>['lookup'];
}

const POLICY = { max_attempts: 3, consistency_window_ms: 30_000 };
const bareCall = (setup: Setup, input: InvoiceInput, key: string) =>
  setup.call(input, {
    operationRef: key,
    idempotencyKey: key,
    attempt: 1,
    sideEffect: 'write',
  }) as Promise<ToolEnvelope>;

/** Each integration, loaded only when measured (each subpath loads its own framework). */
const SUBJECTS: Record<string, (setup: Setup) => Promise<Subject>> = {
  'ai-sdk': async (setup) => {
    const { tool } = await import('ai');
    const { jsonSchema } = await import('ai');
    const { ledgeredTool } = await import('@recovery-ledger/agent-frameworks/ai-sdk');
    const schema = jsonSchema<InvoiceInput>({
      type: 'object',
      properties: { customer_id: { type: 'string' }, amount_cents: { type: 'integer' }, currency: { type: 'string' } },
      required: ['customer_id', 'amount_cents', 'currency'],
    });
    const options = (toolCallId: string) => ({ toolCallId, messages: [], context: {} }) as never;
    const bare = tool({
      inputSchema: schema,
      execute: async (input: InvoiceInput, { toolCallId }: { toolCallId: string }) =>
        bareCall(setup, input, `bench/ai-bare/${toolCallId}`),
    } as never) as unknown as { execute: (input: InvoiceInput, options: never) => Promise<ToolEnvelope> };
    return {
      bare: async (input, n) => (await bare.execute(input, options(`c${n}`))).ok,
      wrapped: async (input, n) => {
        const wrapped = ledgeredTool({
          ledger: setup.ledger,
          name: 'create_invoice',
          runId: `bench-ai-${n}`,
          policy: POLICY,
          call: setup.call,
          lookup: setup.lookup,
          inputSchema: schema,
        }) as unknown as { execute: (input: InvoiceInput, options: never) => Promise<{ ok: boolean }> };
        return (await wrapped.execute(input, options(`c${n}`))).ok;
      },
    };
  },
  langchain: async (setup) => {
    const { tool } = await import('langchain');
    const { z } = await import('zod');
    const { ledgerAttempt, ledgerMiddleware } = await import('@recovery-ledger/agent-frameworks/langchain');
    const schema = z.object({ customer_id: z.string(), amount_cents: z.number().int(), currency: z.string() });
    const bare = tool((input) => bareCall(setup, input as InvoiceInput, `bench/langchain-bare/${Math.random()}`), {
      name: 'create_invoice',
      description: 'Creates an invoice.',
      schema,
    });
    const ledgered = tool((input) => setup.call(input as InvoiceInput, ledgerAttempt()), {
      name: 'create_invoice',
      description: 'Creates an invoice.',
      schema,
    });
    const invoke = (target: { invoke: (call: any) => Promise<unknown> }, input: InvoiceInput, n: number) =>
      target.invoke({ name: 'create_invoice', args: input, id: `c${n}`, type: 'tool_call' }) as Promise<{
        content: string;
        artifact?: { ok: boolean };
      }>;
    return {
      // A tool call as LangGraph's tool node makes it: the tool invoked with the model's tool call.
      bare: async (input, n) => (JSON.parse((await invoke(bare, input, n)).content) as ToolEnvelope).ok,
      // The same, through the middleware's wrapToolCall, as createAgent runs it.
      wrapped: async (input, n) => {
        const middleware = ledgerMiddleware({
          create_invoice: {
            ledger: setup.ledger,
            name: 'create_invoice',
            runId: `bench-langchain-${n}`,
            policy: POLICY,
            lookup: setup.lookup,
          },
        });
        const wrapToolCall = middleware.wrapToolCall as unknown as (
          request: unknown,
          handler: (request: { toolCall: { args: unknown } }) => Promise<unknown>,
        ) => Promise<{ artifact?: { ok: boolean } }>;
        const toolCall = { name: 'create_invoice', args: input, id: `c${n}`, type: 'tool_call' as const };
        const message = await wrapToolCall(
          { toolCall, tool: ledgered, state: { messages: [] }, runtime: {} },
          (request) => invoke(ledgered, request.toolCall.args as InvoiceInput, n),
        );
        return message.artifact?.ok === true;
      },
    };
  },
  mastra: async (setup) => {
    const { createTool } = await import('@mastra/core/tools');
    const { z } = await import('zod');
    const { ledgeredMastraTool } = await import('@recovery-ledger/agent-frameworks/mastra');
    const schema = z.object({ customer_id: z.string(), amount_cents: z.number().int(), currency: z.string() });
    type Executable = { execute: (input: InvoiceInput, context: never) => Promise<{ ok: boolean }> };
    const bare = createTool({
      id: 'create_invoice',
      description: 'Creates an invoice.',
      inputSchema: schema,
      execute: async (input: InvoiceInput) => bareCall(setup, input, `bench/mastra-bare/${Math.random()}`),
    } as never) as unknown as Executable;
    const context = (n: number) => ({ agent: { toolCallId: `c${n}` } }) as never;
    return {
      bare: async (input, n) => (await bare.execute(input, context(n))).ok,
      wrapped: async (input, n) => {
        const wrapped = ledgeredMastraTool({
          ledger: setup.ledger,
          name: 'create_invoice',
          description: 'Creates an invoice.',
          runId: `bench-mastra-${n}`,
          policy: POLICY,
          call: setup.call,
          lookup: setup.lookup,
          inputSchema: schema,
        }) as unknown as Executable;
        return (await wrapped.execute(input, context(n))).ok;
      },
    };
  },
};

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
  const onlyIndex = process.argv.indexOf('--only');
  const only = onlyIndex >= 0 ? process.argv[onlyIndex + 1].split(',') : Object.keys(SUBJECTS);
  const dir = mkdtempSync(join(tmpdir(), 'agent-frameworks-bench-'));
  const served = await startLedger(join(dir, 'ledger'));
  const provider = await startInvoiceProvider({ port: 0 });
  const { createInvoice, lookup } = invoiceTools(provider.url);
  const setup: Setup = { ledger: new LedgerClient({ baseUrl: served.baseUrl }), call: createInvoice, lookup };
  const input: InvoiceInput = { customer_id: 'cus_bench', amount_cents: 100, currency: 'EUR' };
  const startedLoad = loadavg()[0];
  const frameworks: Record<string, unknown> = {};
  let n = 0;
  for (const name of only) {
    const subject = await SUBJECTS[name](setup);
    for (let i = 0; i < warmup; i++) {
      await subject.bare(input, ++n);
      await subject.wrapped(input, ++n);
    }
    const bare: number[] = [];
    const wrapped: number[] = [];
    const perRound = Math.ceil(calls / rounds);
    for (let round = 0; round < rounds; round++) {
      for (let i = 0; i < perRound; i++) bare.push(await timed(() => subject.bare(input, ++n)));
      for (let i = 0; i < perRound; i++) wrapped.push(await timed(() => subject.wrapped(input, ++n)));
    }
    const b = summary(bare);
    const w = summary(wrapped);
    frameworks[name] = {
      bare: b,
      wrapped: w,
      added_p50_ms: Number((w.p50_ms - b.p50_ms).toFixed(2)),
      ratio_p50: Number((w.p50_ms / b.p50_ms).toFixed(2)),
    };
  }
  const result = {
    measured_at: new Date().toISOString(),
    machine: {
      cpus: cpus().length,
      model: cpus()[0]?.model,
      node: process.version,
      load_average: [startedLoad, loadavg()[0]].map((value) => Number(value.toFixed(2))),
    },
    frameworks,
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
