/**
 * Figure 8: steps per second driven end to end through the SDK's LedgerWorker (plan with one call,
 * the feed hands the step out under a lease, dispatch through the gate, the provider's create, the
 * envelope recorded, the lease given back), with 50 steps open at any time: a planner starts a new
 * step as each one succeeds. Beside it, the same steps driven by 50 loops of executeWrite (plan,
 * dispatch, call, envelope: the gate without the feed). Each round measures both, each on a fresh
 * service, in turn (A B, then B A, then A B): on a shared machine one 10 s window of each
 * moved the ratio by ±10 % between runs, so the figure is the median of the rounds' ratios, with
 * every round in the details.
 *
 * The peer durable-execution engines (Restate, DBOS) are measured in the tool-step figure
 * (tool-steps.figure.ts), on the workload both sides can run.
 * The provider is the example invoice provider in this process, without faults.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { executeWrite, LedgerClient, LedgerWorker } from '@recovery-ledger/client';
import { startInvoiceProvider } from '../../examples/invoice-provider/invoice-provider';
import { CREATE_INVOICE, invoiceTools, VERIFICATION_TOOL } from '../../examples/invoice-tools';
import { cpuSecondsOf, startLedger } from '../support/processes';
import type { FigureRow } from '../support/report';

export interface WorkerStepsSettings {
  dir: string;
  seconds: number;
  warmupSeconds: number;
  /** Steps open at once (50 in the published figure). */
  open?: number;
  /** Rounds of both (3 by default: A B, B A, A B). */
  rounds?: number;
  nodeArgs?: string[];
}

interface Driven {
  steps: number;
  seconds: number;
  stepsPerSecond: number;
  serverCpuMsPerStep: number;
  p50Ms: number;
  p99Ms: number;
}

const INPUT = { customer_id: 'cus_bench', amount_cents: 4200, currency: 'EUR' };

function quantile(values: number[], q: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
}

/** Runs `drive` with a warm-up that is not counted, then counts steps that end in the window. */
async function window(
  settings: WorkerStepsSettings,
  pid: number,
  drive: (onDone: (startedAt: number) => void, stop: AbortSignal) => Promise<void>,
): Promise<Driven> {
  let counting = false;
  let steps = 0;
  const latencies: number[] = [];
  const stop = new AbortController();
  const running = drive((startedAt) => {
    if (!counting) return;
    steps += 1;
    latencies.push(performance.now() - startedAt);
  }, stop.signal);
  await new Promise((r) => setTimeout(r, settings.warmupSeconds * 1000));
  const cpuBefore = cpuSecondsOf(pid);
  counting = true;
  const started = performance.now();
  await new Promise((r) => setTimeout(r, settings.seconds * 1000));
  counting = false;
  const seconds = (performance.now() - started) / 1000;
  const cpu = cpuSecondsOf(pid) - cpuBefore;
  stop.abort();
  await running;
  const result = {
    steps,
    seconds,
    stepsPerSecond: steps / seconds,
    serverCpuMsPerStep: steps > 0 ? (cpu * 1000) / steps : 0,
    p50Ms: quantile(latencies, 0.5),
    p99Ms: quantile(latencies, 0.99),
  };
  return result;
}

async function withLedger<T>(
  settings: WorkerStepsSettings,
  name: string,
  run: (client: LedgerClient, pid: number) => Promise<T>,
): Promise<T> {
  const dataDir = join(settings.dir, name);
  mkdirSync(dataDir, { recursive: true });
  const server = await startLedger(dataDir, {}, settings.nodeArgs);
  try {
    return await run(new LedgerClient({ baseUrl: server.baseUrl, timeoutMs: 30_000 }), server.pid);
  } finally {
    await server.stop();
  }
}

