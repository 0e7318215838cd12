/**
 * The tool-step figure: one tool step recorded durably and idempotently and answered, the ledger beside the
 * systems an agent runtime could use instead, each measured in the same run on the same machine:
 *   ledger            the built service (local mode, rate limit raised): [StepPlanned,
 *                     AttemptDispatched] in one request, then the committed EnvelopeRecorded;
 *   restate           Restate server + Node SDK, one ctx.run per step, idempotency key, fsync on;
 *   dbos              DBOS on a private PostgreSQL (fsync, synchronous_commit on), one-step workflow;
 *   bare              the bare Fastify route, the same two requests, no storage;
 *   sqlite-txn        Fastify + better-sqlite3, one durable transaction per request (WAL, FULL);
 *   sqlite-group      Fastify + better-sqlite3, a one-tick group commit (WAL, FULL).
 * Rounds pair the ledger with one peer at a time, A B then B A, each on a fresh server. CPU is the
 * user + system time of every process of the system (Restate's server and its SDK process;
 * PostgreSQL's postmaster and backends and the DBOS process) over the measured window; memory is
 * the peak, sampled twice a second, of the sum of their proportional set sizes (Pss: a page shared
 * by PostgreSQL's backends counts once). Peers are installed on demand into bench/.peers; a peer
 * that cannot be had is a printed line, not a failure.
 */
import Database from 'better-sqlite3';
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join, resolve } from 'node:path';
import { ensurePeers, PEER_PREFIX, type BenchPeer } from '../support/peers';
import { postgresBinaries, startPostgres, type Postgres } from '../support/peers/postgres';
import { restateBinary, startRestateServer } from '../support/peers/restate-server';
import { DIST, serve, startBareFastify, startLedger } from '../support/processes';
import type { FigureRow } from '../support/report';
import type { StepJob, StepKind, StepResult } from '../support/tool-steps.load';
import { setTimeout as sleep } from 'node:timers/promises';

export const TOOL_STEP_PEERS = ['restate', 'dbos', 'bare', 'sqlite-txn', 'sqlite-group'] as const;
export type ToolStepPeer = (typeof TOOL_STEP_PEERS)[number];

export interface ToolStepSettings {
  dir: string;
  seconds: number;
  warmupSeconds: number;
  connections: number;
  rounds: number;
  peers: readonly ToolStepPeer[];
  /** Extra Node arguments for the ledger's process (`--profile` passes --cpu-prof here). */
  nodeArgs?: string[];
}

type SystemId = 'ledger' | ToolStepPeer;

const NAMES: Record<SystemId, string> = {
  ledger: 'this ledger (local mode, rate limit raised)',
  restate: 'Restate 1.7.12 server + Node SDK 1.17.2, one `ctx.run` per step, idempotency key, fsync on',
  dbos: 'DBOS 5.3.0 on PostgreSQL (fsync, synchronous_commit on), a workflow with one step',
  bare: 'bare Fastify route, same two requests, no storage',
  'sqlite-txn': 'Fastify + better-sqlite3, one durable transaction per request (WAL, FULL)',
  'sqlite-group': 'Fastify + better-sqlite3 with a one-tick group commit (WAL, FULL)',
};

export interface Running {
  url: string | string[];
  kind: StepKind;
  /** Root processes of the system; their descendants are counted too. */
  pids: number[];
  /** Named parts of `pids` (each a list of roots, descendants counted) whose CPU is also reported apart. */
  parts?: Record<string, number[]>;
  /** Steps the system holds as stored after it stopped, where it can be read (a floor check). */
  stored?: () => number;
  /** The same, asked of the system while it still runs (Restate answers it through its admin API). */
  storedWhileRunning?: () => Promise<number>;
  stop(): Promise<void>;
}

interface Measurement {
  system: SystemId;
  round: number;
  result: StepResult;
  cpuMsPerStep: number;
  peakPssMb: number;
}

