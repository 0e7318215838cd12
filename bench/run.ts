/**
 * `npm run bench`: every figure of docs/performance.md in one run, each beside its baseline measured right
 * before it on the same machine; prints the table and writes bench/results/latest.json.
 *
 *   npm run bench                      # the full run (1 M events; about 5–8 minutes on 2 cores, and 8 more for the tool-step figure)
 *   npm run bench -- --help            # this text, before anything is built or installed
 *   node dist/bench/run.js --events 200000 --seconds 5 --out /tmp/bench.json   # a quick one
 *   node dist/bench/run.js --only http,batch,store,large --profile /tmp/prof  # --cpu-prof of each service
 *   node dist/bench/run.js --only worker --seconds 10 --out /tmp/worker.json   # figure 8 alone
 *   node dist/bench/run.js --only tracing --out /tmp/tracing.json   # OpenTelemetry on / off, same load
 *   npm run bench -- --only tool-steps                 # the tool-step figure alone (or BENCH_ONLY=tool-steps)
 *   node dist/bench/run.js --only tool-steps --rounds 1 --peers restate,sqlite-group --step-warmup 2
 *   npm run bench -- --only pg-instances --rounds 2 --out bench/results/postgres-instances.json
 *
 * The tool-step figure (beside Restate, DBOS and three Fastify routes) has its own knobs: --rounds
 * (3; also the paired rounds of figure 8), --step-warmup (3 s), --peers (all of
 * restate,dbos,bare,sqlite-txn,sqlite-group); it shares --seconds and --connections. Its peers install on demand into bench/.peers; PostgreSQL for DBOS
 * comes from Debian (BENCH_INSTALL_SYSTEM_PEERS=1 lets the bench apt-get it when missing).
 *
 * The PostgreSQL instances figure (`pg-instances`, docs/postgres.md "Measured"): the same tool-step
 * load against one, two and three ledger instances on one private PostgreSQL cluster, the embedded
 * SQLite store and Restate, CPU per step of the ledger processes and the database together; draws
 * docs/postgres-instances.png (--chart FILE elsewhere). Knobs: --rounds, --step-warmup, --seconds,
 * --connections as above, --instances (3: the largest count measured, 2 or 3). Each round takes about two
 * minutes on a busy 2-core machine (6 minutes for 3 rounds, 11 for 5).
 *
 * Each load runs a warm-up first (--warmup, 5 s by default) that is not counted: the service's
 * first seconds are JIT compilation and lazy initialisation, measured at twice the steady-state
 * CPU per request.
 *
 * Loopback only, every loop bounded in time and count, data in a temporary directory that is
 * removed at the end (--keep keeps it). Not part of the test suite: no timing is ever asserted.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { batchSubmitFigure, rowsOfOneBatch } from './figures/batch-submit.figure';
import { httpSubmitFigures } from './figures/http-submit.figure';
import { postgresInstancesFigure } from './figures/postgres-instances.figure';
import { largeLogFigures } from './figures/large-log.figure';
import { storeAppendFigure } from './figures/store-append.figure';
import { TOOL_STEP_PEERS, toolStepsFigure, type ToolStepPeer } from './figures/tool-steps.figure';
import { tracingOverheadFigure } from './figures/tracing-overhead.figure';
import { workerStepsFigure } from './figures/worker-steps.figure';
import { machine, table, targetLines, writeJson, type FigureRow } from './support/report';

interface Options {
  events: number;
  seconds: number;
  warmupSeconds: number;
  connections: number;
  out: string;
  keep: boolean;
  only?: Set<string>;
  /** A directory for the service processes' --cpu-prof output. */
  profile?: string;
  /** The tool-step figure: rounds per peer, its warm-up, and the peers measured. */
  rounds: number;
  stepWarmupSeconds: number;
  peers: ToolStepPeer[];
  /** The PostgreSQL instances figure: the largest number of instances, and its chart. */
  instances: number;
  chart: string;
}

function options(argv: string[]): Options {
  const value = (name: string) => {
    const index = argv.indexOf(`--${name}`);
    return index >= 0 ? argv[index + 1] : undefined;
  };
  const number = (name: string, fallback: number, min: number, max: number) => {
    const raw = value(name);
    const parsed = raw === undefined ? fallback : Number(raw);
    if (!Number.isFinite(parsed) || parsed < min || parsed > max)
      throw new Error(`--${name} must be a number from ${min} to ${max}`);
    return parsed;
  };
  const only = value('only') ?? process.env.BENCH_ONLY;
  const profile = value('profile');
  const peers = (value('peers') ?? TOOL_STEP_PEERS.join(',')).split(',').filter((name) => name.length > 0);
  const unknown = peers.filter((name) => !(TOOL_STEP_PEERS as readonly string[]).includes(name));
  if (unknown.length > 0) throw new Error(`--peers takes ${TOOL_STEP_PEERS.join(',')}; unknown: ${unknown.join(',')}`);
  return {
    events: number('events', 1_000_000, 10_000, 5_000_000),
    seconds: number('seconds', 10, 1, 60),
    warmupSeconds: number('warmup', 5, 0, 30),
    connections: number('connections', 50, 1, 500),
    out: resolve(value('out') ?? join(__dirname, '../../bench/results/latest.json')),
    keep: argv.includes('--keep'),
    ...(only ? { only: new Set(only.split(',')) } : {}),
    ...(profile ? { profile: resolve(profile) } : {}),
    rounds: number('rounds', 3, 1, 20),
    stepWarmupSeconds: number('step-warmup', 3, 0, 30),
    peers: peers as ToolStepPeer[],
    instances: number('instances', 3, 2, 3),
    chart: resolve(value('chart') ?? join(__dirname, '../../docs/postgres-instances.png')),
  };
}

