/**
 * The load generator, in its own process so that it never shares an event loop with the server it
 * measures: autocannon over loopback, bodies from submit-bodies.ts. Reads one JSON job from argv,
 * prints one JSON result line on stdout and exits.
 *
 *   node dist/bench/support/load.worker.js '{"url":"http://127.0.0.1:3000","connections":50,"seconds":10,"warmupSeconds":2,"scenario":{"kind":"plan","label":"x"}}'
 */
import { requestOf, type Scenario } from './submit-bodies';

export interface LoadJob {
  url: string;
  connections: number;
  /** Measured seconds (ignored when `amount` is set). */
  seconds: number;
  /** Requests in the measured part, instead of a duration. */
  amount?: number;
  /** Not counted: the server's JIT, caches and SQLite pages warm up here. */
  warmupSeconds: number;
  /** First request number (a later run can continue where an earlier one stopped). */
  startAt?: number;
  scenario: Scenario;
}

export interface LoadResult {
  /** 2xx answers per measured second. */
  rps: number;
  ok: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  seconds: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number; mean: number };
  /** Request numbers used, warm-up included: the next run may start at `nextRequest`. */
  nextRequest: number;
}

interface AutocannonRequest {
  method?: string;
  path?: string;
  body?: string;
  headers?: Record<string, string>;
}
interface AutocannonResult {
  duration: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  '2xx': number;
  latency: { p50: number; p90: number; p99: number; max: number; average: number };
  statusCodeStats?: Record<string, { count: number }>;
}
type Autocannon = (options: Record<string, unknown>) => Promise<AutocannonResult>;
// autocannon ships no types; this is the part of its API used here.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const autocannon = require('autocannon') as Autocannon;

async function main(): Promise<void> {
  const job = JSON.parse(process.argv[2] ?? '{}') as LoadJob;
  let next = job.startAt ?? 0;
  const requests = [
    {
      setupRequest: (request: AutocannonRequest): AutocannonRequest => {
        const { method, path, body } = requestOf(job.scenario, next++);
        return body === undefined
          ? { ...request, method, path }
          : { ...request, method, path, body, headers: { 'content-type': 'application/json' } };
      },
    },
  ];
  const common = { url: job.url, connections: job.connections, pipelining: 1, timeout: 30, requests };
  if (job.warmupSeconds > 0) await autocannon({ ...common, duration: job.warmupSeconds });
  const result = await autocannon(
    job.amount ? { ...common, amount: job.amount } : { ...common, duration: job.seconds },
  );
  const statusCodes: Record<string, number> = {};
  for (const [code, stats] of Object.entries(result.statusCodeStats ?? {})) statusCodes[code] = stats.count;
  const answer: LoadResult = {
    rps: result['2xx'] / result.duration,
    ok: result['2xx'],
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes,
    seconds: result.duration,
    latencyMs: {
      p50: result.latency.p50,
      p90: result.latency.p90,
      p99: result.latency.p99,
      max: result.latency.max,
      mean: result.latency.average,
    },
    nextRequest: next,
  };
  process.stdout.write(`${JSON.stringify(answer)}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`load worker failed: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