export const median = (values: number[]) => {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

/** Every pid in /proc whose ancestry reaches one of `roots` (the roots included). */
function processTree(roots: number[]): number[] {
  const parent = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      parent.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      /* gone meanwhile */
    }
  }
  const wanted = new Set(roots.filter((pid) => parent.has(pid)));
  for (let grew = true; grew;) {
    grew = false;
    for (const [pid, ppid] of parent) {
      if (!wanted.has(pid) && wanted.has(ppid)) {
        wanted.add(pid);
        grew = true;
      }
    }
  }
  return [...wanted];
}

/** utime + stime in seconds of each process of the tree (threads included: /proc/<pid>/stat sums them). */
function cpuOfTree(roots: number[]): Map<number, number> {
  const cpu = new Map<number, number>();
  for (const pid of processTree(roots)) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      cpu.set(pid, (Number(fields[11]) + Number(fields[12])) / 100);
    } catch {
      /* gone meanwhile */
    }
  }
  return cpu;
}

function pssOfTreeMb(roots: number[]): number {
  let kb = 0;
  for (const pid of processTree(roots)) {
    try {
      kb += Number(/^Pss:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1] ?? 0);
    } catch {
      /* gone meanwhile, or no smaps_rollup */
    }
  }
  return kb / 1024;
}

/** The load's job for `running`: the figure's connections, warm-up and window, steps labelled `label`. */
export function stepJob(
  running: Running,
  settings: { connections: number; seconds: number; warmupSeconds: number },
  label: string,
): StepJob {
  return {
    kind: running.kind,
    url: running.url,
    connections: settings.connections,
    seconds: settings.seconds,
    warmupSeconds: settings.warmupSeconds,
    label,
  };
}

export interface Driven {
  result: StepResult;
  cpuMsPerStep: number;
  /** The same per named part of the system (`Running.parts`). */
  cpuMsPerStepOf: Record<string, number>;
  peakPssMb: number;
}

/** Runs the load process against `running`, with CPU over the measured window and peak memory. */
export function drive(running: Running, job: StepJob, onMeasuring?: () => void): Promise<Driven> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(process.execPath, [resolve(DIST, 'bench/support/tool-steps.load.js'), JSON.stringify(job)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let cpuAtStart: Map<number, number> | undefined;
    let peak = 0;
    const sampler = setInterval(() => (peak = Math.max(peak, pssOfTreeMb(running.pids))), 500);
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk;
      if (!cpuAtStart && stdout.includes('measuring\n')) {
        cpuAtStart = cpuOfTree(running.pids);
        onMeasuring?.();
      }
    });
    child.stderr?.on('data', (chunk) => (stderr += chunk));
    child.once('exit', (code) => {
      const cpuAtEnd = cpuOfTree(running.pids);
      peak = Math.max(peak, pssOfTreeMb(running.pids));
      clearInterval(sampler);
      if (code !== 0) return reject(new Error(`tool-steps load exited ${code}: ${stderr}`));
      try {
        const result = JSON.parse(stdout.trim().split('\n').pop() ?? '') as StepResult;
        // A process born inside the window counts from zero; one that ended inside it is lost (rare: pools keep their backends).
        const cpuOf = (pids: Iterable<number>) => {
          let cpu = 0;
          for (const pid of pids) cpu += (cpuAtEnd.get(pid) ?? 0) - (cpuAtStart?.get(pid) ?? 0);
          return result.steps > 0 ? (cpu * 1000) / result.steps : 0;
        };
        const cpuMsPerStepOf: Record<string, number> = {};
        for (const [part, roots] of Object.entries(running.parts ?? {}))
          cpuMsPerStepOf[part] = cpuOf(processTree(roots).filter((pid) => cpuAtEnd.has(pid)));
        resolveRun({ result, cpuMsPerStep: cpuOf(cpuAtEnd.keys()), cpuMsPerStepOf, peakPssMb: peak });
      } catch (error) {
        reject(new Error(`tool-steps load printed no result: ${stdout} ${stderr} (${String(error)})`));
      }
    });
  });
}