/** The commit measured, and whether the tree had changes on top of it. */
function revision(): { commit: string; dirty: boolean } | undefined {
  try {
    const commit = execFileSync('git', ['rev-parse', 'HEAD'], { encoding: 'utf8' }).trim();
    const dirty =
      execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' }).trim().length > 0;
    return { commit, dirty };
  } catch {
    return undefined;
  }
}

async function main(): Promise<void> {
  if (process.argv.includes('--help') || process.argv.includes('-h')) {
    // The usage is this file's header; scripts/bench.cjs prints the same before building.
    const header = /\/\*\*([\s\S]*?)\*\//.exec(readFileSync(__filename, 'utf8'));
    process.stdout.write(`${(header?.[1] ?? '').replace(/^[ \t]*\* ?/gm, '').trim()}\n`);
    return;
  }
  const settings = options(process.argv.slice(2));
  const dir = mkdtempSync(join(tmpdir(), 'ledger-bench-'));
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const started = performance.now();
  // Read before any figure runs: the charts a run writes into docs/ would mark every run dirty.
  const measured = revision();
  const host = machine();
  log(
    `recovery-ledger bench: ${host.nproc} cores, ${host.memory}, node ${host.node}, load average ${host.loadAverageAtStart.join(' ')}`,
  );
  log(`data in ${dir}`);
  const wanted = (group: string) => !settings.only || settings.only.has(group);
  const rows: FigureRow[] = [];
  let toolSteps: Awaited<ReturnType<typeof toolStepsFigure>> | undefined;
  let pgInstances: Awaited<ReturnType<typeof postgresInstancesFigure>> | undefined;
  try {
    const nodeArgs = settings.profile ? ['--cpu-prof', `--cpu-prof-dir=${settings.profile}`] : [];
    const common = {
      dir,
      seconds: settings.seconds,
      warmupSeconds: settings.warmupSeconds,
      connections: settings.connections,
      nodeArgs,
    };
    if (wanted('http')) rows.push(...(await httpSubmitFigures(common, log)));
    const batchRows = wanted('batch') || wanted('store') ? await rowsOfOneBatch(100) : [];
    if (wanted('batch')) rows.push(await batchSubmitFigure({ ...common, size: 100 }, batchRows, log));
    // A plan's StepPlanned row: the most common first event of a stream, of typical size.
    if (wanted('store')) rows.push(...(await storeAppendFigure(dir, batchRows[0], Math.min(settings.seconds, 5), log)));
    if (wanted('large')) rows.push(...(await largeLogFigures({ ...common, events: settings.events }, log)));
    if (wanted('worker')) rows.push(await workerStepsFigure({ ...common, open: 50, rounds: settings.rounds }, log));
    if (wanted('tracing')) rows.push(...(await tracingOverheadFigure(common, log)));
    // The tool-step load's settings, shared by the tool-step and PostgreSQL instances figures.
    const steps = {
      dir,
      seconds: settings.seconds,
      warmupSeconds: settings.stepWarmupSeconds,
      connections: settings.connections,
      rounds: settings.rounds,
    };
    if (wanted('tool-steps')) {
      toolSteps = await toolStepsFigure({ ...steps, peers: settings.peers, nodeArgs }, log);
      rows.push(...toolSteps.rows);
    }
    if (wanted('pg-instances')) {
      pgInstances = await postgresInstancesFigure(
        { ...steps, maxInstances: settings.instances, chart: settings.chart },
        log,
      );
      rows.push(...pgInstances.rows);
    }
  } finally {
    if (!settings.keep) rmSync(dir, { recursive: true, force: true });
  }
  host.loadAverageAtEnd = loadavg().map((value) => Number(value.toFixed(2)));
  const seconds = (performance.now() - started) / 1000;
  const output = table(rows);
  process.stdout.write(`\n${output}\n\n`);
  if (toolSteps)
    process.stdout.write(
      `the tool-step figure: one tool step recorded durably and idempotently and answered:\n\n${toolSteps.text}\n\n`,
    );
  if (pgInstances)
    process.stdout.write(
      `the PostgreSQL instances figure: tool steps with one and more ledger instances on one PostgreSQL:\n\n${pgInstances.text}\n\n`,
    );
  const targets = targetLines(rows);
  for (const t of targets)
    process.stdout.write(
      `target ${t.id} ${t.name}: ${t.target}: measured ${t.measured}: ${t.met ? 'met' : 'not met'}\n`,
    );
  process.stdout.write(
    `${rows.filter((row) => row.target?.met).length} of ${rows.filter((row) => row.target).length} targets met, in ${seconds.toFixed(0)} s\n`,
  );
  writeJson(settings.out, {
    machine: host,
    revision: measured,
    settings: { ...settings, only: settings.only ? [...settings.only] : undefined, out: undefined },
    seconds,
    figures: rows,
    targets,
    table: output,
    ...(toolSteps
      ? { toolSteps: { table: toolSteps.text, systems: toolSteps.summaries, skipped: toolSteps.skipped } }
      : {}),
    ...(pgInstances
      ? {
          postgresInstances: {
            table: pgInstances.text,
            measurements: pgInstances.measurements,
            skipped: pgInstances.skipped,
            chart: settings.chart,
          },
        }
      : {}),
  });
  log(`written: ${settings.out}`);
}

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
