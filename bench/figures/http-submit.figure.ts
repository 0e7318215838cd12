/**
 * Figures 1 and 2: the HTTP submit path of the built service under 50 connections, each beside
 * the bare Fastify route measured right before it.
 *   1. one StepPlanned per request, each on a new operation (parse, validate, read an empty
 *      stream, decide, seal, append, COMMIT with fsync, answer);
 *   2. one AttemptDispatched per request on the operations figure 1 planned: the dispatch gate
 *      (read a two-event stream, fold, decide, append at the revision read).
 * Every 2xx is an acknowledged, durable append: the rows are counted after the server stops.
 */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import type { LoadJob, LoadResult } from '../support/load.worker';
import { cpuSecondsOf, groupCommits, runLoad, startBareFastify, startLedger, type Served } from '../support/processes';
import type { FigureRow } from '../support/report';

export interface HttpSettings {
  dir: string;
  seconds: number;
  warmupSeconds: number;
  connections: number;
  /** Extra node arguments for the service processes (e.g. --cpu-prof). */
  nodeArgs?: string[];
}

export interface Measured {
  result: LoadResult;
  /** Server CPU per answered request (warm-up included in both terms): robust to a busy machine. */
  cpuMsPerRequest: number;
  /** Appends per group commit (one fsync) during the run, for the service. */
  appendsPerCommit?: number;
}

/** Runs a load job against `server`, with its CPU time and (for the service) its group commits. */
export async function measured(server: Served, job: LoadJob, service: boolean): Promise<Measured> {
  const cpuBefore = cpuSecondsOf(server.pid);
  const groupsBefore = service ? await groupCommits(server.baseUrl) : undefined;
  const result = await runLoad(job);
  const cpu = cpuSecondsOf(server.pid) - cpuBefore;
  const answered = result.nextRequest - (job.startAt ?? 0);
  const out: Measured = { result, cpuMsPerRequest: answered > 0 ? (cpu * 1000) / answered : 0 };
  if (groupsBefore) {
    const after = await groupCommits(server.baseUrl);
    const commits = after.commits - groupsBefore.commits;
    if (commits > 0) out.appendsPerCommit = (after.appends - groupsBefore.appends) / commits;
  }
  return out;
}

async function bare(settings: HttpSettings, label: string): Promise<Measured> {
  const server = await startBareFastify();
  try {
    return await measured(server, { ...job(settings, server.baseUrl), scenario: { kind: 'plan', label } }, false);
  } finally {
    await server.stop();
  }
}

function job(settings: HttpSettings, url: string): Omit<LoadJob, 'scenario'> {
  return { url, connections: settings.connections, seconds: settings.seconds, warmupSeconds: settings.warmupSeconds };
}

const latency = ({ result, cpuMsPerRequest, appendsPerCommit }: Measured) => ({
  server_cpu_ms_per_request: Number(cpuMsPerRequest.toFixed(3)),
  ...(appendsPerCommit === undefined ? {} : { appends_per_group_commit: Number(appendsPerCommit.toFixed(1)) }),
  p50_ms: result.latencyMs.p50,
  p90_ms: result.latencyMs.p90,
  p99_ms: result.latencyMs.p99,
  max_ms: result.latencyMs.max,
  ok: result.ok,
  non2xx: result.non2xx,
  errors: result.errors + result.timeouts,
  status_codes: result.statusCodes,
});

export async function httpSubmitFigures(settings: HttpSettings, log: (line: string) => void): Promise<FigureRow[]> {
  const label = 'fig1';
  log('  figure 1: bare Fastify route, then the ledger (one StepPlanned per request)');
  const bare1m = await bare(settings, 'bare1');
  const dataDir = join(settings.dir, 'http');
  const ledger = await startLedger(dataDir, {}, settings.nodeArgs);
  let planm: Measured;
  let dispatchm: Measured;
  let bare2m: Measured;
  try {
    planm = await measured(ledger, { ...job(settings, ledger.baseUrl), scenario: { kind: 'plan', label } }, true);
    log('  figure 2: bare Fastify route, then the ledger (one AttemptDispatched per request on those operations)');
    bare2m = await bare(settings, 'bare2');
    dispatchm = await measured(
      ledger,
      { ...job(settings, ledger.baseUrl), scenario: { kind: 'dispatch', label, count: planm.result.nextRequest } },
      true,
    );
  } finally {
    await ledger.stop();
  }
  const [plan, dispatch, bare1, bare2] = [planm.result, dispatchm.result, bare1m.result, bare2m.result];
  const db = new Database(join(dataDir, 'events.sqlite'), { readonly: true });
  const count = (type: string) =>
    (
      db
        .prepare('SELECT COUNT(*) AS n FROM events WHERE type = ? AND stream LIKE ?')
        .get(type, `op-default:${label}/%`) as { n: number }
    ).n;
  const storedPlans = count('StepPlanned');
  const storedDispatches = count('AttemptDispatched');
  db.close();
  // Acknowledged means durable: every 2xx must be a stored row (warm-up answers are stored too).
  if (storedPlans < plan.ok || storedDispatches < dispatch.ok) {
    throw new Error(
      `acknowledged but not stored: plans ${plan.ok}/${storedPlans}, dispatches ${dispatch.ok}/${storedDispatches}`,
    );
  }
  const rows: FigureRow[] = [
    {
      id: '1',
      name: 'HTTP submit, 1 fact/request, 50 connections',
      figure: { label: 'ledger', value: plan.rps, unit: 'req/s' },
      baseline: { label: 'bare Fastify route', value: bare1.rps, unit: 'req/s' },
      ratio: plan.rps / bare1.rps,
      target: { text: '≥ 40 % and p99 < 20 ms', met: plan.rps / bare1.rps >= 0.4 && plan.latencyMs.p99 < 20 },
      details: { ledger: latency(planm), bare: latency(bare1m), stored_plans: storedPlans },
    },
    {
      id: '1b',
      name: 'HTTP submit latency (figure 1)',
      figure: { label: 'ledger', value: plan.latencyMs.p99, unit: `ms p99, p50 ${plan.latencyMs.p50} ms` },
      baseline: {
        label: 'bare Fastify route',
        value: bare1.latencyMs.p99,
        unit: `ms p99, p50 ${bare1.latencyMs.p50} ms`,
      },
      target: { text: 'p99 < 20 ms', met: plan.latencyMs.p99 < 20 },
      details: {},
    },
    {
      id: '2',
      name: 'dispatch decision (read, fold, decide, append) over HTTP, 50 connections',
      figure: { label: 'ledger', value: dispatch.rps, unit: 'req/s' },
      baseline: { label: 'bare Fastify route', value: bare2.rps, unit: 'req/s' },
      ratio: dispatch.rps / bare2.rps,
      details: {
        ledger: latency(dispatchm),
        bare: latency(bare2m),
        stored_dispatches: storedDispatches,
        note: 'no target of its own; the same bar as figure 1 applies',
      },
    },
  ];
  return rows;
}