const tcpReady = (baseUrl: string) =>
  new Promise<boolean>((resolveReady) => {
    const url = new URL(baseUrl);
    const socket = connect(Number(url.port), url.hostname);
    socket.once('connect', () => {
      socket.destroy();
      resolveReady(true);
    });
    socket.once('error', () => resolveReady(false));
  });

/** How each system is started fresh for one measurement; undefined with a reason when it cannot run. */
export class Systems {
  private postgres?: Postgres;
  private postgresBin?: string;
  private databases = 0;
  readonly skipped = new Map<ToolStepPeer, string>();

  constructor(
    private readonly settings: ToolStepSettings,
    private readonly log: (line: string) => void,
  ) {}

  /** Installs what the selected peers need; records a reason for each that cannot run. */
  prepare(): void {
    const wanted: BenchPeer[] = [];
    if (this.settings.peers.includes('restate')) wanted.push('@restatedev/restate-server', '@restatedev/restate-sdk');
    if (this.settings.peers.includes('dbos')) wanted.push('@dbos-inc/dbos-sdk');
    const have = wanted.length > 0 ? ensurePeers(this.log, wanted) : new Set<BenchPeer>();
    if (this.settings.peers.includes('restate')) {
      if (!have.has('@restatedev/restate-server') || !have.has('@restatedev/restate-sdk')) {
        this.skipped.set(
          'restate',
          `@restatedev/restate-server and @restatedev/restate-sdk could not be installed into ${PEER_PREFIX}`,
        );
      } else if (!restateBinary()) {
        this.skipped.set(
          'restate',
          `no restate-server binary for ${process.platform}-${process.arch} in ${PEER_PREFIX}`,
        );
      }
    }
    if (this.settings.peers.includes('dbos')) {
      if (!have.has('@dbos-inc/dbos-sdk'))
        this.skipped.set('dbos', `@dbos-inc/dbos-sdk could not be installed into ${PEER_PREFIX}`);
      else {
        const found = postgresBinaries(this.log);
        if ('skip' in found) this.skipped.set('dbos', found.skip);
        else this.postgresBin = found.bin;
      }
    }
  }

  async start(system: SystemId, name: string): Promise<Running> {
    const dataDir = join(this.settings.dir, name);
    mkdirSync(dataDir, { recursive: true });
    switch (system) {
      case 'ledger': {
        const server = await startLedger(dataDir, {}, this.settings.nodeArgs ?? []);
        return {
          url: server.baseUrl,
          kind: 'ledger',
          pids: [server.pid],
          stored: () =>
            storedRows(
              join(dataDir, 'events.sqlite'),
              "SELECT COUNT(*) AS n FROM events WHERE type = 'EnvelopeRecorded' AND stream LIKE ?",
              `op-default:${name}/%`,
            ),
          stop: () => server.stop(),
        };
      }
      case 'bare': {
        const server = await startBareFastify();
        return { url: server.baseUrl, kind: 'fastify', pids: [server.pid], stop: () => server.stop() };
      }
      case 'sqlite-txn':
      case 'sqlite-group': {
        const file = join(dataDir, 'route.sqlite');
        const server = await serve(
          resolve(DIST, 'bench/support/peers/sqlite-route.server.js'),
          { MODE: system === 'sqlite-txn' ? 'txn' : 'group', DB: file },
          async (baseUrl) =>
            (
              await fetch(`${baseUrl}/v1/operations/x/events`, {
                method: 'POST',
                headers: { 'content-type': 'application/json' },
                body: '{"events":[]}',
              })
            ).ok,
        );
        return {
          url: server.baseUrl,
          kind: 'fastify',
          pids: [server.pid],
          stored: () =>
            storedRows(
              file,
              "SELECT COUNT(*) AS n FROM events WHERE type = 'EnvelopeRecorded' AND stream LIKE ?",
              `${name}/%`,
            ),
          stop: () => server.stop(),
        };
      }
      case 'restate': {
        const restate = await startRestateServer(restateBinary() ?? '', join(dataDir, 'restate'));
        try {
          // Logs at warn, as the ledger runs: the SDK would otherwise log two lines per invocation.
          const service = await serve(
            resolve(DIST, 'bench/support/peers/restate.service.js'),
            { RESTATE_LOGGING: 'WARN' },
            tcpReady,
          );
          await restate.register(service.baseUrl);
          return {
            url: restate.ingressUrl,
            kind: 'restate',
            pids: [restate.pid, service.pid],
            storedWhileRunning: () => restate.completed(`${name}/%`),
            stop: async () => {
              await restate.stop();
              await service.stop();
            },
          };
        } catch (error) {
          await restate.stop();
          throw error;
        }
      }
      case 'dbos': {
        if (!this.postgres) {
          this.postgres = await startPostgres(this.postgresBin ?? '');
          this.log(`  PostgreSQL started from ${this.postgresBin} (pid ${this.postgres.pid})`);
        }
        const postgres = this.postgres;
        const database = `dbos_bench_${++this.databases}`;
        postgres.createDatabase(database);
        const server = await serve(
          resolve(DIST, 'bench/support/peers/dbos.server.js'),
          { DBOS_SYSTEM_DATABASE_URL: postgres.url(database) },
          tcpReady,
        );
        return {
          url: server.baseUrl,
          kind: 'dbos',
          pids: [server.pid, postgres.pid],
          // The label is [a-z0-9_] only: safe inside the literal.
          stored: () =>
            Number(
              postgres
                .query(
                  database,
                  `SELECT count(*) FROM dbos.workflow_status WHERE workflow_uuid LIKE '${name}/%' AND status = 'SUCCESS'`,
                )
                .trim(),
            ),
          stop: () => server.stop(),
        };
      }
    }
  }