export async function workerStepsFigure(
  settings: WorkerStepsSettings,
  log: (line: string) => void,
): Promise<FigureRow> {
  const open = settings.open ?? 50;
  const provider = await startInvoiceProvider();
  const { createInvoice, lookup } = invoiceTools(provider.url, { timeoutMs: 10_000 });
  const policy = { verification_tool: VERIFICATION_TOOL };
  let serial = 0;
  const nextRef = (prefix: string) => `${prefix}/step_${++serial}`;
  const direct = () =>
    withLedger(settings, `worker-baseline-${serial}`, (client, pid) =>
      window(settings, pid, async (onDone, stop) => {
        await Promise.all(
          Array.from({ length: open }, async () => {
            while (!stop.aborted) {
              const startedAt = performance.now();
              const outcome = await executeWrite(
                client,
                {
                  operationRef: nextRef('bench_direct'),
                  runId: 'bench_direct',
                  tool: CREATE_INVOICE,
                  input: INPUT,
                  policy,
                },
                createInvoice,
              );
              if (outcome.status === 'succeeded') onDone(startedAt);
            }
          }),
        );
      }),
    );
  const throughFeed = () =>
    withLedger(settings, `worker-feed-${serial}`, (client, pid) =>
      window(settings, pid, async (onDone, stop) => {
        const startedAt = new Map<string, number>();
        const start = async () => {
          if (stop.aborted) return;
          const operationRef = nextRef('bench_feed');
          startedAt.set(operationRef, performance.now());
          await client.startStep({ operationRef, runId: 'bench_feed', tool: CREATE_INVOICE, input: INPUT, policy });
        };
        const worker = new LedgerWorker(client, {
          tools: { [CREATE_INVOICE]: { call: createInvoice, lookup } },
          concurrency: open,
          waitMs: 1000,
          signal: stop,
          onEvent: (event) => {
            if (
              (event.type === 'recorded' || event.type === 'verified') &&
              (event.status === 'succeeded' || event.status === 'escalated')
            ) {
              const began = startedAt.get(event.operation_ref);
              startedAt.delete(event.operation_ref);
              if (began !== undefined && event.status === 'succeeded') onDone(began);
              void start();
            }
          },
        });
        const running = worker.run();
        await Promise.all(Array.from({ length: open }, () => start()));
        await running;
      }),
    );
  const rounds: Array<{ worker: Driven; executeWrite: Driven; ratio: number }> = [];
  try {
    for (let round = 0; round < (settings.rounds ?? 3); round++) {
      let worker: Driven;
      let baseline: Driven;
      if (round % 2 === 0) {
        log(
          `figure 8 round ${round + 1}: ${open} loops of executeWrite, then LedgerWorker, ${settings.seconds} s each`,
        );
        baseline = await direct();
        worker = await throughFeed();
      } else {
        log(
          `figure 8 round ${round + 1}: LedgerWorker, then ${open} loops of executeWrite, ${settings.seconds} s each`,
        );
        worker = await throughFeed();
        baseline = await direct();
      }
      const ratio = baseline.stepsPerSecond > 0 ? worker.stepsPerSecond / baseline.stepsPerSecond : 0;
      log(
        `    ${worker.stepsPerSecond.toFixed(0)} / ${baseline.stepsPerSecond.toFixed(0)} steps/s = ${(ratio * 100).toFixed(1)} %`,
      );
      rounds.push({ worker, executeWrite: baseline, ratio });
    }
    const median = [...rounds].sort((a, b) => a.ratio - b.ratio)[Math.floor((rounds.length - 1) / 2)];
    const figure = median.worker;
    const baseline = median.executeWrite;
    const restate = restateSkip();
    log(restate);
    return {
      id: '8',
      name: `steps end to end through LedgerWorker (plan, feed + lease, dispatch, call, envelope), ${open} open`,
      figure: { label: 'LedgerWorker', value: figure.stepsPerSecond, unit: 'steps/s' },
      baseline: { label: `${open} loops of executeWrite`, value: baseline.stepsPerSecond, unit: 'steps/s' },
      ratio: median.ratio,
      target: { text: '≥ 90 % (median of the rounds)', met: median.ratio >= 0.9 },
      details: {
        worker: figure,
        executeWrite: baseline,
        rounds: rounds.map((each) => ({ ...each, ratio: Number(each.ratio.toFixed(4)) })),
        restate,
      },
    };
  } finally {
    await provider.close();
  }
}

/** Restate is measured beside the ledger in the tool-step figure, on the workload both can run. */
function restateSkip(): string {
  return 'restate: not driven through LedgerWorker; measured beside the ledger in the tool-step figure (--only tool-steps)';
}
