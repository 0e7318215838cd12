/**
 * The load process of the tool-step figure (its own process, never the servers' event loop):
 * `connections` connections, each looping over one tool step after another, a step being the
 * requests its system needs to record it durably and idempotently and answer:
 *   ledger / fastify  POST [StepPlanned, AttemptDispatched], then POST the committed EnvelopeRecorded
 *                     (the same two bodies for the ledger and the Fastify routes);
 *   restate           one ingress call with an `idempotency-key`, the handler journals one ctx.run;
 *   dbos              one request starting a one-step workflow whose ID is the step's ref.
 * A step counts when every request of it answered 2xx inside the measured window; its latency runs
 * from its first request to its last answer. Prints `measuring` when the warm-up ends, then one
 * JSON result line.
 */
import { performance } from 'node:perf_hooks';
import { benchUuid, dispatchFact, INPUT_HASH, operationRef, planFact, submitPath } from './submit-bodies';

export type StepKind = 'ledger' | 'fastify' | 'restate' | 'dbos';

export interface StepJob {
  kind: StepKind;
  /** One server, or several: autocannon gives the connections to them in turn (a round-robin balancer's share). */
  url: string | string[];
  connections: number;
  seconds: number;
  warmupSeconds: number;
  label: string;
}

export interface StepResult {
  steps: number;
  seconds: number;
  stepsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  failedSteps: number;
  errors: number;
  statusCodes: Record<string, number>;
  /** This load process's own CPU (user + system) over the measured window, in ms. */
  loadCpuMs: number;
}

interface Request {
  method?: string;
  path?: string;
  body?: string;
  headers?: Record<string, string>;
}
interface Context {
  ref?: string;
  n?: number;
  startedAt?: number;
  failed?: boolean;
}
interface AutocannonResult {
  duration: number;
  errors: number;
  statusCodeStats?: Record<string, { count: number }>;
}
type Autocannon = (options: Record<string, unknown>) => Promise<AutocannonResult>;
// autocannon ships no types; this is the part of its API used here.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const autocannon = require('autocannon') as Autocannon;

const JSON_HEADERS = { 'content-type': 'application/json' };

/** The committed envelope of step n, as the ledger takes it (docs/contract.md §4). */
function envelopeFact(label: string, n: number) {
  const ref = operationRef(label, n);
  return {
    event_id: benchUuid(label, n, 2),
    type: 'EnvelopeRecorded',
    data: {
      attempt: 1,
      envelope: {
        ok: true,
        operation_ref: ref,
        commit_state: 'committed',
        result: { id: `inv_${n}` },
        verification: { checked_at: new Date().toISOString(), evidence_ref: `ev_${n}` },
      },
    },
  };
}

/** The requests of one step of `kind`, as autocannon request builders sharing the connection's context. */
function stepRequests(
  kind: StepKind,
  label: string,
  next: () => number,
  measuring: () => boolean,
  tally: (latency: number | undefined) => void,
) {
  const begin = (context: Context) => {
    const n = next();
    context.n = n;
    context.ref = operationRef(label, n);
    context.startedAt = performance.now();
    context.failed = false;
    return n;
  };
  const check = (status: number, context: Context) => {
    if (status < 200 || status >= 300) context.failed = true;
  };
  const end = (status: number, context: Context) => {
    check(status, context);
    if (!measuring()) return;
    tally(context.failed ? undefined : performance.now() - (context.startedAt ?? 0));
  };
  const body = (ref: string) => JSON.stringify({ operation_ref: ref, tool: 'create_invoice', input_hash: INPUT_HASH });
  switch (kind) {
    case 'ledger':
    case 'fastify':
      return [
        {
          setupRequest: (request: Request, context: Context): Request => {
            const n = begin(context);
            const events = [planFact(label, n), dispatchFact(label, n)];
            return {
              ...request,
              method: 'POST',
              path: submitPath(context.ref ?? ''),
              headers: JSON_HEADERS,
              body: JSON.stringify({ events }),
            };
          },
          onResponse: (status: number, _body: string, context: Context) => check(status, context),
        },
        {
          setupRequest: (request: Request, context: Context): Request => ({
            ...request,
            method: 'POST',
            path: submitPath(context.ref ?? ''),
            headers: JSON_HEADERS,
            body: JSON.stringify({ events: [envelopeFact(label, context.n ?? 0)] }),
          }),
          onResponse: (status: number, _body: string, context: Context) => end(status, context),
        },
      ];
    case 'restate':
      return [
        {
          setupRequest: (request: Request, context: Context): Request => {
            begin(context);
            const ref = context.ref ?? '';
            return {
              ...request,
              method: 'POST',
              path: '/toolStep/record',
              headers: { ...JSON_HEADERS, 'idempotency-key': ref },
              body: body(ref),
            };
          },
          onResponse: (status: number, _body: string, context: Context) => end(status, context),
        },
      ];
    case 'dbos':
      return [
        {
          setupRequest: (request: Request, context: Context): Request => {
            begin(context);
            const ref = context.ref ?? '';
            return {
              ...request,
              method: 'POST',
              path: `/steps/${encodeURIComponent(ref)}`,
              headers: JSON_HEADERS,
              body: body(ref),
            };
          },
          onResponse: (status: number, _body: string, context: Context) => end(status, context),
        },
      ];
  }
}

const quantile = (sorted: number[], q: number) =>
  sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];

async function main(): Promise<void> {
  const job = JSON.parse(process.argv[2] ?? '{}') as StepJob;
  let n = 0;
  let measuring = false;
  const latencies: number[] = [];
  let failedSteps = 0;
  const tally = (latency: number | undefined) => (latency === undefined ? (failedSteps += 1) : latencies.push(latency));
  const common = { url: job.url, connections: job.connections, pipelining: 1, timeout: 30 };
  if (job.warmupSeconds > 0) {
    await autocannon({
      ...common,
      duration: job.warmupSeconds,
      requests: stepRequests(
        job.kind,
        `${job.label}_warm`,
        () => n++,
        () => false,
        tally,
      ),
    });
  }
  process.stdout.write('measuring\n');
  measuring = true;
  const cpuAtStart = process.cpuUsage();
  const result = await autocannon({
    ...common,
    duration: job.seconds,
    requests: stepRequests(
      job.kind,
      job.label,
      () => n++,
      () => measuring,
      tally,
    ),
  });
  measuring = false;
  const cpu = process.cpuUsage(cpuAtStart);
  const statusCodes: Record<string, number> = {};
  for (const [code, stats] of Object.entries(result.statusCodeStats ?? {})) statusCodes[code] = stats.count;
  const sorted = [...latencies].sort((a, b) => a - b);
  const answer: StepResult = {
    steps: latencies.length,
    seconds: result.duration,
    stepsPerSecond: latencies.length / result.duration,
    p50Ms: quantile(sorted, 0.5),
    p99Ms: quantile(sorted, 0.99),
    failedSteps,
    errors: result.errors,
    statusCodes,
    loadCpuMs: (cpu.user + cpu.system) / 1000,
  };
  process.stdout.write(`${JSON.stringify(answer)}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`tool-steps load failed: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