  close(): void {
    this.postgres?.stop();
    this.postgres = undefined;
  }
}

function storedRows(file: string, sql: string, pattern: string): number {
  const db = new Database(file, { readonly: true });
  try {
    return (db.prepare(sql).get(pattern) as { n: number }).n;
  } finally {
    db.close();
  }
}

async function measure(
  systems: Systems,
  settings: ToolStepSettings,
  system: SystemId,
  round: number,
  log: (line: string) => void,
): Promise<Measurement> {
  const label = `ts_${system.replace('-', '_')}_${round}_${Date.now().toString(36)}`;
  const running = await systems.start(system, label);
  let driven: Awaited<ReturnType<typeof drive>>;
  let storedLive: number | undefined;
  try {
    await sleep(200);
    driven = await drive(running, stepJob(running, settings, label));
    if (running.storedWhileRunning) storedLive = await running.storedWhileRunning();
  } finally {
    await running.stop();
  }
  const { result } = driven;
  if (result.steps === 0)
    throw new Error(
      `${system}: no step answered in ${result.seconds} s (${result.failedSteps} failed, ${result.errors} errors, ${JSON.stringify(result.statusCodes)})`,
    );
  // Acknowledged means stored: every step answered 2xx must be a row once the server has stopped.
  const stored = running.stored ? running.stored() : storedLive;
  if (stored !== undefined && stored < result.steps)
    throw new Error(`${system}: ${result.steps} steps acknowledged but ${stored} stored`);
  log(
    `  ${system.padEnd(12)} round ${round + 1}: ${result.stepsPerSecond.toFixed(0).padStart(6)} steps/s, p50 ${result.p50Ms.toFixed(1)} ms, p99 ${result.p99Ms.toFixed(1)} ms, ` +
      `${driven.cpuMsPerStep.toFixed(2)} CPU ms/step, ${driven.peakPssMb.toFixed(0)} MB` +
      (stored !== undefined ? `, ${result.steps} acknowledged, ${stored} stored` : '') +
      (result.failedSteps + result.errors > 0
        ? `, ${result.failedSteps} failed steps, ${result.errors} errors ${JSON.stringify(result.statusCodes)}`
        : ''),
  );
  return { system, round, result, cpuMsPerStep: driven.cpuMsPerStep, peakPssMb: driven.peakPssMb };
}

interface SystemSummary {
  system: SystemId;
  stepsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  cpuMsPerStep: number;
  peakMb: number;
  /** Ledger ÷ this system: median of the ledger's paired rounds over this system's median, and the per-round range. */
  ratio?: { value: number; min: number; max: number };
  rounds: number;
}

function summarise(system: SystemId, own: Measurement[], pairedLedger: Measurement[]): SystemSummary {
  const summary: SystemSummary = {
    system,
    stepsPerSecond: median(own.map((m) => m.result.stepsPerSecond)),
    p50Ms: median(own.map((m) => m.result.p50Ms)),
    p99Ms: median(own.map((m) => m.result.p99Ms)),
    cpuMsPerStep: median(own.map((m) => m.cpuMsPerStep)),
    peakMb: Math.max(...own.map((m) => m.peakPssMb)),
    rounds: own.length,
  };
  if (system !== 'ledger' && pairedLedger.length > 0) {
    const perRound = own.map((m) => {
      const ledger = pairedLedger.find((l) => l.round === m.round);
      return ledger ? ledger.result.stepsPerSecond / m.result.stepsPerSecond : NaN;
    });
    summary.ratio = {
      value: median(pairedLedger.map((m) => m.result.stepsPerSecond)) / summary.stepsPerSecond,
      min: Math.min(...perRound),
      max: Math.max(...perRound),
    };
  }
  return summary;
}

const fmt = (value: number) =>
  value >= 100 ? Math.round(value).toLocaleString('en-US') : value >= 10 ? value.toFixed(1) : value.toFixed(2);
const pct = (value: number) => (value >= 1 ? `${value.toFixed(2)}×` : `${(value * 100).toFixed(1)} %`);

export interface ToolStepsOutput {
  rows: FigureRow[];
  /** The figure's own Markdown table and its target lines, as printed. */
  text: string;
  summaries: SystemSummary[];
  skipped: Record<string, string>;
}

export async function toolStepsFigure(
  settings: ToolStepSettings,
  log: (line: string) => void,
): Promise<ToolStepsOutput> {
  const systems = new Systems(settings, log);
  systems.prepare();
  for (const [peer, reason] of systems.skipped) log(`  tool steps: ${peer} skipped: ${reason}`);
  const measurements: Measurement[] = [];
  const pairs = new Map<ToolStepPeer, Measurement[]>();
  try {
    for (const peer of settings.peers) {
      if (systems.skipped.has(peer)) continue;
      log(
        `tool steps: the ledger and ${peer}, ${settings.rounds} rounds (A B, then B A), ${settings.connections} connections, ${settings.seconds} s after ${settings.warmupSeconds} s warm-up`,
      );
      const ledgerRuns: Measurement[] = [];
      try {
        for (let round = 0; round < settings.rounds; round++) {
          const order: SystemId[] = round % 2 === 0 ? ['ledger', peer] : [peer, 'ledger'];
          for (const system of order) {
            const m = await measure(systems, settings, system, round, log);
            measurements.push(m);
            if (system === 'ledger') ledgerRuns.push(m);
          }
        }
      } catch (error) {
        // One peer that fails mid-way is a printed line; its partial rounds are dropped.
        const reason = error instanceof Error ? error.message.split('\n')[0].slice(0, 300) : String(error);
        systems.skipped.set(peer, `failed while measured: ${reason}`);
        log(`  tool steps: ${peer} failed: ${reason}`);
        for (let i = measurements.length - 1; i >= 0; i--)
          if (measurements[i].system === peer) measurements.splice(i, 1);
        continue;
      }
      pairs.set(peer, ledgerRuns);
    }
  } finally {
    systems.close();
  }

  const ledgerAll = measurements.filter((m) => m.system === 'ledger');
  const summaries: SystemSummary[] = [];
  if (ledgerAll.length > 0) summaries.push(summarise('ledger', ledgerAll, []));
  for (const peer of settings.peers) {
    const own = measurements.filter((m) => m.system === peer);
    if (own.length > 0) summaries.push(summarise(peer, own, pairs.get(peer) ?? []));
  }
  const by = (system: SystemId) => summaries.find((s) => s.system === system);

  const lines = [
    '| system | steps/s median | p50 / p99 ms | CPU ms/step | peak memory (Pss) | ledger ÷ system (per-round range) |',
    '| --- | --- | --- | --- | --- | --- |',
  ];
  for (const s of summaries) {
    const ratio = s.ratio ? `${pct(s.ratio.value)} (${pct(s.ratio.min)}–${pct(s.ratio.max)})` : '—';
    lines.push(
      `| ${NAMES[s.system]} | ${fmt(s.stepsPerSecond)} | ${fmt(s.p50Ms)} / ${fmt(s.p99Ms)} | ${s.cpuMsPerStep.toFixed(2)} | ${s.peakMb.toFixed(0)} MB | ${ratio} |`,
    );
  }
  for (const peer of settings.peers) {
    const reason = systems.skipped.get(peer);
    if (reason) lines.push(`| ${NAMES[peer]} | skipped: ${reason} | | | | |`);
  }

  const ledger = by('ledger');
  const restate = by('restate');
  const group = by('sqlite-group');
  const targets: Array<{ text: string; met?: boolean; measured: string }> = [
    {
      text: 'ledger steps/s ≥ 2× Restate’s',
      ...(restate?.ratio
        ? { met: restate.ratio.value >= 2, measured: pct(restate.ratio.value) }
        : { measured: 'Restate not measured' }),
    },
    {
      text: 'ledger steps/s ≥ 30 % of the group-commit route',
      ...(group?.ratio
        ? { met: group.ratio.value >= 0.3, measured: pct(group.ratio.value) }
        : { measured: 'group-commit route not measured' }),
    },
    {
      text: 'ledger CPU per step ≤ 0.8 ms',
      ...(ledger
        ? { met: ledger.cpuMsPerStep <= 0.8, measured: `${ledger.cpuMsPerStep.toFixed(2)} ms` }
        : { measured: 'ledger not measured' }),
    },
  ];
  const targetLines = targets.map(
    (t) => `target: ${t.text}: ${t.measured}: ${t.met === undefined ? 'not measured' : t.met ? 'met' : 'not met'}`,
  );
  const text = [...lines, '', ...targetLines].join('\n');

  const rows: FigureRow[] = [];
  if (ledger) {
    for (const s of summaries) {
      if (!s.ratio) continue;
      const targetOf = s.system === 'restate' ? targets[0] : s.system === 'sqlite-group' ? targets[1] : undefined;
      rows.push({
        id: `ts-${s.system}`,
        name: `tool step (plan + dispatch, then envelope) vs ${s.system}, ${settings.connections} connections`,
        figure: {
          label: 'ledger',
          value: median((pairs.get(s.system as ToolStepPeer) ?? []).map((m) => m.result.stepsPerSecond)),
          unit: 'steps/s',
        },
        baseline: { label: s.system, value: s.stepsPerSecond, unit: 'steps/s' },
        ratio: s.ratio.value,
        ...(targetOf?.met !== undefined
          ? { target: { text: s.system === 'restate' ? '≥ 2×' : '≥ 30 %', met: targetOf.met } }
          : {}),
        details: {
          peer: s,
          rounds: measurements
            .filter((m) => m.system === s.system)
            .map((m) => ({ round: m.round, ...m.result, cpuMsPerStep: m.cpuMsPerStep, peakPssMb: m.peakPssMb })),
        },
      });
    }
    rows.push({
      id: 'ts-cpu',
      name: 'tool step: ledger CPU per step (median over its rounds)',
      figure: { label: 'ledger', value: ledger.cpuMsPerStep, unit: 'ms/step' },
      target: { text: '≤ 0.8 ms', met: ledger.cpuMsPerStep <= 0.8 },
      details: {
        ledger,
        rounds: ledgerAll.map((m) => ({
          round: m.round,
          ...m.result,
          cpuMsPerStep: m.cpuMsPerStep,
          peakPssMb: m.peakPssMb,
        })),
      },
    });
  }
  return { rows, text, summaries, skipped: Object.fromEntries(systems.skipped) };
}
